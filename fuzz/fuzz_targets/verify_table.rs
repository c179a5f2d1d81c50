//! Fuzz target: `verify` on a real model with a mutated allocation table.
//!
//! At start-up the pass plans real models from `models/` in several modes (flat, memory
//! schedule, symbolic dims bound, device budget, memory tiers, compute units); each plan is
//! checked to verify. The input picks one of these tables and a list of edits applied to its
//! JSON tree: set a field to a number, string, tensor name, null or bool, nudge a number,
//! remove, duplicate or swap an element. The edited JSON is read as a table (as `verify` reads
//! the file), re-typed when its `dims`/`input_shapes` changed, and checked by the verifier.
//!
//! Finding: a panic, or an error that is not an input error (the CLI's exit 1 for a reason
//! other than "invalid plan").
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onnx_memplan::emit::{FORMAT, Table};
use onnx_memplan::error::is_input_error;
use onnx_memplan::infer::InferOptions;
use onnx_memplan::ir::Graph;
use onnx_memplan::modes::hierarchy::parse_tiers;
use onnx_memplan::modes::partition::Partition;
use onnx_memplan::pipeline::{Options, ScheduleChoice, load_typed, plan_model};
use onnx_memplan::verify::check_table;
use serde_json::Value;

/// A planned model: its file, the typed graph and the table as JSON.
struct Base {
    path: PathBuf,
    graph: Graph,
    table: Table,
    json: Value,
    names: Vec<String>,
}

fn model(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(name)
}

fn plan(name: &str, edit: impl FnOnce(&mut Options)) -> Base {
    let path = model(name);
    let mut options = Options::default();
    edit(&mut options);
    let planned = plan_model(&path, &options).expect("the base plans");
    let json = serde_json::to_value(&planned.table).expect("the table encodes");
    let names = planned
        .table
        .tensors
        .iter()
        .map(|t| t.name.clone())
        .collect();
    Base {
        path,
        graph: planned.model.graph,
        table: planned.table,
        json,
        names,
    }
}

const PARTITION: &str = r#"{
  "units": [
    {"name": "npu", "alignment": 256, "quantize_outputs": true},
    {"name": "cpu", "alignment": 64}
  ],
  "default": "cpu",
  "op_types": {"MatMul": "npu", "Add": "npu", "Softmax": "npu"}
}"#;

fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let bound = |o: &mut Options| {
            o.infer.dims.insert("batch".into(), 1);
            o.infer.dims.insert("sequence".into(), 8);
        };
        vec![
            plan("vit_tiny.onnx", |_| {}),
            plan("unet_small.onnx", |_| {}),
            plan("unet_small.onnx", |o| o.schedule = ScheduleChoice::Memory),
            plan("bert_tiny.onnx", bound),
            plan("resnet_small.onnx", |o| {
                o.infer.dims.insert("batch".into(), 1);
                o.modes.budget = Some(1 << 20);
            }),
            plan("vit_tiny.onnx", |o| {
                o.modes.tiers = parse_tiers(&["sram:64KiB:1:64".into(), "dram:1GiB:200:8".into()])
                    .expect("tiers");
                o.modes.segment = 2;
            }),
            plan("vit_tiny.onnx", |o| {
                o.modes.partition = Some(Partition::parse(PARTITION).expect("partition"));
            }),
        ]
    })
}

/// A new value for a field.
#[derive(Arbitrary, Debug)]
enum Leaf {
    Null,
    Bool(bool),
    Small(u8),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    /// The name of one of the table's tensors.
    Name(u16),
    Text(String),
}

/// What to do with the field an edit reaches.
#[derive(Arbitrary, Debug)]
enum Action {
    Set(Leaf),
    /// Add to a number (wrapping), keeping it near its old value.
    Nudge(i16),
    Remove,
    Duplicate,
    Swap(u16),
}

/// One edit: a path down the JSON tree (each step picks a key or element, modulo the count)
/// and what to do at its end.
#[derive(Arbitrary, Debug)]
struct Edit {
    path: Vec<u16>,
    action: Action,
}

#[derive(Arbitrary, Debug)]
struct Input {
    base: u8,
    edits: Vec<Edit>,
}

fn child(container: &mut Value, step: u16) -> Option<&mut Value> {
    match container {
        Value::Array(items) if !items.is_empty() => {
            let n = items.len();
            items.get_mut(usize::from(step) % n)
        }
        Value::Object(map) if !map.is_empty() => {
            let n = map.len();
            map.values_mut().nth(usize::from(step) % n)
        }
        _ => None,
    }
}

fn leaf(leaf: &Leaf, names: &[String]) -> Value {
    match leaf {
        Leaf::Null => Value::Null,
        Leaf::Bool(b) => Value::Bool(*b),
        Leaf::Small(n) => Value::from(*n),
        Leaf::Unsigned(n) => Value::from(*n),
        Leaf::Signed(n) => Value::from(*n),
        Leaf::Float(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        Leaf::Name(i) => Value::from(names[usize::from(*i) % names.len()].clone()),
        Leaf::Text(s) => Value::from(s.clone()),
    }
}

fn nudge(value: &Value, by: i16) -> Value {
    if let Some(n) = value.as_u64() {
        Value::from(n.wrapping_add_signed(i64::from(by)))
    } else if let Some(n) = value.as_i64() {
        Value::from(n.wrapping_add(i64::from(by)))
    } else {
        value.clone()
    }
}

fn apply(root: &mut Value, edit: &Edit, names: &[String]) {
    let Some((&last, path)) = edit.path.split_last() else {
        return;
    };
    let mut parent = root;
    for &step in path {
        if !child(parent, step).is_some_and(|c| c.is_array() || c.is_object()) {
            break;
        }
        parent = child(parent, step).expect("checked above");
    }
    match (&edit.action, parent) {
        (Action::Remove, Value::Array(items)) if !items.is_empty() => {
            let n = items.len();
            items.remove(usize::from(last) % n);
        }
        (Action::Remove, Value::Object(map)) if !map.is_empty() => {
            let n = map.len();
            let key = map.keys().nth(usize::from(last) % n).cloned();
            key.map(|k| map.remove(&k));
        }
        (Action::Duplicate, Value::Array(items)) if !items.is_empty() => {
            let i = usize::from(last) % items.len();
            items.insert(i, items[i].clone());
        }
        (Action::Swap(other), Value::Array(items)) if !items.is_empty() => {
            let n = items.len();
            items.swap(usize::from(last) % n, usize::from(*other) % n);
        }
        (Action::Set(new), parent) => {
            if let Some(field) = child(parent, last) {
                *field = leaf(new, names);
            }
        }
        (Action::Nudge(by), parent) => {
            if let Some(field) = child(parent, last) {
                *field = nudge(field, *by);
            }
        }
        _ => {}
    }
}

fuzz_target!(|input: Input| {
    let bases = bases();
    let base = &bases[usize::from(input.base) % bases.len()];
    let mut json = base.json.clone();
    for edit in input.edits.iter().take(64) {
        apply(&mut json, edit, &base.names);
    }
    // `verify` reads the file as a table; what serde refuses is an input error there.
    let Ok(table) = serde_json::from_value::<Table>(json) else {
        return;
    };
    if table.format != FORMAT || table.model.sha256 != base.table.model.sha256 {
        return; // refused as input errors before the verifier runs
    }
    let problems = if table.options.dims == base.table.options.dims
        && table.options.input_shapes == base.table.options.input_shapes
    {
        check_table(&base.graph, &table)
    } else {
        let infer = InferOptions {
            dims: table.options.dims.clone(),
            input_shapes: table.options.input_shapes.clone(),
            ..InferOptions::default()
        };
        match load_typed(&base.path, &infer) {
            Ok((_, model, _)) => check_table(&model.graph, &table),
            Err(e) => {
                assert!(is_input_error(&e), "internal error: {e:#}");
                return;
            }
        }
    };
    if table == base.table {
        assert!(problems.is_empty(), "the real plan fails: {problems:?}");
    }
});
