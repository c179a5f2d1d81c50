//! Value propagation through shape computations (the pattern exporters emit for dynamic
//! reshapes), with concrete and with symbolic inputs; `Constant` attribute forms.

mod infer_support;
use infer_support::*;
use onnx_memplan::infer::InferOptions;
use onnx_memplan::onnx::proto::AttributeProto;

/// x [B, S, 768] → Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), Unsqueeze(Gather(Shape(x), 1)), [12, 64])).
fn split_heads(batch: &str, seq: &str) -> onnx_memplan::onnx::proto::ModelProto {
    G::default()
        .input("x", FLOAT, &[batch, seq, "768"])
        .ints("i0", &[], &[0])
        .ints("i1", &[], &[1])
        .ints("zero", &[1], &[0])
        .ints("heads", &[2], &[12, 64])
        .node("Shape", &["x"], &["shape"], vec![])
        .node("Gather", &["shape", "i0"], &["b"], vec![a_int("axis", 0)])
        .node("Gather", &["shape", "i1"], &["s"], vec![a_int("axis", 0)])
        .node("Unsqueeze", &["b", "zero"], &["b1"], vec![])
        .node("Unsqueeze", &["s", "zero"], &["s1"], vec![])
        .node(
            "Concat",
            &["b1", "s1", "heads"],
            &["target"],
            vec![a_int("axis", 0)],
        )
        .node("Reshape", &["x", "target"], &["y"], vec![])
        .node(
            "Transpose",
            &["y"],
            &["t"],
            vec![a_ints("perm", &[0, 2, 1, 3])],
        )
        .output("t")
        .model(13)
}

#[test]
fn concrete_chain_folds_to_constants() {
    let m = infer(&split_heads("2", "5"));
    assert_eq!(value(&m, "shape"), Some(vec![2, 5, 768]));
    assert_eq!(ty(&m, "b"), "int64 scalar");
    assert_eq!(value(&m, "b"), Some(vec![2]));
    assert_eq!(value(&m, "target"), Some(vec![2, 5, 12, 64]));
    assert_eq!(shape(&m, "y"), "2×5×12×64");
    assert_eq!(shape(&m, "t"), "2×12×5×64");
}

#[test]
fn symbolic_chain_keeps_symbols() {
    let m = infer(&split_heads("batch", "seq"));
    assert_eq!(value(&m, "target"), None, "not a constant");
    assert_eq!(shape(&m, "target"), "4");
    assert_eq!(shape(&m, "y"), "batch×seq×12×64");
    assert_eq!(shape(&m, "t"), "batch×12×seq×64");
}

#[test]
fn bound_symbols_and_input_shapes_make_it_concrete() {
    let mut options = InferOptions::default();
    options.dims.insert("batch".into(), 3);
    let (m, _) = infer_with(&split_heads("batch", "seq"), &options).unwrap();
    assert_eq!(shape(&m, "t"), "3×12×seq×64");
    options.input_shapes.insert("x".into(), vec![4, 7, 768]);
    let (m, _) = infer_with(&split_heads("batch", "seq"), &options).unwrap();
    assert_eq!(shape(&m, "t"), "4×12×7×64");
    assert_eq!(value(&m, "target"), Some(vec![4, 7, 12, 64]));
}

#[test]
fn constant_of_shape_range_where_and_arithmetic_fold() {
    let proto = G::default()
        .input("x", FLOAT, &["2", "6"])
        .ints("one", &[], &[1])
        .ints("minus1", &[1], &[-1])
        .node("Shape", &["x"], &["s"], vec![])
        .node("ReduceProd", &["s"], &["n"], vec![a_int("keepdims", 0)])
        .node("ConstantOfShape", &["s"], &["zeros"], vec![])
        .node("Range", &["one", "n", "one"], &["r"], vec![])
        .node("Equal", &["s", "minus1"], &["eq"], vec![])
        .node("Mul", &["s", "one"], &["s2"], vec![])
        .node("Where", &["eq", "minus1", "s2"], &["w"], vec![])
        .node("Cast", &["w"], &["wf"], vec![a_int("to", 1)])
        .node("Size", &["x"], &["size"], vec![])
        .output("r")
        .model(13);
    let m = infer(&proto);
    assert_eq!(value(&m, "n"), Some(vec![12]));
    assert_eq!(shape(&m, "zeros"), "2×6");
    assert_eq!(shape(&m, "r"), "11");
    assert_eq!(value(&m, "r").map(|v| v.len()), Some(11));
    assert_eq!(value(&m, "w"), Some(vec![2, 6]));
    assert_eq!(ty(&m, "wf"), "float32 2");
    assert_eq!(value(&m, "size"), Some(vec![12]));
}

#[test]
fn range_of_a_symbolic_length_is_that_symbol() {
    let proto = G::default()
        .input("x", FLOAT, &["seq", "4"])
        .ints("zero", &[], &[0])
        .ints("one", &[], &[1])
        .node("Shape", &["x"], &["s"], vec![])
        .node("Gather", &["s", "zero"], &["n"], vec![])
        .node("Range", &["zero", "n", "one"], &["r"], vec![])
        .output("r")
        .model(13);
    assert_eq!(shape(&infer(&proto), "r"), "seq");
}

#[test]
fn constant_node_attribute_forms() {
    let attr = |f: fn(AttributeProto) -> AttributeProto| {
        f(AttributeProto {
            name: None,
            ..Default::default()
        })
    };
    let cases: Vec<(AttributeProto, &str)> = vec![
        (
            attr(|a| AttributeProto {
                name: Some("value_float".into()),
                f: Some(1.5),
                ..a
            }),
            "float32 scalar",
        ),
        (
            attr(|a| AttributeProto {
                name: Some("value_floats".into()),
                floats: vec![1.0, 2.0],
                ..a
            }),
            "float32 2",
        ),
        (
            attr(|a| AttributeProto {
                name: Some("value_int".into()),
                i: Some(3),
                ..a
            }),
            "int64 scalar",
        ),
        (
            attr(|a| AttributeProto {
                name: Some("value_ints".into()),
                ints: vec![1, 2, 3],
                ..a
            }),
            "int64 3",
        ),
        (a_str("value_string", "hello"), "string scalar"),
        (
            attr(|a| AttributeProto {
                name: Some("value_strings".into()),
                strings: vec!["a".into(), "b".into()],
                ..a
            }),
            "string 2",
        ),
        (
            attr(|a| AttributeProto {
                name: Some("value".into()),
                t: Some(Box::new(onnx_memplan::onnx::proto::TensorProto {
                    dims: vec![2, 2],
                    data_type: Some(INT64),
                    int64_data: vec![1, 2, 3, 4],
                    ..Default::default()
                })),
                ..a
            }),
            "int64 2×2",
        ),
        (
            attr(|a| AttributeProto {
                name: Some("sparse_value".into()),
                sparse_tensor: Some(Box::new(onnx_memplan::onnx::proto::SparseTensorProto {
                    values: Some(onnx_memplan::onnx::proto::TensorProto {
                        dims: vec![1],
                        data_type: Some(FLOAT),
                        float_data: vec![1.0],
                        ..Default::default()
                    }),
                    indices: Some(onnx_memplan::onnx::proto::TensorProto {
                        dims: vec![1],
                        data_type: Some(INT64),
                        int64_data: vec![3],
                        ..Default::default()
                    }),
                    dims: vec![4, 5],
                })),
                ..a
            }),
            "float32 4×5",
        ),
    ];
    for (attr, want) in cases {
        let name = attr.name.clone().unwrap();
        let proto = G::default()
            .node("Constant", &[], &["c"], vec![attr])
            .output("c")
            .model(13);
        assert_eq!(ty(&infer(&proto), "c"), want, "{name}");
    }
}

#[test]
fn float_max_and_min_reductions_fold() {
    // The image-resize arithmetic of torchvision's detection transforms (ssdlite320 exports):
    // ReduceMax over a float constant, Cast to int64, then a shape. onnxruntime gives a
    // ConstantOfShape of [320] (and [240] for the ReduceMin) here.
    let sizes = AttributeProto {
        name: Some("value_floats".into()),
        floats: vec![320.0, 240.0],
        r#type: Some(6),
        ..Default::default()
    };
    let proto = G::default()
        .ints("zero", &[1], &[0])
        .node("Constant", &[], &["sizes"], vec![sizes])
        .node("ReduceMax", &["sizes"], &["mx"], vec![a_int("keepdims", 0)])
        .node("ReduceMin", &["sizes"], &["mn"], vec![a_int("keepdims", 1)])
        .node("Cast", &["mx"], &["mx_i"], vec![a_int("to", 7)])
        .node("Cast", &["mn"], &["mn_i"], vec![a_int("to", 7)])
        .node("Unsqueeze", &["mx_i", "zero"], &["mx_1"], vec![])
        .node("ConstantOfShape", &["mx_1"], &["a"], vec![])
        .node("ConstantOfShape", &["mn_i"], &["b"], vec![])
        .output("a")
        .output("b")
        .model(13);
    let m = infer(&proto);
    assert_eq!(ty(&m, "mx"), "float32 scalar");
    assert_eq!(value(&m, "mx_i"), Some(vec![320]));
    assert_eq!(shape(&m, "a"), "320");
    assert_eq!(shape(&m, "b"), "240");
}

/// An int64 scalar-tensor attribute (ConstantOfShape's `value`).
fn a_tensor_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(4),
        t: Some(Box::new(onnx_memplan::onnx::proto::TensorProto {
            dims: vec![1],
            data_type: Some(INT64),
            int64_data: vec![v],
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// `cls_token.expand(x.shape[0], -1, -1)` as torch exports it: the requested shape
/// `[batch, -1, -1]` goes through `Where(shape == -1, 1, shape)` before `Expand`.
fn expand_minus_one(batch: &str) -> onnx_memplan::onnx::proto::ModelProto {
    G::default()
        .input("x", FLOAT, &[batch, "3", "8"])
        .floats("cls", &[1, 1, 64])
        .ints("i0", &[], &[0])
        .ints("zero", &[1], &[0])
        .ints("minus1", &[1], &[-1])
        .ints("neg", &[], &[-1])
        .node("Shape", &["x"], &["xs"], vec![])
        .node("Gather", &["xs", "i0"], &["b"], vec![a_int("axis", 0)])
        .node("Unsqueeze", &["b", "zero"], &["b1"], vec![])
        .node(
            "Concat",
            &["b1", "minus1", "minus1"],
            &["cat"],
            vec![a_int("axis", 0)],
        )
        .node("Reshape", &["cat", "minus1"], &["req"], vec![])
        .node("Shape", &["req"], &["req_len"], vec![])
        .node(
            "ConstantOfShape",
            &["req_len"],
            &["ones"],
            vec![a_tensor_int("value", 1)],
        )
        .node("Mul", &["ones", "neg"], &["negs"], vec![])
        .node("Equal", &["req", "negs"], &["is_neg"], vec![])
        .node("Where", &["is_neg", "ones", "req"], &["target"], vec![])
        .node("Expand", &["cls", "target"], &["y"], vec![])
        .output("y")
        .model(13)
}

#[test]
fn expand_with_minus_one_keeps_the_symbol() {
    // onnxruntime with x [3, 3, 8]: y is [3, 1, 64] (the -1s keep cls's sizes).
    let m = infer(&expand_minus_one("3"));
    assert_eq!(value(&m, "target"), Some(vec![3, 1, 1]));
    assert_eq!(shape(&m, "y"), "3×1×64");
    // A symbol is a size, never -1: the comparison folds and the symbol survives.
    let m = infer(&expand_minus_one("batch"));
    assert_eq!(value(&m, "is_neg"), Some(vec![0, 1, 1]));
    assert_eq!(shape(&m, "y"), "batch×1×64");
}

/// A scalar float Constant (`value_float`).
fn a_float(v: f32) -> AttributeProto {
    AttributeProto {
        name: Some("value_float".into()),
        f: Some(v),
        r#type: Some(1),
        ..Default::default()
    }
}

#[test]
fn tensorflow_same_padding_arithmetic_folds_through_clip() {
    // timm's tf_* models compute "same" padding in float: for a 224 input, stride 2, kernel 3,
    // pad = max((ceil(224 / 2) - 1) * 2 + 3 - 224, 0) = max(222 + 3 - 224, 0) = 1 (worked by
    // hand from the formula in the exported graph). With a 225 input the same formula gives
    // (113 - 1) * 2 + 3 - 225 = 2; a negative value clips to 0. Clip's max input is absent.
    let mut g = G::default().ints("zero_axis", &[1], &[0]);
    for (name, v) in [
        ("two", 2.0),
        ("one", 1.0),
        ("three", 3.0),
        ("zero", 0.0),
        ("minus", -5.0),
    ] {
        g = g.node("Constant", &[], &[name], vec![a_float(v)]);
    }
    for (tag, size) in [("a", 224.0), ("b", 225.0)] {
        let n = |s: &str| format!("{tag}_{s}");
        g = g
            .node("Constant", &[], &[&n("in")], vec![a_float(size)])
            .node("Div", &[&n("in"), "two"], &[&n("q")], vec![])
            .node("Ceil", &[&n("q")], &[&n("c")], vec![])
            .node("Sub", &[&n("c"), "one"], &[&n("c1")], vec![])
            .node("Mul", &[&n("c1"), "two"], &[&n("m")], vec![])
            .node("Add", &[&n("m"), "three"], &[&n("e")], vec![])
            .node("Sub", &[&n("e"), &n("in")], &[&n("p")], vec![])
            .node("Clip", &[&n("p"), "zero", ""], &[&n("pc")], vec![])
            .node("Cast", &[&n("pc")], &[&n("pi")], vec![a_int("to", 7)])
            .node("Unsqueeze", &[&n("pi"), "zero_axis"], &[&n("pad")], vec![])
            .node("ConstantOfShape", &[&n("pad")], &[&n("out")], vec![])
            .output(&n("out"));
    }
    let m = infer(
        &g.node("Clip", &["minus", "zero", ""], &["neg"], vec![])
            .node("Cast", &["neg"], &["neg_i"], vec![a_int("to", 7)])
            .model(13),
    );
    assert_eq!(value(&m, "a_pi"), Some(vec![1]));
    assert_eq!(shape(&m, "a_out"), "1");
    assert_eq!(shape(&m, "b_out"), "2");
    assert_eq!(value(&m, "neg_i"), Some(vec![0]));
}
