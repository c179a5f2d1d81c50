//! If (branch merging, known conditions), Loop (carried state, stacked scan outputs), Scan,
//! and model-local functions.

mod infer_support;
use infer_support::*;
use onnx_memplan::onnx::proto::{FunctionProto, GraphProto, OperatorSetIdProto};

fn branch(name: &str, out: &str, dims: &[i64]) -> GraphProto {
    let n: i64 = dims.iter().product();
    let mut g = G::default().ints(&format!("{name}_shape"), &[dims.len() as i64], dims);
    g.graph.name = Some(name.into());
    g = g
        .node("Expand", &["x", &format!("{name}_shape")], &[out], vec![])
        .output(out);
    assert!(n > 0);
    g.graph
}

fn if_model(cond_known: Option<bool>) -> onnx_memplan::onnx::proto::ModelProto {
    let mut g = G::default().input("x", FLOAT, &["1"]);
    if let Some(c) = cond_known {
        g.graph
            .initializer
            .push(onnx_memplan::onnx::proto::TensorProto {
                name: Some("cond".into()),
                dims: vec![],
                data_type: Some(BOOL),
                int32_data: vec![i32::from(c)],
                ..Default::default()
            });
    } else {
        g = g.input("cond", BOOL, &[]);
    }
    g.node(
        "If",
        &["cond"],
        &["y"],
        vec![
            a_graph("then_branch", branch("then", "t", &[2, 3])),
            a_graph("else_branch", branch("else", "e", &[2, 4])),
        ],
    )
    .output("y")
    .model(16)
}

#[test]
fn if_merges_branches_where_they_differ() {
    let m = infer(&if_model(None));
    assert_eq!(ty(&m, "y"), "float32 2×?");
    // The branches' own values are typed, with the outer-scope input visible.
    let sub = &m.graph.nodes[0].subgraphs;
    let then = &sub
        .iter()
        .find(|s| s.attribute == "then_branch")
        .unwrap()
        .graph;
    assert_eq!(
        then.value("t").unwrap().ty.as_ref().unwrap().to_string(),
        "float32 2×3"
    );
}

#[test]
fn if_with_a_known_condition_takes_that_branch() {
    assert_eq!(ty(&infer(&if_model(Some(true))), "y"), "float32 2×3");
    assert_eq!(ty(&infer(&if_model(Some(false))), "y"), "float32 2×4");
}

#[test]
fn loop_carries_state_and_stacks_scan_outputs() {
    let mut body = G::default()
        .input("i", INT64, &[])
        .input("c", BOOL, &[])
        .input("acc_in", FLOAT, &["?"])
        .node("Identity", &["c"], &["c_out"], vec![])
        .node("Add", &["acc_in", "x"], &["acc_out"], vec![])
        .node("Relu", &["x"], &["scan"], vec![])
        .output("c_out")
        .output("acc_out")
        .output("scan");
    body.graph.name = Some("body".into());
    let proto = G::default()
        .input("x", FLOAT, &["4"])
        .input("init", FLOAT, &["4"])
        .ints("trips", &[], &[7])
        .node(
            "Loop",
            &["trips", "", "init"],
            &["final", "stacked"],
            vec![a_graph("body", body.graph)],
        )
        .output("final")
        .output("stacked")
        .model(16);
    let m = infer(&proto);
    assert_eq!(ty(&m, "final"), "float32 4");
    assert_eq!(ty(&m, "stacked"), "float32 7×4");
}

#[test]
fn scan_slices_inputs_and_stacks_outputs() {
    let mut body = G::default()
        .input("state_in", FLOAT, &["?"])
        .input("row", FLOAT, &["?"])
        .node("Add", &["state_in", "row"], &["state_out"], vec![])
        .node("Identity", &["state_out"], &["out"], vec![])
        .output("state_out")
        .output("out");
    body.graph.name = Some("body".into());
    let proto = G::default()
        .input("init", FLOAT, &["3"])
        .input("xs", FLOAT, &["5", "3"])
        .node(
            "Scan",
            &["init", "xs"],
            &["final", "ys"],
            vec![
                a_graph("body", body.graph),
                a_int("num_scan_inputs", 1),
                a_ints("scan_output_axes", &[1]),
            ],
        )
        .output("ys")
        .model(16);
    let m = infer(&proto);
    assert_eq!(ty(&m, "final"), "float32 3");
    assert_eq!(ty(&m, "ys"), "float32 3×5");
}

/// Before opset 9, Scan's input 0 is `sequence_lens`; a Scan with no inputs at all (a fuzz
/// finding) is an input error naming the node, not an arithmetic underflow.
#[test]
fn an_opset_8_scan_without_inputs_is_an_input_error() {
    let mut body = G::default()
        .input("row", FLOAT, &["?"])
        .node("Identity", &["row"], &["out"], vec![])
        .output("out");
    body.graph.name = Some("body".into());
    let proto = G::default()
        .node(
            "Scan",
            &[],
            &["ys"],
            vec![a_graph("body", body.graph), a_int("num_scan_inputs", 0)],
        )
        .output("ys")
        .model(8);
    let Err(err) = infer_with(&proto, &Default::default()) else {
        panic!("an error expected");
    };
    assert!(format!("{err:#}").contains("sequence_lens"), "{err:#}");
}

#[test]
fn model_local_functions_are_inferred_through_their_body() {
    let mut proto = G::default()
        .input("x", FLOAT, &["2", "8"])
        .node(
            "HalfTranspose",
            &["x"],
            &["y"],
            vec![a_ints("perm", &[1, 0])],
        )
        .output("y")
        .model(17);
    proto.graph.as_mut().unwrap().node[0].domain = Some("local".into());
    let mut transpose = node("Transpose", &["a"], &["t"], vec![]);
    transpose
        .attribute
        .push(onnx_memplan::onnx::proto::AttributeProto {
            name: Some("perm".into()),
            ref_attr_name: Some("perm".into()),
            r#type: Some(7),
            ..Default::default()
        });
    proto.functions.push(FunctionProto {
        name: Some("HalfTranspose".into()),
        domain: Some("local".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: vec!["perm".into()],
        node: vec![
            transpose,
            node("Split", &["t"], &["b", "rest"], vec![a_int("axis", 0)]),
        ],
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        ..Default::default()
    });
    assert_eq!(ty(&infer(&proto), "y"), "float32 4×2");
}
