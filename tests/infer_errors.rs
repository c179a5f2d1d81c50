//! User errors name the node; declared types that disagree are reported, not trusted.

mod infer_support;
use infer_support::*;
use onnx_memplan::error::is_input_error;
use onnx_memplan::infer::InferOptions;

fn error_of(proto: &onnx_memplan::onnx::proto::ModelProto, options: &InferOptions) -> String {
    let err = infer_with(proto, options)
        .map(|_| ())
        .expect_err("inference fails");
    assert!(
        is_input_error(&err),
        "an input error (exit code 2): {err:#}"
    );
    format!("{err:#}")
}

fn unknown_op() -> onnx_memplan::onnx::proto::ModelProto {
    let mut proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .node("FancyOp", &["x"], &["y"], vec![])
        .node("Relu", &["y"], &["z"], vec![])
        .declared_output("z", FLOAT, &["2", "3"])
        .model(17);
    let graph = proto.graph.as_mut().unwrap();
    graph.node[0].domain = Some("com.example".into());
    graph.node[0].name = Some("fancy".into());
    proto
}

#[test]
fn unknown_operator_is_named() {
    let msg = error_of(&unknown_op(), &InferOptions::default());
    assert_eq!(
        msg,
        "node 'fancy' (FancyOp, domain 'com.example'): no shape rule for this operator"
    );
}

#[test]
fn trust_value_info_uses_declared_types() {
    let mut proto = unknown_op();
    let graph = proto.graph.as_mut().unwrap();
    graph
        .value_info
        .push(info("y", Some(tensor_type(FLOAT, &["2", "3"]))));
    let options = InferOptions {
        trust_value_info: true,
        ..Default::default()
    };
    let (m, report) = infer_with(&proto, &options).unwrap();
    assert_eq!(ty(&m, "z"), "float32 2×3");
    assert_eq!(report.trusted, vec!["node 'fancy' (FancyOp)"]);
    // Without a declaration there is nothing to trust.
    let msg = error_of(&unknown_op(), &options);
    assert!(msg.contains("no declared type for output 'y'"), "{msg}");
}

#[test]
fn cycle_names_a_node_on_it() {
    let proto = G::default()
        .input("x", FLOAT, &["2"])
        .node("Add", &["x", "b"], &["a"], vec![])
        .node("Relu", &["a"], &["b"], vec![])
        .node("Relu", &["x"], &["c"], vec![])
        .output("c")
        .model(17);
    let msg = error_of(&proto, &InferOptions::default());
    assert!(
        msg == "the graph has a cycle through node 'Add_a' (Add)"
            || msg == "the graph has a cycle through node 'Relu_b' (Relu)",
        "{msg}"
    );
}

#[test]
fn nodes_out_of_order_are_visited_topologically() {
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .node("Relu", &["a"], &["b"], vec![])
        .node("Neg", &["x"], &["a"], vec![])
        .output("b")
        .model(17);
    assert_eq!(ty(&infer(&proto), "b"), "float32 2×3");
}

#[test]
fn bad_attributes_and_shapes_name_the_node() {
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .node("Transpose", &["x"], &["y"], vec![a_ints("perm", &[0, 5])])
        .output("y")
        .model(17);
    let msg = error_of(&proto, &InferOptions::default());
    assert_eq!(
        msg,
        "node 'Transpose_y' (Transpose): axis 5 is out of range for rank 2"
    );
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .input("z", FLOAT, &["4", "3"])
        .node("Add", &["x", "z"], &["y"], vec![])
        .output("y")
        .model(17);
    let msg = error_of(&proto, &InferOptions::default());
    assert!(
        msg.starts_with("node 'Add_y' (Add): shapes 2×3, 4×3 cannot be broadcast"),
        "{msg}"
    );
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .node("Cast", &["x"], &["y"], vec![a_str("to", "oops")])
        .output("y")
        .model(17);
    let msg = error_of(&proto, &InferOptions::default());
    assert_eq!(
        msg,
        "node 'Cast_y' (Cast): attribute 'to' must be an integer"
    );
}

/// The check is general, not per operator: any rule's untyped trailing outputs are extra
/// outputs of the node (worked by hand: Relu defines 1 output, Shape 1, TopK 2).
#[test]
fn outputs_beyond_the_operators_are_input_errors() {
    for (op, outputs, defined) in [
        ("Relu", &["y", "z"][..], 1),
        ("Shape", &["y", "z", "w"][..], 1),
        ("TopK", &["y", "i", "z"][..], 2),
    ] {
        let inputs: &[&str] = if op == "TopK" { &["x", "k"] } else { &["x"] };
        let proto = G::default()
            .input("x", FLOAT, &["2", "3"])
            .ints("k", &[1], &[1])
            .node(op, inputs, outputs, vec![])
            .output("y")
            .model(17);
        let msg = error_of(&proto, &InferOptions::default());
        let extra = outputs[defined];
        assert_eq!(
            msg,
            format!(
                "node '{op}_y' ({op}): {} outputs, but the operator defines {defined} (output '{extra}' is extra)",
                outputs.len()
            )
        );
    }
}

#[test]
fn disagreeing_declarations_are_reported_and_inferred_types_kept() {
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .node("Transpose", &["x"], &["y"], vec![])
        .declared_output("y", FLOAT, &["2", "3"])
        .model(17);
    let (m, report) = infer_with(&proto, &InferOptions::default()).unwrap();
    assert_eq!(shape(&m, "y"), "3×2");
    assert_eq!(
        report.disagreements,
        vec!["'y' (node 'Transpose_y' (Transpose)): declared float32 2×3, inferred float32 3×2"]
    );
}

#[test]
fn input_shape_for_an_unknown_input_is_rejected() {
    let proto = G::default()
        .input("x", FLOAT, &["2"])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y")
        .model(17);
    let mut options = InferOptions::default();
    options.input_shapes.insert("nope".into(), vec![1]);
    let msg = error_of(&proto, &options);
    assert_eq!(
        msg,
        "--input-shape names 'nope', which is not an input of the graph"
    );
}

/// Found by the `model` fuzz target: a `block_shape` whose product overflows 64 bits (the
/// product divides the input's channels) is an input error naming the node, not an overflow.
#[test]
fn col2im_block_shape_overflow_is_an_input_error() {
    let mut proto = G::default()
        .input("x", FLOAT, &["1", "8", "4"])
        .ints("image", &[2], &[4, 4])
        .ints("block", &[2], &[1 << 62, 4])
        .node("Col2Im", &["x", "image", "block"], &["y"], vec![])
        .output("y")
        .model(18);
    proto.graph.as_mut().unwrap().node[0].name = Some("fold".into());
    let msg = error_of(&proto, &InferOptions::default());
    assert_eq!(
        msg,
        "node 'fold' (Col2Im): block_shape's product overflows 64 bits"
    );
}

/// Found by the `model` fuzz target: begin and end pads whose sum overflows 64 bits are an
/// input error naming the node, not an overflow.
#[test]
fn pad_overflowing_pads_are_an_input_error() {
    let mut proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .ints("pads", &[4], &[0, i64::MAX, 0, 1])
        .node("Pad", &["x", "pads"], &["y"], vec![])
        .output("y")
        .model(18);
    proto.graph.as_mut().unwrap().node[0].name = Some("pad".into());
    let msg = error_of(&proto, &InferOptions::default());
    assert_eq!(msg, "node 'pad' (Pad): pads of axis 1 overflow 64 bits");
}

/// Found by the `model` fuzz target: a shape input of unknown values whose declared length is
/// absurd (2^59 + 1 in the finding, or above 1024) is an input error naming the node, for each
/// operator that takes its output's rank from that length; a reasonable length still types.
#[test]
fn absurd_listed_ranks_are_input_errors() {
    for (op, len) in [
        ("Reshape", "576460752303423489"),
        ("Expand", "1025"),
        ("ConstantOfShape", "4096"),
    ] {
        let shape_input = if op == "ConstantOfShape" { 0 } else { 1 };
        let inputs: &[&str] = if shape_input == 0 {
            &["s"]
        } else {
            &["x", "s"]
        };
        let mut proto = G::default()
            .input("x", FLOAT, &["2", "3"])
            .input("s", INT64, &[len])
            .node(op, inputs, &["y"], vec![])
            .output("y")
            .model(18);
        proto.graph.as_mut().unwrap().node[0].name = Some("n".into());
        let msg = error_of(&proto, &InferOptions::default());
        assert_eq!(
            msg,
            format!(
                "node 'n' ({op}): input {shape_input} lists {len} sizes; a shape has 0 to 1024 dimensions here"
            )
        );
    }
    let proto = G::default()
        .input("x", FLOAT, &["2", "3"])
        .input("s", INT64, &["3"])
        .node("Reshape", &["x", "s"], &["y"], vec![])
        .output("y")
        .model(18);
    let (m, _) = infer_with(&proto, &InferOptions::default()).unwrap();
    assert_eq!(ty(&m, "y"), "float32 ?×?×?");
}
