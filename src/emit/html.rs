//! A self-contained HTML report: the summary, the space-time diagram and the tables.

use std::fmt::Write;

use super::svg::{ColourBy, escape, human, render_svg};
use super::table::Table;

const STYLE: &str = "body{font-family:DejaVu Sans,Arial,sans-serif;margin:24px;color:#222}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px}\
.summary{background:#f4f6f8;padding:10px 14px;border-left:4px solid #4e79a7;font-family:monospace;white-space:pre-wrap}\
table{border-collapse:collapse;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid #e3e3e3;text-align:left}\
th{background:#f0f0f0;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.figure{overflow-x:auto;border:1px solid #ddd;margin-top:8px}.scroll{max-height:640px;overflow-y:auto}";

/// The report page for `table`, headed by the one-line `summary`.
pub fn render_html(table: &Table, summary: &str, colour: ColourBy) -> String {
    let mut out = String::with_capacity(400 * table.tensors.len() + 8192);
    let title = escape(&format!("onnx-memplan: {}", table.model.file));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n<div class=\"summary\">{}</div>\n",
        escape(summary)
    );
    facts(&mut out, table);
    out.push_str("<h2>Arenas</h2>\n<table><tr><th>id</th><th>name</th><th>bytes</th><th>capacity</th><th>latency</th><th>bandwidth</th></tr>\n");
    for a in &table.arenas {
        let (cap, lat, bw) = a.tier.as_ref().map_or_else(
            || (String::new(), String::new(), String::new()),
            |t| {
                (
                    human(t.capacity),
                    t.latency.to_string(),
                    t.bandwidth.to_string(),
                )
            },
        );
        let _ = writeln!(
            out,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{cap}</td><td class=\"n\">{lat}</td><td class=\"n\">{bw}</td></tr>",
            a.id,
            escape(&a.name),
            a.bytes
        );
    }
    out.push_str("</table>\n<h2>Space-time diagram</h2>\n<div class=\"figure\">");
    out.push_str(&render_svg(table, colour));
    out.push_str("</div>\n");
    transfers(&mut out, table);
    workspaces(&mut out, table);
    tensors(&mut out, table);
    out.push_str("</body></html>\n");
    out
}

/// Plan statistics and the modes' outcomes as a two-column table.
fn facts(out: &mut String, table: &Table) {
    let s = &table.stats;
    let mut rows = vec![
        (
            "lower bound",
            format!("{} ({})", s.lower_bound_bytes, human(s.lower_bound_bytes)),
        ),
        (
            "naive",
            format!("{} ({})", s.naive_bytes, human(s.naive_bytes)),
        ),
        ("planner", s.planner.clone()),
        ("schedule", s.schedule.clone()),
        ("alignment", table.options.alignment.to_string()),
    ];
    if let Some(h) = &table.hierarchy {
        let drop = if h.cost_initial > 0.0 {
            100.0 * (1.0 - h.cost_final / h.cost_initial)
        } else {
            0.0
        };
        rows.push((
            "estimated cost E(s)",
            format!(
                "{:.1} → {:.1} cycles ({drop:.1}% less; segment {}, {} actions)",
                h.cost_initial, h.cost_final, h.segment, h.actions
            ),
        ));
    }
    if let Some(o) = &table.offload {
        rows.push((
            "device budget",
            format!(
                "{} ({}); migrated {} bytes in {} transfers; {}: {}",
                o.budget,
                human(o.budget),
                o.migrated_bytes,
                o.transfers.len(),
                o.baseline,
                o.baseline_migrated_bytes
                    .map_or("cannot fit".to_string(), |b| format!("{b} bytes"))
            ),
        ));
    }
    if let Some(p) = &table.partition {
        let units: Vec<String> = p
            .units
            .iter()
            .map(|u| format!("{} ({} nodes, alignment {})", u.name, u.nodes, u.alignment))
            .collect();
        rows.push(("units", units.join(", ")));
    }
    out.push_str("<table>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    out.push_str("</table>\n");
}

fn transfers(out: &mut String, table: &Table) {
    let Some(o) = table.offload.as_ref().filter(|o| !o.transfers.is_empty()) else {
        return;
    };
    out.push_str("<h2>Host transfers</h2>\n<div class=\"scroll\"><table><tr><th>tensor</th><th>out after step</th><th>in before step</th><th>back at offset</th><th>bytes</th></tr>\n");
    for t in &o.transfers {
        let back = t
            .in_offset
            .map_or_else(|| "same".to_string(), |o| o.to_string());
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{back}</td><td class=\"n\">{}</td></tr>",
            escape(&t.tensor),
            t.out_after,
            t.in_before,
            t.bytes
        );
    }
    out.push_str("</table></div>\n");
}

fn workspaces(out: &mut String, table: &Table) {
    let Some(p) = table
        .partition
        .as_ref()
        .filter(|p| !p.workspaces.is_empty() || !p.unplanned.is_empty())
    else {
        return;
    };
    out.push_str("<h2>Subgraph workspaces</h2>\n<table><tr><th>node</th><th>step</th><th>offset</th><th>bytes</th><th>bodies</th></tr>\n");
    for w in &p.workspaces {
        let bodies: Vec<String> = w
            .bodies
            .iter()
            .map(|b| {
                format!(
                    "{} ({} tensors, {} bytes)",
                    b.attribute,
                    b.tensors.len(),
                    b.bytes
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            w.node,
            w.step,
            w.offset,
            w.bytes,
            escape(&bodies.join("; "))
        );
    }
    for u in &p.unplanned {
        let _ = writeln!(
            out,
            "<tr><td colspan=\"5\">not planned: {}</td></tr>",
            escape(u)
        );
    }
    out.push_str("</table>\n");
}

fn tensors(out: &mut String, table: &Table) {
    out.push_str("<h2>Tensors</h2>\n<div class=\"scroll\"><table><tr><th>name</th><th>kind</th><th>dtype</th><th>shape</th><th>bytes</th><th>first</th><th>last</th><th>arena</th><th>offset</th><th>shares</th><th>unit</th></tr>\n");
    for t in &table.tensors {
        let opt = |v: Option<String>| v.unwrap_or_default();
        let shape = t
            .shape
            .as_ref()
            .map(|s| s.iter().map(i64::to_string).collect::<Vec<_>>().join("×"));
        let shares = match (&t.inplace_of, &t.alias_of) {
            (Some(x), _) => format!("in place of {x}"),
            (_, Some(x)) => match t.alias_offset {
                Some(k) => format!("alias of {x} +{k}"),
                None => format!("alias of {x}"),
            },
            _ => String::new(),
        };
        let unit = match &t.placement.unit {
            Some(u) if t.placement.shared_with.is_empty() => u.clone(),
            Some(u) => format!("{u} (shared with {})", t.placement.shared_with.join(", ")),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&t.name),
            t.kind,
            escape(&opt(t.placement.stored_dtype.clone().or(t.dtype.clone()))),
            opt(shape),
            t.extent(),
            t.first,
            t.last,
            opt(t.arena.map(|a| a.to_string())),
            opt(t.offset.map(|o| o.to_string())),
            escape(&shares),
            escape(&unit)
        );
    }
    out.push_str("</table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::svg::fixtures::chain_table;

    #[test]
    fn page_holds_summary_figure_and_rows() {
        let table = chain_table();
        let html = render_html(&table, "chain.onnx: arena 128 bytes <ok>", ColourBy::Kind);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("arena 128 bytes &lt;ok&gt;"));
        assert!(html.contains("<svg"));
        assert_eq!(html.matches("<tr><td>").count(), 3, "one row per tensor");
        assert!(html.contains("in place of a &lt;b&gt;"));
    }
}
