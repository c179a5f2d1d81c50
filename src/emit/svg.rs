//! The space-time diagram of a plan: steps across, addresses up, one rectangle per placed
//! tensor, one panel per arena (memory tier). Pure function of the allocation table.

use std::fmt::Write;

use super::table::{Run, Table, TensorEntry};

/// What the rectangles' fill says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ColourBy {
    /// Input, output, intermediate, in-place or alias.
    #[default]
    Kind,
    /// The arena (memory tier) holding the tensor.
    Tier,
}

/// Width of the drawing area in pixels (the whole figure adds margins).
const PLOT_W: f64 = 1200.0;
/// Height of one arena's panel in pixels.
const PANEL_H: f64 = 440.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 56.0;
const GAP: f64 = 64.0;
const BOTTOM: f64 = 40.0;

const KIND_COLOURS: [(&str, &str); 5] = [
    ("input", "#4e79a7"),
    ("output", "#e15759"),
    ("intermediate", "#a0cbe8"),
    ("in-place", "#f28e2b"),
    ("alias", "#59a14f"),
];
const TIER_COLOURS: [&str; 6] = [
    "#f28e2b", "#4e79a7", "#76b7b2", "#b07aa1", "#edc948", "#9c755f",
];

/// The diagram as a standalone SVG document.
pub fn render_svg(table: &Table, colour: ColourBy) -> String {
    let steps = table.schedule.len().max(1);
    let panels = table.arenas.len().max(1);
    let width = LEFT + PLOT_W + RIGHT;
    let height = TOP + panels as f64 * (PANEL_H + GAP) - GAP + BOTTOM;
    let mut out = String::with_capacity(256 * table.tensors.len() + 4096);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"#
    );
    out.push_str(
        r##"<style>.t rect{stroke:#ffffff;stroke-width:0.4}.t rect:hover{stroke:#000;stroke-width:1.5}.ax{stroke:#444;stroke-width:1}.grid{stroke:#e6e6e6;stroke-width:1}.lb{stroke:#d62728;stroke-width:1.5;stroke-dasharray:6 4}.cap{stroke:#555;stroke-width:1.2;stroke-dasharray:2 3}.live{fill:none;stroke:#333;stroke-width:1;stroke-opacity:0.6}.away{fill:none;stroke:#888;stroke-width:0.8;stroke-dasharray:3 2}.shared{fill:none;stroke:#222;stroke-width:1.4}.ws{fill:#d9d9d9;stroke:#555;stroke-width:1;stroke-dasharray:4 2}</style>"##,
    );
    out.push_str(r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = write!(
        out,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(&format!(
            "{}: {} tensors, {} steps",
            table.model.file,
            table.tensors.iter().filter(|t| t.offset.is_some()).count(),
            table.schedule.len()
        ))
    );
    legend(&mut out, table, colour);
    let runs = table.runs();
    for (p, arena) in table.arenas.iter().enumerate() {
        let top = TOP + p as f64 * (PANEL_H + GAP);
        let members: Vec<(&TensorEntry, &[Run])> = table
            .tensors
            .iter()
            .zip(&runs)
            .filter(|(t, _)| t.arena == Some(arena.id) && t.offset.is_some() && t.extent() > 0)
            .map(|(t, r)| (t, r.as_slice()))
            .collect();
        let live = live_bytes(&members, steps);
        let single = table.arenas.len() == 1;
        let bound = if single {
            table.stats.lower_bound_bytes
        } else {
            0
        };
        let capacity = arena.tier.as_ref().map_or(0, |t| t.capacity);
        let top_bytes = arena
            .bytes
            .max(bound)
            .max(live.iter().copied().max().unwrap_or(0))
            .max(if capacity <= arena.bytes.saturating_mul(2) {
                capacity
            } else {
                0
            })
            .max(1);
        let panel = Panel {
            top,
            steps,
            top_bytes,
        };
        let title = match &arena.tier {
            Some(t) => format!(
                "arena {} '{}': {} used of {} (latency {}, {} B/cycle)",
                arena.id,
                arena.name,
                human(arena.bytes),
                human(t.capacity),
                t.latency,
                t.bandwidth
            ),
            None => format!(
                "arena {} '{}': {}",
                arena.id,
                arena.name,
                human(arena.bytes)
            ),
        };
        let _ = write!(
            out,
            r#"<text x="{LEFT}" y="{:.1}" font-weight="bold">{}</text>"#,
            top - 8.0,
            escape(&title)
        );
        panel.axes(&mut out);
        panel.rects(&mut out, table, &members, colour, p);
        if arena.id == 0 {
            panel.workspaces(&mut out, table);
        }
        panel.live_line(&mut out, &live);
        if bound > 0 {
            panel.level(
                &mut out,
                bound,
                "lb",
                &format!("lower bound {}", human(bound)),
            );
        }
        if capacity > 0 && capacity <= top_bytes {
            panel.level(
                &mut out,
                capacity,
                "cap",
                &format!("capacity {}", human(capacity)),
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// One arena's coordinate system.
struct Panel {
    top: f64,
    steps: usize,
    top_bytes: u64,
}

impl Panel {
    fn x(&self, step: usize) -> f64 {
        LEFT + step as f64 * PLOT_W / self.steps as f64
    }

    fn y(&self, addr: u64) -> f64 {
        self.top + PANEL_H - addr as f64 * PANEL_H / self.top_bytes as f64
    }

    fn axes(&self, out: &mut String) {
        let bottom = self.top + PANEL_H;
        let (unit, name) = byte_unit(self.top_bytes);
        for tick in nice_ticks(self.top_bytes as f64 / unit as f64, 8) {
            let addr = (tick * unit as f64).round() as u64;
            let y = self.y(addr);
            let _ = write!(
                out,
                r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{} {name}</text>"#,
                LEFT + PLOT_W,
                LEFT - 6.0,
                y + 4.0,
                trim_float(tick)
            );
        }
        for tick in nice_ticks(self.steps as f64, 12) {
            let x = self.x(tick as usize);
            let _ = write!(
                out,
                r#"<line class="ax" x1="{x:.1}" x2="{x:.1}" y1="{bottom:.1}" y2="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                bottom + 5.0,
                bottom + 18.0,
                tick as usize
            );
        }
        let _ = write!(
            out,
            r##"<line class="ax" x1="{LEFT}" x2="{LEFT}" y1="{:.1}" y2="{bottom:.1}"/><line class="ax" x1="{LEFT}" x2="{:.1}" y1="{bottom:.1}" y2="{bottom:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">step</text>"##,
            self.top,
            LEFT + PLOT_W,
            LEFT + PLOT_W / 2.0,
            bottom + 33.0
        );
    }

    /// One rectangle per tensor (split where it waits in host memory), with a hover title and,
    /// when there is room, its name.
    fn rects(
        &self,
        out: &mut String,
        table: &Table,
        members: &[(&TensorEntry, &[Run])],
        colour: ColourBy,
        panel: usize,
    ) {
        out.push_str(r#"<g class="t" shape-rendering="crispEdges">"#);
        let mut labels = String::new();
        let mut outlines = String::new();
        for &(t, runs) in members {
            let mut offset = t.offset.unwrap_or(0);
            let y_of = |offset: u64| (self.y(offset + t.extent()), self.y(offset));
            let (mut y0, y1) = y_of(offset);
            let height = (y1 - y0).max(0.8);
            let fill = match colour {
                ColourBy::Kind => kind_colour(t),
                ColourBy::Tier => TIER_COLOURS[panel % TIER_COLOURS.len()],
            };
            let tip = escape(&tooltip(t, table));
            for run in runs {
                let x0 = self.x(run.first);
                let width = (self.x(run.last + 1) - x0).max(0.8);
                if let Some(at) = run.offset {
                    offset = at;
                    y0 = y_of(offset).0;
                    let _ = write!(
                        out,
                        r#"<rect x="{x0:.2}" y="{y0:.2}" width="{width:.2}" height="{height:.2}" fill="{fill}"><title>{tip}</title></rect>"#
                    );
                } else {
                    let _ = write!(
                        outlines,
                        r#"<rect class="away" x="{x0:.2}" y="{y0:.2}" width="{width:.2}" height="{height:.2}"><title>{tip} (in host memory)</title></rect>"#
                    );
                }
            }
            let y0 = y_of(t.offset.unwrap_or(0)).0;
            if !t.placement.shared_with.is_empty() {
                let x0 = self.x(t.first);
                let width = (self.x(t.last + 1) - x0).max(0.8);
                let _ = write!(
                    outlines,
                    r#"<rect class="shared" x="{x0:.2}" y="{y0:.2}" width="{width:.2}" height="{height:.2}"/>"#
                );
            }
            let x0 = self.x(t.first);
            let width = self.x(t.last + 1) - x0;
            let fits = (width / 6.5).floor() as usize;
            if height >= 13.0 && fits >= 4 {
                let _ = write!(
                    labels,
                    r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#1a1a1a">{}</text>"##,
                    x0 + 2.0,
                    y0 + height.min(26.0) / 2.0 + 4.0,
                    escape(&shorten(&t.name, fits))
                );
            }
        }
        out.push_str("</g>");
        out.push_str(&outlines);
        let _ = write!(out, r#"<g pointer-events="none">{labels}</g>"#);
    }

    /// The workspaces of nodes holding subgraphs (partition mode), hatched grey.
    fn workspaces(&self, out: &mut String, table: &Table) {
        for w in table.partition.iter().flat_map(|p| &p.workspaces) {
            let (x0, y0) = (self.x(w.step), self.y(w.offset + w.bytes));
            let width = (self.x(w.step + 1) - x0).max(0.8);
            let height = (self.y(w.offset) - y0).max(0.8);
            let bodies: Vec<&str> = w.bodies.iter().map(|b| b.attribute.as_str()).collect();
            let _ = write!(
                out,
                r#"<rect class="ws" x="{x0:.2}" y="{y0:.2}" width="{width:.2}" height="{height:.2}"><title>{}</title></rect>"#,
                escape(&format!(
                    "workspace of node {} at step {}: {} bytes at offset {} ({})",
                    w.node,
                    w.step,
                    w.bytes,
                    w.offset,
                    bodies.join(", ")
                ))
            );
        }
    }

    /// Bytes live at each step, as a stepped line.
    fn live_line(&self, out: &mut String, live: &[u64]) {
        let mut points = String::new();
        for (s, &bytes) in live.iter().enumerate() {
            let y = self.y(bytes);
            let _ = write!(
                points,
                "{:.1},{y:.1} {:.1},{y:.1} ",
                self.x(s),
                self.x(s + 1)
            );
        }
        let _ = write!(
            out,
            r#"<polyline class="live" points="{}"><title>bytes live per step</title></polyline>"#,
            points.trim_end()
        );
    }

    /// A horizontal dashed line at `bytes` with a label.
    fn level(&self, out: &mut String, bytes: u64, class: &str, label: &str) {
        let y = self.y(bytes);
        let _ = write!(
            out,
            r#"<line class="{class}" x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            LEFT + PLOT_W,
            LEFT + PLOT_W - 4.0,
            y - 4.0,
            if class == "lb" { "#d62728" } else { "#333" },
            escape(label)
        );
    }
}

fn legend(out: &mut String, table: &Table, colour: ColourBy) {
    let mut x = LEFT + PLOT_W;
    let items: Vec<(String, &str)> = match colour {
        ColourBy::Kind => KIND_COLOURS
            .iter()
            .rev()
            .map(|&(k, c)| (k.to_string(), c))
            .collect(),
        ColourBy::Tier => table
            .arenas
            .iter()
            .enumerate()
            .rev()
            .map(|(i, a)| (a.name.clone(), TIER_COLOURS[i % TIER_COLOURS.len()]))
            .collect(),
    };
    for (name, fill) in items {
        x -= 7.0 * name.chars().count() as f64 + 30.0;
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="12" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="22">{}</text>"#,
            x + 16.0,
            escape(&name)
        );
    }
}

/// The fill for a tensor's kind; sharing (in-place, alias) wins over input/output.
fn kind_colour(t: &TensorEntry) -> &'static str {
    let key = if t.inplace_of.is_some() {
        "in-place"
    } else if t.alias_of.is_some() {
        "alias"
    } else {
        t.kind.as_str()
    };
    KIND_COLOURS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("#bab0ac", |(_, c)| c)
}

fn tooltip(t: &TensorEntry, table: &Table) -> String {
    let mut s = format!("{} ({})", t.name, t.kind);
    if let Some(d) = &t.dtype {
        let shape = t.shape.as_ref().map_or_else(String::new, |s| {
            format!(
                "[{}]",
                s.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
            )
        });
        let _ = write!(s, " {d}{shape}");
    }
    let _ = write!(
        s,
        "\n{} bytes at offset {}, steps {}..{}",
        t.extent(),
        t.offset.unwrap_or(0),
        t.first,
        t.last
    );
    if let Some(a) = table.arenas.iter().find(|a| Some(a.id) == t.arena)
        && table.arenas.len() > 1
    {
        let _ = write!(s, " in {}", a.name);
    }
    if let Some(x) = &t.inplace_of {
        let _ = write!(s, "\nin place of {x}");
    }
    if let Some(x) = &t.alias_of {
        let _ = write!(s, "\nalias of {x}");
        if let Some(k) = t.alias_offset {
            let _ = write!(s, " +{k}");
        }
    }
    if let Some(u) = &t.placement.unit {
        let _ = write!(s, "\nunit {u}");
        if !t.placement.shared_with.is_empty() {
            let _ = write!(s, ", shared with {}", t.placement.shared_with.join(", "));
        }
    }
    s
}

/// Bytes occupied at each step: the union of the resident tensors' byte ranges.
fn live_bytes(members: &[(&TensorEntry, &[Run])], steps: usize) -> Vec<u64> {
    let mut at: Vec<Vec<(u64, u64)>> = vec![Vec::new(); steps];
    for &(t, runs) in members {
        for run in runs {
            if let Some(start) = run.offset {
                for ranges in &mut at[run.first.min(steps - 1)..=run.last.min(steps - 1)] {
                    ranges.push((start, start + t.extent()));
                }
            }
        }
    }
    at.into_iter()
        .map(|mut ranges| {
            ranges.sort_unstable();
            let (mut total, mut end) = (0, 0);
            for (a, b) in ranges {
                let a = a.max(end);
                if b > a {
                    total += b - a;
                    end = b;
                }
            }
            total
        })
        .collect()
}

/// About `target` round tick values in `[0, max]`: multiples of 1, 2 or 5 × 10^k.
fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    if max <= 0.0 {
        return vec![0.0];
    }
    let raw = max / target as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    let step = if max >= 1.0 { step.max(1.0) } else { step };
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|&v| v <= max + step * 1e-9)
        .collect()
}

/// The largest of B, KiB, MiB, GiB not above `bytes`.
fn byte_unit(bytes: u64) -> (u64, &'static str) {
    [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(u, _)| bytes >= u)
        .unwrap_or((1, "B"))
}

/// `bytes` in the largest fitting binary unit, e.g. `3.1 MiB`.
pub fn human(bytes: u64) -> String {
    let (unit, name) = byte_unit(bytes);
    if unit == 1 {
        format!("{bytes} B")
    } else {
        format!("{:.1} {name}", bytes as f64 / unit as f64)
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The name cut to its last `chars` characters (names often share long prefixes), without
/// the `_output_0` most exporters append.
fn shorten(name: &str, chars: usize) -> String {
    let name = name.strip_suffix("_output_0").unwrap_or(name);
    let count = name.chars().count();
    if count <= chars {
        name.to_string()
    } else {
        let tail: String = name.chars().skip(count + 1 - chars.max(1)).collect();
        format!("…{tail}")
    }
}

/// Escapes text for XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fixtures::{chain_table, wide_table};

    #[test]
    fn one_rect_per_placed_tensor_with_title() {
        let table = chain_table();
        let svg = render_svg(&table, ColourBy::Kind);
        assert!(svg.starts_with("<svg"));
        assert_eq!(
            svg.matches("<rect x=").count() - 5,
            3,
            "3 tensors + 5 legend boxes"
        );
        assert_eq!(svg.matches("<title>").count(), 4, "3 tensors + live line");
        assert!(svg.contains("lower bound"));
        assert!(svg.contains("a &lt;b&gt; (intermediate)"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_ticks(10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(3.0, 12), vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(human(5120), "5.0 KiB");
        assert_eq!(human(100), "100 B");
    }

    #[test]
    fn large_tables_stay_compact() {
        let table = wide_table(1500);
        let svg = render_svg(&table, ColourBy::Tier);
        assert_eq!(
            svg.matches("<title>").count(),
            1500 + 2,
            "tensors + one live line per arena"
        );
        assert!(svg.len() < 600 * 1500, "{} bytes", svg.len());
    }

    #[test]
    fn transfers_split_the_rectangle() {
        let mut table = chain_table();
        table.offload = Some(crate::emit::OffloadInfo {
            budget: 1 << 20,
            method: "spill".into(),
            migrated_bytes: 128,
            segments_migrated_bytes: None,
            spill_migrated_bytes: Some(128),
            baseline: "farthest next use".into(),
            baseline_migrated_bytes: Some(256),
            transfers: vec![crate::emit::Transfer {
                tensor: "x".into(),
                aliases: Vec::new(),
                out_after: 0,
                in_before: 2,
                in_offset: Some(256),
                bytes: 64,
                copy_out: true,
            }],
        });
        let x = table.tensors.iter().position(|t| t.name == "x").unwrap();
        let at = table.tensors[x].offset;
        let run = |first, last, offset| Run {
            first,
            last,
            offset,
        };
        assert_eq!(
            table.runs()[x],
            vec![run(0, 0, at), run(1, 1, None), run(2, 2, Some(256))]
        );
        assert!(render_svg(&table, ColourBy::Kind).contains("in host memory"));
    }
}

/// Small tables for the emitters' tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::BTreeMap;

    use crate::emit::{Arena, ModelInfo, Stats, Table, TableOptions, TensorEntry, TierInfo};

    fn entry(
        name: &str,
        kind: &str,
        bytes: u64,
        life: (usize, usize),
        at: (usize, u64),
    ) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            dtype: Some("float32".into()),
            shape: Some(vec![(bytes / 4) as i64]),
            bytes: Some(bytes),
            kind: kind.into(),
            first: life.0,
            last: life.1,
            arena: Some(at.0),
            offset: Some(at.1),
            inplace_of: None,
            alias_of: None,
            alias_offset: None,
            strides: None,
            scattered_by: None,
            node_unit: None,
            placement: Default::default(),
            symbolic: Default::default(),
        }
    }

    fn table(tensors: Vec<TensorEntry>, steps: usize, arenas: Vec<Arena>) -> Table {
        Table {
            format: crate::emit::FORMAT.into(),
            model: ModelInfo {
                file: "chain.onnx".into(),
                sha256: String::new(),
                ir_version: 8,
                opsets: BTreeMap::new(),
            },
            options: TableOptions {
                qdq: None,
                alignment: 64,
                inplace: true,
                alias: true,
                include_io: true,
                dims: BTreeMap::new(),
                input_shapes: BTreeMap::new(),
                input_values: BTreeMap::new(),
                specialised_io: false,
                ranges: BTreeMap::new(),
            },
            schedule: (0..steps).collect(),
            arenas,
            stats: Stats {
                lower_bound_bytes: 128,
                naive_bytes: 192,
                planner: "test".into(),
                schedule: "stored".into(),
                stored_lower_bound_bytes: 128,
                proven_optimal: true,
                searches: Vec::new(),
            },
            tensors,
            branches: Vec::new(),
            hierarchy: None,
            offload: None,
            partition: None,
            splits: None,
            parametric: None,
            data_dependent: Vec::new(),
        }
    }

    /// x → a → y over three steps, 64 bytes each, in one 128-byte arena.
    pub fn chain_table() -> Table {
        let mut y = entry("y", "output", 64, (1, 2), (0, 0));
        y.inplace_of = Some("a <b>".into());
        table(
            vec![
                entry("x", "input", 64, (0, 2), (0, 64)),
                entry("a <b>", "intermediate", 64, (0, 1), (0, 0)),
                y,
            ],
            3,
            vec![Arena {
                id: 0,
                name: "main".into(),
                bytes: 128,
                tier: None,
            }],
        )
    }

    /// `n` tensors with staggered lifetimes over two tiers.
    pub fn wide_table(n: usize) -> Table {
        let tensors = (0..n)
            .map(|i| {
                let size = 64 * (1 + (i * 7919 % 13) as u64);
                let arena = usize::from(i % 5 == 0);
                let slot = (i % 40) as u64 * 1024;
                entry(
                    &format!("t{i}"),
                    "intermediate",
                    size,
                    (i, i + 1 + i % 7),
                    (arena, slot),
                )
            })
            .collect();
        let tier = |capacity| {
            Some(TierInfo {
                capacity,
                latency: 1.0,
                bandwidth: 64.0,
            })
        };
        table(
            tensors,
            n + 8,
            vec![
                Arena {
                    id: 0,
                    name: "sram".into(),
                    bytes: 40 * 1024,
                    tier: tier(64 * 1024),
                },
                Arena {
                    id: 1,
                    name: "dram".into(),
                    bytes: 40 * 1024,
                    tier: tier(1 << 30),
                },
            ],
        )
    }
}
