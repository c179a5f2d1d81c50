//! docs/format.md is the contract: its worked example holds, its JSON Schema accepts the tables
//! the pass writes and refuses broken ones, and it documents every field the schema names.

mod common;

use common::*;
use onnx_memplan::onnx::load_model;
use onnx_memplan::onnx::proto::tensor_shape_proto::dimension;
use serde_json::{Value, json};

/// The worked example of docs/format.md: the chain model with x: [batch, 8], planned with
/// `--dim batch=2`. The expected lifetimes, sharing and offsets are worked by hand there.
#[test]
fn the_worked_example_holds() {
    let mut model = chain_model();
    let graph = model.graph.as_mut().unwrap();
    for vi in graph.input.iter_mut().chain(graph.output.iter_mut()) {
        let Some(onnx_memplan::onnx::proto::type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            unreachable!("float_info builds tensor types")
        };
        t.shape.as_mut().unwrap().dim[0].value = Some(dimension::Value::DimParam("batch".into()));
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, table_path) = plan_written(dir.path(), "chain", &model, &["--dim", "batch=2"]);
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    assert_eq!(table["schedule"], json!([0, 1, 2, 3]));
    assert_eq!(
        table["arenas"],
        json!([{"id": 0, "name": "main", "bytes": 192}])
    );
    assert_eq!(table["stats"]["lower_bound_bytes"], 192);
    assert_eq!(table["stats"]["naive_bytes"], 320);
    assert_eq!(table["options"]["dims"], json!({"batch": 2}));
    let rows: Vec<Value> = table["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            json!([
                t["name"],
                t["kind"],
                t["first"],
                t["last"],
                t["offset"],
                t["inplace_of"],
                t["bytes"]
            ])
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            json!(["x", "input", 0, 2, 0, null, 64]),
            json!(["a", "intermediate", 0, 1, 64, null, 64]),
            json!(["b", "intermediate", 1, 3, 64, "a", 64]),
            json!(["c", "intermediate", 2, 3, 128, null, 64]),
            json!(["y", "output", 3, 3, 64, "b", 64]),
        ]
    );

    let annotated = load_model(&dir.path().join("chain.memplan.onnx")).unwrap();
    let props = |p: &[onnx_memplan::onnx::proto::StringStringEntryProto]| -> Vec<(String, String)> {
        p.iter()
            .map(|e| (e.key().to_string(), e.value().to_string()))
            .filter(|(k, _)| k.starts_with("memplan."))
            .collect()
    };
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        props(&annotated.metadata_props),
        vec![
            pair("memplan.format", "onnx-memplan/1"),
            pair("memplan.alignment", "64"),
            pair("memplan.table", "chain.memplan.json"),
            pair("memplan.arena.0.bytes", "192"),
        ]
    );
    let graph = annotated.graph.unwrap();
    let b = graph.value_info.iter().find(|v| v.name() == "b").unwrap();
    assert_eq!(
        props(&b.metadata_props),
        vec![
            pair("memplan.arena", "0"),
            pair("memplan.offset", "64"),
            pair("memplan.bytes", "64"),
            pair("memplan.lifetime", "1:3"),
            pair("memplan.inplace_of", "a"),
        ]
    );
}

#[test]
fn the_schema_refuses_broken_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (_, table_path) = plan_written(dir.path(), "chain", &chain_model(), &[]);
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&table_path).unwrap()).unwrap();
    assert_eq!(schema_errors(&good), Vec::<String>::new());
    type Breakage = (&'static str, fn(&mut Value));
    let breakages: [Breakage; 6] = [
        ("format", |t| t["format"] = json!("onnx-memplan/2")),
        ("missing tensors", |t| {
            t.as_object_mut().unwrap().remove("tensors");
        }),
        ("negative offset", |t| {
            t["tensors"][0]["offset"] = json!(-64)
        }),
        ("unknown kind", |t| {
            t["tensors"][0]["kind"] = json!("scratch")
        }),
        ("unknown field", |t| t["stats"]["peak"] = json!(1)),
        ("short hash", |t| t["model"]["sha256"] = json!("abc")),
    ];
    for (what, break_it) in breakages {
        let mut bad = good.clone();
        break_it(&mut bad);
        assert!(
            !schema_errors(&bad).is_empty(),
            "{what}: the schema accepted it"
        );
    }
}

/// Every property the schema names is explained in docs/format.md.
#[test]
fn the_format_doc_names_every_schema_field() {
    let doc = std::fs::read_to_string(root().join("docs/format.md")).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/memplan-table.schema.json")).unwrap(),
    )
    .unwrap();
    let mut names = Vec::new();
    collect_properties(&schema, &mut names);
    assert!(names.len() > 50, "the walk found the schema's fields");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/format.md: {missing:?}");
}

fn collect_properties(schema: &Value, names: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                names.extend(props.keys().cloned());
            }
            map.values().for_each(|v| collect_properties(v, names));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_properties(v, names)),
        _ => {}
    }
}
