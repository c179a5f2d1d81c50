//! The annotated model: inferred value_info for every intermediate and `memplan.*` metadata on
//! planned tensors and on the model, with nodes in the planned order.

use std::collections::HashMap;

use super::table::{FORMAT, Table, TensorEntry};
use crate::ir::Graph;
use crate::onnx::proto::{ModelProto, StringStringEntryProto, ValueInfoProto};

/// Returns a copy of `model` annotated with the plan in `table`; `table_file` is the sidecar's
/// file name recorded in the model metadata.
pub fn annotate(model: &ModelProto, graph: &Graph, table: &Table, table_file: &str) -> ModelProto {
    let entries: HashMap<&str, &TensorEntry> =
        table.tensors.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut out = typed_copy(model, graph, table.options.specialised_io, &|vi| {
        if let Some(entry) = entries.get(vi.name()) {
            set_plan_metadata(vi, entry);
        }
    });
    let g = out.graph.as_mut().expect("a loaded model has a graph");

    if table.schedule.iter().enumerate().any(|(i, &n)| i != n) {
        let mut nodes = std::mem::take(&mut g.node);
        let mut slots: Vec<_> = nodes.drain(..).map(Some).collect();
        g.node = table
            .schedule
            .iter()
            .map(|&i| slots[i].take().expect("schedule is a permutation"))
            .collect();
    }

    let mut meta = vec![
        ("memplan.format".to_string(), FORMAT.to_string()),
        (
            "memplan.alignment".to_string(),
            table.options.alignment.to_string(),
        ),
        ("memplan.table".to_string(), table_file.to_string()),
    ];
    for arena in &table.arenas {
        meta.push((
            format!("memplan.arena.{}.bytes", arena.id),
            arena.bytes.to_string(),
        ));
    }
    let scatters: Vec<&str> = table
        .tensors
        .iter()
        .filter_map(|t| t.scattered_by.as_deref())
        .collect();
    if !scatters.is_empty() {
        let names = serde_json::to_string(&scatters).expect("names serialise");
        meta.push((crate::ir::SCATTER_KEY.to_string(), names));
    }
    set_entries(&mut out.metadata_props, meta);
    out
}

fn set_plan_metadata(vi: &mut ValueInfoProto, entry: &TensorEntry) {
    let (Some(arena), Some(offset)) = (entry.arena, entry.offset) else {
        return;
    };
    let mut meta = vec![
        ("memplan.arena".to_string(), arena.to_string()),
        ("memplan.offset".to_string(), offset.to_string()),
        (
            "memplan.bytes".to_string(),
            entry.bytes.unwrap_or(0).to_string(),
        ),
        (
            "memplan.lifetime".to_string(),
            format!("{}:{}", entry.first, entry.last),
        ),
    ];
    if let Some(of) = &entry.inplace_of {
        meta.push(("memplan.inplace_of".to_string(), of.clone()));
    }
    if let Some(of) = &entry.alias_of {
        meta.push(("memplan.alias_of".to_string(), of.clone()));
    }
    if let Some(strides) = &entry.strides {
        let text: Vec<String> = strides.iter().map(u64::to_string).collect();
        meta.push(("memplan.strides".to_string(), text.join(",")));
    }
    set_entries(&mut vi.metadata_props, meta);
}

/// Replaces every `memplan.*` entry with the given ones, keeping all other entries.
fn set_entries(props: &mut Vec<StringStringEntryProto>, entries: Vec<(String, String)>) {
    props.retain(|p| !p.key().starts_with("memplan."));
    props.extend(entries.into_iter().map(|(k, v)| StringStringEntryProto {
        key: Some(k),
        value: Some(v),
    }));
}

/// The model with every inferred type written in, as onnx's shape inference does: graph
/// inputs/outputs without a type get one (all of them get their inferred type when
/// `specialise`), and each node output gets a value_info entry.
pub fn with_inferred_types(model: &ModelProto, graph: &Graph, specialise: bool) -> ModelProto {
    typed_copy(model, graph, specialise, &|_| {})
}

/// Copies the model, writes inferred types and lets `mark` annotate each top-level
/// ValueInfoProto it touches. With `specialise`, the graph's inputs and outputs take their
/// inferred types (the shapes the inputs were bound to), as onnxsim's
/// `--overwrite-input-shape` does, so the model stays valid for exactly those shapes.
fn typed_copy(
    model: &ModelProto,
    graph: &Graph,
    specialise: bool,
    mark: &dyn Fn(&mut ValueInfoProto),
) -> ModelProto {
    let mut out = model.clone();
    let g = out.graph.as_mut().expect("a loaded model has a graph");
    for vi in g.input.iter_mut().chain(g.output.iter_mut()) {
        if (specialise || vi.r#type.is_none())
            && let Some(ty) = graph.value(vi.name()).and_then(|v| v.ty.as_ref())
        {
            vi.r#type = Some(ty.to_proto());
        }
        mark(vi);
    }

    let io: std::collections::HashSet<String> = g
        .input
        .iter()
        .chain(&g.output)
        .map(|v| v.name().to_string())
        .chain(g.initializer.iter().map(|t| t.name().to_string()))
        .collect();
    let mut existing: HashMap<String, ValueInfoProto> = g
        .value_info
        .drain(..)
        .map(|vi| (vi.name().to_string(), vi))
        .collect();
    let mut value_info = Vec::new();
    for node in &g.node {
        for name in node
            .output
            .iter()
            .filter(|o| !o.is_empty() && !io.contains(*o))
        {
            let mut vi = existing.remove(name).unwrap_or_else(|| ValueInfoProto {
                name: Some(name.clone()),
                ..Default::default()
            });
            if let Some(ty) = graph.value(name).and_then(|v| v.ty.as_ref()) {
                vi.r#type = Some(ty.to_proto());
            }
            mark(&mut vi);
            value_info.push(vi);
        }
    }
    // Entries the model declared for names we do not own (e.g. subgraph values) stay.
    let mut rest: Vec<_> = existing.into_values().collect();
    rest.sort_by(|a, b| a.name().cmp(b.name()));
    value_info.extend(rest);
    g.value_info = value_info;

    out
}
