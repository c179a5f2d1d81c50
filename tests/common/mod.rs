//! Helpers shared by the integration tests: small hand-built models and the CLI binary.

#![allow(dead_code)]

pub mod dynamic;
pub mod symbolic_dims;
pub mod typed;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use onnx_memplan::onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto, tensor_shape_proto::Dimension, tensor_shape_proto::dimension,
    type_proto,
};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the CLI with arguments. After a successful `plan`, checks the table it wrote against
/// the JSON Schema in `docs/` (so every table the tests write is checked).
pub fn run_cli(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_onnx-memplan"))
        .args(args)
        .output()
        .expect("the binary runs");
    if out.status.success()
        && args.first() == Some(&"plan")
        && let Some(table) = written_table(&args[1..])
    {
        let text = std::fs::read_to_string(&table)
            .unwrap_or_else(|e| panic!("plan wrote no table at {}: {e}", table.display()));
        let json = serde_json::from_str(&text).unwrap();
        let errors = schema_errors(&json);
        assert!(errors.is_empty(), "{}: {errors:?}", table.display());
    }
    out
}

/// The table a `plan` command line writes, by the CLI's rule: `--table`, else
/// `<stem>.memplan.json` beside `-o`, else beside the model.
fn written_table(args: &[&str]) -> Option<PathBuf> {
    let value = |flags: &[&str]| {
        args.windows(2)
            .find(|w| flags.contains(&w[0]))
            .map(|w| PathBuf::from(w[1]))
    };
    if let Some(table) = value(&["--table"]) {
        return Some(table);
    }
    let annotated = value(&["-o", "--output"]).or_else(|| {
        let model = args.iter().find(|a| a.ends_with(".onnx"))?;
        let model = Path::new(model);
        Some(model.with_file_name(format!("{}.memplan.onnx", model.file_stem()?.to_str()?)))
    })?;
    let stem = annotated
        .file_stem()?
        .to_str()?
        .trim_end_matches(".memplan");
    Some(annotated.with_file_name(format!("{stem}.memplan.json")))
}

/// Every way `table` breaks the JSON Schema `docs/memplan-table.schema.json`.
pub fn schema_errors(table: &serde_json::Value) -> Vec<String> {
    static SCHEMA: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| {
        let text = std::fs::read_to_string(root().join("docs/memplan-table.schema.json"))
            .expect("the schema is in docs/");
        jsonschema::validator_for(&serde_json::from_str(&text).expect("the schema is JSON"))
            .expect("the schema is valid")
    });
    SCHEMA
        .iter_errors(table)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A float tensor value info with a concrete shape.
pub fn float_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    float_info_of(name, dims.iter().map(|&d| dimension::Value::DimValue(d)))
}

/// A float tensor value info whose dims are numbers or symbols (`["s", "1"]`).
pub fn symbolic_float_info(name: &str, dims: &[&str]) -> ValueInfoProto {
    float_info_of(
        name,
        dims.iter().map(|d| match d.parse::<i64>() {
            Ok(v) => dimension::Value::DimValue(v),
            Err(_) => dimension::Value::DimParam(d.to_string()),
        }),
    )
}

fn float_info_of(name: &str, dims: impl Iterator<Item = dimension::Value>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .map(|d| Dimension {
                            value: Some(d),
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// A node with the given op, inputs and outputs.
pub fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_{}", outputs.first().unwrap_or(&""))),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// `node` with an integer attribute added.
pub fn with_int(mut node: NodeProto, name: &str, value: i64) -> NodeProto {
    node.attribute
        .push(onnx_memplan::onnx::proto::AttributeProto {
            name: Some(name.into()),
            r#type: Some(2),
            i: Some(value),
            ..Default::default()
        });
    node
}

/// `node` with an integer-list attribute added.
pub fn with_ints(mut node: NodeProto, name: &str, values: &[i64]) -> NodeProto {
    node.attribute
        .push(onnx_memplan::onnx::proto::AttributeProto {
            name: Some(name.into()),
            r#type: Some(7),
            ints: values.to_vec(),
            ..Default::default()
        });
    node
}

/// A float initializer of deterministic values in [-0.5, 0.5] (a sine of the index, shifted
/// by `seed`), for weights whose exact values do not matter.
pub fn wave_init(name: &str, dims: &[i64], seed: f32) -> TensorProto {
    let n: i64 = dims.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i as f32 + seed) * 0.7).sin() * 0.5)
        .collect();
    float_init(name, dims, &values)
}

/// A model around a graph, default opset 17.
pub fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// A float initializer with raw data.
pub fn float_init(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    raw_init(
        name,
        dims,
        1,
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

/// An int64 initializer with raw data (shape `[len]`, or a scalar when `dims` is empty).
pub fn int_init(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    raw_init(
        name,
        dims,
        7,
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

/// An initializer of ONNX element type `data_type` holding `raw` little-endian bytes.
pub fn raw_init(name: &str, dims: &[i64], data_type: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(data_type),
        raw_data: Some(raw.into()),
        ..Default::default()
    }
}

/// Encodes a model to a file.
pub fn write_model(model: &ModelProto, path: &Path) {
    use prost::Message;
    std::fs::write(path, model.encode_to_vec()).expect("write model");
}

/// A chain x → Relu → Sigmoid → Add(·, x2) → y over 1×8 floats.
pub fn chain_model() -> ModelProto {
    model(GraphProto {
        name: Some("chain".into()),
        node: vec![
            node("Relu", &["x"], &["a"]),
            node("Sigmoid", &["a"], &["b"]),
            node("Relu", &["x"], &["c"]),
            node("Add", &["b", "c"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 8])],
        output: vec![float_info("y", &[1, 8])],
        ..Default::default()
    })
}

/// A model whose plan the exact search cannot finish quickly: `buffers` Expand outputs of
/// pseudo-random sizes (64 B to 256 KiB, from a fixed linear congruential sequence) with
/// overlapping lifetimes (each is reduced into a running sum up to 120 steps after it is made).
pub fn fragmenting_model(buffers: usize) -> ModelProto {
    let mut state: u64 = 1;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    let mut nodes = vec![node("ReduceSum", &["x"], &["c"])];
    let mut initializer = Vec::new();
    let mut ends: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    let mut running = "c".to_string();
    let mut consume = |k: usize, tag: &str, nodes: &mut Vec<NodeProto>| {
        let (e, q, sum) = (format!("e{k}"), format!("q{k}"), format!("c{k}_{tag}"));
        nodes.push(node("ReduceSum", &[&e], &[&q]));
        nodes.push(node("Add", &[&running, &q], &[&sum]));
        running = sum;
        running.clone()
    };
    let mut last = "c".to_string();
    for m in 0..buffers {
        let shape = format!("s{m}");
        initializer.push(int_init(&shape, &[2], &[1, 16 * (1 + next(4096) as i64)]));
        nodes.push(node("Expand", &[&last, &shape], &[&format!("e{m}")]));
        ends.entry(m + 1 + next(119) as usize).or_default().push(m);
        for k in ends.remove(&m).unwrap_or_default() {
            last = consume(k, &m.to_string(), &mut nodes);
        }
    }
    for k in ends.into_values().flatten() {
        last = consume(k, "end", &mut nodes);
    }
    nodes.push(node("Identity", &[&last], &["y"]));
    model(GraphProto {
        name: Some("fragmenting".into()),
        node: nodes,
        input: vec![float_info("x", &[1, 8])],
        output: vec![float_info("y", &[1, 1])],
        initializer,
        ..Default::default()
    })
}

/// bert_tiny at batch 4 × 128 tokens, unsplit: its flat plan needs 2,621,440 B and no step
/// reads and writes more than 2,097,152 B, so smaller budgets and tiers need the modes'
/// searches.
pub const BERT_128_UNSPLIT: [&str; 6] = [
    "--dim",
    "batch=4",
    "--dim",
    "sequence=128",
    "--split",
    "off",
];

/// Runs `plan <model> -o <out>` plus `extra` (through [`run_cli`]).
pub fn plan_to(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    run_cli(&args)
}

/// Writes `model` as `<dir>/<stem>.onnx` and plans it (`-o <stem>.memplan.onnx` plus `extra`);
/// asserts the run succeeds and returns the model's path and the table's.
pub fn plan_written(
    dir: &Path,
    stem: &str,
    model: &ModelProto,
    extra: &[&str],
) -> (PathBuf, PathBuf) {
    let path = dir.join(format!("{stem}.onnx"));
    write_model(model, &path);
    let run = plan_to(&path, &dir.join(format!("{stem}.memplan.onnx")), extra);
    assert!(
        run.status.success(),
        "{stem}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    (path, dir.join(format!("{stem}.memplan.json")))
}

/// A rewritten model (written to `split`) plans and verifies like any other, and gives the
/// outputs of `original` in onnxruntime.
pub fn plans_and_matches(dir: &Path, original: &Path, split: &Path) {
    assert_plans(dir, split);
    compare_in_onnxruntime(original, split);
}

/// A rewritten model (written to `split`) plans and verifies like any other (`plan -o
/// <dir>/p.onnx`, whose verifier checks the plan before writing it).
pub fn assert_plans(dir: &Path, split: &Path) {
    let plan = run_cli(&[
        "plan",
        split.to_str().unwrap(),
        "-o",
        dir.join("p.onnx").to_str().unwrap(),
    ]);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
}

/// Runs `verify` on a model and a table; asserts it accepts the table, showing its report if not.
pub fn assert_verifies(model: &Path, table: &Path) {
    let check = run_cli(&["verify", model.to_str().unwrap(), table.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "{} with {}: {}{}",
        model.display(),
        table.display(),
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// Runs `verify` on a model and a table; asserts it refuses the table (exit 1) with a report
/// containing `needle`.
pub fn assert_verify_refuses(model: &Path, table: &Path, needle: &str) {
    let check = run_cli(&["verify", model.to_str().unwrap(), table.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{report}");
    assert!(report.contains(needle), "{report}");
}

/// Reads an allocation table written by `plan`.
pub fn read_table(path: &Path) -> onnx_memplan::emit::Table {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A Python that can import onnxruntime, onnx and numpy: `MEMPLAN_PYTHON`, else `.ci/venv`.
pub fn ort_python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("MEMPLAN_PYTHON").map(PathBuf::from),
        Some(root().join(".ci/venv/bin/python")),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import onnxruntime, onnx, numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs `command` (a Python check), shows its output after `label`, asserts it succeeded
/// (showing its output and errors if not) and returns its output.
pub fn assert_succeeds(label: &str, command: &mut Command) -> String {
    let run = command.output().unwrap();
    let said = String::from_utf8_lossy(&run.stdout).into_owned();
    eprintln!("{label}{said}");
    assert!(
        run.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    said
}

/// Loads `model` with onnx's own loader, external data included (`onnx.load`, which refuses a
/// data file outside the model's folder or with several hard links), and checks it with
/// `onnx.checker.check_model(full_check=True)`; every initializer must come back with its data.
pub fn load_in_onnx(model: &Path) {
    let Some(python) = ort_python() else {
        eprintln!(
            "SKIPPED onnx.load of {}: no Python with onnx (run scripts/ort_check.sh once to \
             create .ci/venv, or set MEMPLAN_PYTHON)",
            model.display()
        );
        return;
    };
    let script = r#"
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(sys.argv[1], full_check=True)
empty = [t.name for t in m.graph.initializer if not onnx.numpy_helper.to_array(t).size]
assert not empty, f"initializers without data: {empty}"
print(f"onnx.load: {len(m.graph.initializer)} initializers with their data")
"#;
    assert_succeeds("", Command::new(python).args(["-c", script]).arg(model));
}

/// Runs both models in onnxruntime on the same random input (float inputs drawn from a normal
/// distribution, integer ones counting 0, 1, … along their last axis, as positions do) and
/// reports whether the outputs
/// are bit-identical and the largest difference; every element must match within 1e-5 of the
/// output's largest magnitude, and onnx.checker (full_check) must accept the rewritten model.
pub fn compare_in_onnxruntime(original: &Path, rewritten: &Path) {
    let Some(python) = ort_python() else {
        eprintln!(
            "SKIPPED onnxruntime comparison: no Python with onnxruntime (run scripts/ort_check.sh \
             once to create .ci/venv, or set MEMPLAN_PYTHON)"
        );
        return;
    };
    let script = r#"
import sys, numpy as np, onnx, onnxruntime as ort
onnx.checker.check_model(sys.argv[2], full_check=True)
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
a = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
b = ort.InferenceSession(sys.argv[2], so, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feed = {}
for i in a.get_inputs():
    if i.type == "tensor(float)":
        feed[i.name] = rng.standard_normal(i.shape).astype(np.float32)
    else:
        feed[i.name] = np.broadcast_to(np.arange(i.shape[-1]), i.shape).astype(np.int64)
ya, yb = a.run(None, feed)[0], b.run(None, feed)[0]
assert ya.shape == yb.shape, (ya.shape, yb.shape)
d = float(np.abs(ya - yb).max())
scale = float(np.abs(ya).max())
same = bool(np.array_equal(ya, yb))
print(f"bit-identical {same}, max difference {d:.3g} (largest magnitude {scale:.3g}, {ya.size} elements)")
sys.exit(0 if d <= 1e-5 * scale else 1)
"#;
    assert_succeeds(
        "onnxruntime: ",
        Command::new(python)
            .args(["-c", script])
            .arg(original)
            .arg(rewritten),
    );
}

/// The node of `model` that writes `output`.
pub fn writer<'m>(model: &'m ModelProto, output: &str) -> &'m NodeProto {
    &model.graph.as_ref().unwrap().node[writer_at(model, output)]
}

/// The position in `model`'s node list of the node writing `output`.
pub fn writer_at(model: &ModelProto, output: &str) -> usize {
    let g = model.graph.as_ref().unwrap();
    g.node
        .iter()
        .position(|n| n.output.iter().any(|o| o == output))
        .unwrap_or_else(|| panic!("no node writes '{output}'"))
}

/// The int64 values of initializer `name` of `model`.
pub fn int64s(model: &ModelProto, name: &str) -> Vec<i64> {
    let g = model.graph.as_ref().unwrap();
    let t = g.initializer.iter().find(|t| t.name() == name).unwrap();
    t.raw_data()
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `model` (typed as `graph`, nodes in `order`) with `chain` cut by `tiling` under the label
/// `split1`, every tensor read whole (no bands).
pub fn rewrite_alone(
    model: &ModelProto,
    graph: &onnx_memplan::ir::Graph,
    order: &[usize],
    cut: (
        &onnx_memplan::split::chain::Chain,
        &onnx_memplan::split::tiling::Tiling,
    ),
) -> onnx_memplan::split::rewrite::Rewritten {
    use onnx_memplan::split::rewrite::{BandSources, rewrite};
    rewrite(model, graph, order, cut, "split1", &BandSources::NONE)
}

/// A 3×3 Conv with padding 1 on every side.
pub fn conv3x3(input: &str, weight: &str, output: &str) -> NodeProto {
    let n = node("Conv", &[input, weight], &[output]);
    let n = with_ints(n, "kernel_shape", &[3, 3]);
    with_ints(n, "pads", &[1, 1, 1, 1])
}

/// The model at `path` (nodes in stored order) with the chain of the nodes making `outputs`
/// cut by `grid` under `label`, reading the parts of Concats an earlier rewrite labelled
/// `split1` added as bands; its tiles run `early` or at the chain's step
/// (`BandSources::run_early`).
pub fn cut_reading_split1(
    path: &Path,
    (outputs, grid): (&[&str], [usize; 2]),
    label: &str,
    early: bool,
) -> onnx_memplan::split::rewrite::Rewritten {
    use onnx_memplan::split::rewrite::{BandSources, rewrite};
    let (proto, typed, _) = onnx_memplan::pipeline::load_typed(path, &Default::default()).unwrap();
    let graph = &typed.graph;
    let order: Vec<usize> = (0..graph.nodes.len()).collect();
    let makes = |name: &str| {
        order
            .iter()
            .copied()
            .find(|&n| graph.values[graph.nodes[n].outputs[0].unwrap()].name == name)
            .unwrap()
    };
    let nodes: Vec<usize> = outputs.iter().map(|o| makes(o)).collect();
    let chain = onnx_memplan::split::chain::chain_of(graph, &nodes, 17).expect("a chain");
    let tiling = onnx_memplan::split::tiling::tile(graph, &chain, grid).unwrap();
    let made_by_split = |n: usize| graph.nodes[n].name.contains("/split1/");
    let sources = BandSources {
        scatter_inputs: false,
        made_by_split: &made_by_split,
        run_early: early,
    };
    rewrite(&proto, graph, &order, (&chain, &tiling), label, &sources)
}

/// The rows (along H) a Slice node of `model` takes of its input, checking it cuts H and W
/// and takes all 16 columns: its input and `[start, end)`.
pub fn rows_of_16_wide(model: &ModelProto, slice: &NodeProto) -> (String, [i64; 2]) {
    assert_eq!(slice.op_type(), "Slice", "{}", slice.name());
    let (starts, ends) = (
        int64s(model, &slice.input[1]),
        int64s(model, &slice.input[2]),
    );
    assert_eq!(int64s(model, &slice.input[3]), [2, 3], "axes H and W");
    assert_eq!([starts[1], ends[1]], [0, 16], "every column");
    (slice.input[0].clone(), [starts[0], ends[0]])
}

/// Asserts that no node of `model` makes or reads the tensor `name`.
pub fn assert_never_whole(model: &ModelProto, name: &str) {
    let g = model.graph.as_ref().unwrap();
    assert!(
        g.node
            .iter()
            .all(|n| !n.output.iter().any(|o| o == name) && !n.input.iter().any(|i| i == name)),
        "nothing makes or reads {name} whole"
    );
}

/// The step at which the plan `table` of the model at `model` runs the node named `node`.
pub fn step_of(model: &Path, table: &onnx_memplan::emit::Table, node: &str) -> usize {
    let graph = onnx_memplan::pipeline::load_typed(model, &Default::default())
        .unwrap()
        .1
        .graph;
    let id = graph.nodes.iter().position(|n| n.name == node).unwrap();
    table.schedule.iter().position(|&s| s == id).unwrap()
}

/// The operators of `nodes` of `graph`, in order (a chain's nodes, say).
pub fn op_types<'g>(graph: &'g onnx_memplan::ir::Graph, nodes: &[usize]) -> Vec<&'g str> {
    nodes
        .iter()
        .map(|&n| graph.nodes[n].op_type.as_str())
        .collect()
}
