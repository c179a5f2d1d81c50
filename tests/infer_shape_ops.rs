//! Edge cases of the shape-rearranging operators: Reshape, Slice, Einsum, Split, Squeeze,
//! Resize, MatMul.

mod infer_support;
use infer_support::*;

fn reshape(x: &[&str], target: &[i64], allowzero: bool) -> anyhow::Result<String> {
    let attrs = if allowzero {
        vec![a_int("allowzero", 1)]
    } else {
        vec![]
    };
    let proto = G::default()
        .input("x", FLOAT, x)
        .ints("s", &[target.len() as i64], target)
        .node("Reshape", &["x", "s"], &["y"], attrs)
        .output("y")
        .model(14);
    let (m, _) = infer_with(&proto, &Default::default())?;
    Ok(shape(&m, "y"))
}

#[test]
fn reshape_zero_and_minus_one() {
    assert_eq!(reshape(&["2", "3", "4"], &[0, -1], false).unwrap(), "2×12");
    assert_eq!(reshape(&["2", "3", "4"], &[-1], false).unwrap(), "24");
    assert_eq!(
        reshape(&["2", "3", "4"], &[4, 0, -1], false).unwrap(),
        "4×3×2"
    );
    // allowzero: a 0 is a real zero-sized dimension.
    assert_eq!(reshape(&["0", "3"], &[3, 0], true).unwrap(), "3×0");
    assert!(reshape(&["2", "3"], &[4, -1], false).is_err());
    assert!(reshape(&["2", "3"], &[-1, -1], false).is_err());
    assert!(reshape(&["2", "3"], &[5], false).is_err());
}

#[test]
fn reshape_minus_one_cancels_symbols() {
    assert_eq!(
        reshape(&["batch", "seq", "768"], &[0, 0, 12, -1], false).unwrap(),
        "batch×seq×12×64"
    );
    assert_eq!(
        // batch·seq·768 elements, 768 per row: batch·seq rows (worked by hand).
        reshape(&["batch", "seq", "768"], &[-1, 768], false).unwrap(),
        "batch*seq×768"
    );
    assert_eq!(
        reshape(&["batch", "3", "4"], &[0, -1], false).unwrap(),
        "batch×12"
    );
    // The known sizes cancel: torch's x.view(x.size(0), 512) after global pooling
    // (resnet18 dynamo export) asks for [-1, 512] of batch×512×1×1.
    assert_eq!(
        reshape(&["batch", "512", "1", "1"], &[-1, 512], false).unwrap(),
        "batch×512"
    );
    assert_eq!(
        // 24·batch elements, 8 per row: 3·batch rows (worked by hand).
        reshape(&["batch", "6", "4"], &[-1, 8], false).unwrap(),
        "3*batch×8"
    );
}

fn slice(
    x: &[&str],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> String {
    let n = starts.len() as i64;
    let mut g = G::default()
        .input("x", FLOAT, x)
        .ints("st", &[n], starts)
        .ints("en", &[n], ends);
    let mut inputs = vec!["x", "st", "en"];
    if let Some(a) = axes {
        g = g.ints("ax", &[n], a);
        inputs.push("ax");
    }
    if let Some(s) = steps {
        if axes.is_none() {
            inputs.push("");
        }
        g = g.ints("sp", &[n], s);
        inputs.push("sp");
    }
    let proto = g
        .node("Slice", &inputs, &["y"], vec![])
        .output("y")
        .model(13);
    shape(&infer(&proto), "y")
}

#[test]
fn slice_clamps_wraps_and_steps() {
    assert_eq!(
        slice(&["20", "10", "5"], &[0, 0], &[3, 10], Some(&[0, 1]), None),
        "3×10×5"
    );
    // Negative start, end past the end (INT64_MAX).
    assert_eq!(
        slice(&["20", "10", "5"], &[-3], &[i64::MAX], Some(&[1]), None),
        "20×3×5"
    );
    // Negative steps: from the end back to the start (INT64_MIN end).
    assert_eq!(
        slice(
            &["20", "10", "5"],
            &[-1],
            &[i64::MIN],
            Some(&[1]),
            Some(&[-1])
        ),
        "20×10×5"
    );
    assert_eq!(
        slice(
            &["20", "10", "5"],
            &[20, 10],
            &[0, 0],
            Some(&[0, 1]),
            Some(&[-3, -4])
        ),
        "7×3×5"
    );
    // Empty and out-of-range slices.
    assert_eq!(
        slice(&["20", "10", "5"], &[5], &[2], Some(&[0]), None),
        "0×10×5"
    );
    assert_eq!(
        slice(&["20", "10", "5"], &[1000], &[1001], Some(&[2]), None),
        "20×10×0"
    );
    // No axes: the first n axes; negative axes count from the back.
    assert_eq!(
        slice(&["20", "10", "5"], &[1, 2], &[4, 8], None, Some(&[2, 3])),
        "2×2×5"
    );
    assert_eq!(
        slice(&["20", "10", "5"], &[1], &[3], Some(&[-1]), None),
        "20×10×2"
    );
    // A full slice of a symbolic dim keeps the symbol.
    assert_eq!(
        slice(&["n", "10"], &[0], &[i64::MAX], Some(&[0]), None),
        "n×10"
    );
    assert_eq!(
        slice(&["n", "10"], &[1], &[i64::MAX], Some(&[0]), None),
        "?×10"
    );
}

#[test]
fn slice_attribute_form_before_opset_10() {
    let proto = G::default()
        .input("x", FLOAT, &["4", "6"])
        .node(
            "Slice",
            &["x"],
            &["y"],
            vec![a_ints("starts", &[1, -2]), a_ints("ends", &[3, 100])],
        )
        .output("y")
        .model(9);
    assert_eq!(shape(&infer(&proto), "y"), "2×2");
}

fn einsum(eq: &str, inputs: &[&[&str]]) -> anyhow::Result<String> {
    let mut g = G::default();
    let names: Vec<String> = (0..inputs.len()).map(|i| format!("x{i}")).collect();
    for (n, s) in names.iter().zip(inputs) {
        g = g.input(n, FLOAT, s);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let proto = g
        .node("Einsum", &refs, &["y"], vec![a_str("equation", eq)])
        .output("y")
        .model(12);
    let (m, _) = infer_with(&proto, &Default::default())?;
    Ok(shape(&m, "y"))
}

#[test]
fn einsum_explicit_implicit_and_ellipsis() {
    assert_eq!(
        einsum("bij,bjk->bik", &[&["2", "3", "4"], &["2", "4", "5"]]).unwrap(),
        "2×3×5"
    );
    assert_eq!(einsum("ij->ji", &[&["3", "4"]]).unwrap(), "4×3");
    // Implicit output: letters seen once, alphabetical.
    assert_eq!(einsum("ba,bc", &[&["2", "3"], &["2", "4"]]).unwrap(), "3×4");
    assert_eq!(einsum("ii", &[&["3", "3"]]).unwrap(), "scalar");
    // Ellipsis broadcast, explicit and implicit.
    assert_eq!(
        einsum(
            "...ij,...jk->...ik",
            &[&["5", "1", "2", "3"], &["4", "3", "6"]]
        )
        .unwrap(),
        "5×4×2×6"
    );
    assert_eq!(
        einsum("...ij,...jk", &[&["7", "2", "3"], &["3", "6"]]).unwrap(),
        "7×2×6"
    );
    assert_eq!(einsum("i , i -> ", &[&["3"], &["3"]]).unwrap(), "scalar");
    assert_eq!(
        einsum(
            "bhqd,bhkd->bhqk",
            &[&["B", "8", "S", "64"], &["B", "8", "S", "64"]]
        )
        .unwrap(),
        "B×8×S×S"
    );
    assert!(einsum("ij,jk->ik", &[&["2", "3"], &["4", "5"]]).is_err());
    assert!(einsum("ij->ik", &[&["2", "3"]]).is_err());
}

#[test]
fn split_forms() {
    let run = |opset: i64, attrs, split: Option<&[i64]>, outs: &[&str]| {
        let mut g = G::default().input("x", FLOAT, &["10", "6"]);
        let mut inputs = vec!["x"];
        if let Some(s) = split {
            g = g.ints("split", &[s.len() as i64], s);
            inputs.push("split");
        }
        let proto = g
            .node("Split", &inputs, outs, attrs)
            .output(outs[0])
            .model(opset);
        let m = infer(&proto);
        outs.iter().map(|o| shape(&m, o)).collect::<Vec<_>>()
    };
    assert_eq!(
        run(11, vec![a_ints("split", &[3, 7])], None, &["a", "b"]),
        ["3×6", "7×6"]
    );
    assert_eq!(run(13, vec![], Some(&[4, 6]), &["a", "b"]), ["4×6", "6×6"]);
    assert_eq!(
        run(13, vec![a_int("axis", -1)], None, &["a", "b", "c"]),
        ["10×2", "10×2", "10×2"]
    );
    // num_outputs (opset 18): ceil-sized chunks, the last one smaller.
    assert_eq!(
        run(18, vec![a_int("num_outputs", 3)], None, &["a", "b", "c"]),
        ["4×6", "4×6", "2×6"]
    );
}

#[test]
fn squeeze_unsqueeze_both_forms() {
    let proto = G::default()
        .input("x", FLOAT, &["1", "3", "1", "5"])
        .node("Squeeze", &["x"], &["a"], vec![])
        .node("Squeeze", &["x"], &["b"], vec![a_ints("axes", &[-2])])
        .node("Unsqueeze", &["x"], &["c"], vec![a_ints("axes", &[0, 5])])
        .output("a")
        .model(11);
    let m = infer(&proto);
    assert_eq!(shape(&m, "a"), "3×5");
    assert_eq!(shape(&m, "b"), "1×3×5");
    assert_eq!(shape(&m, "c"), "1×1×3×1×5×1");
    let proto = G::default()
        .input("x", FLOAT, &["3", "5"])
        .ints("axes", &[2], &[1, -1])
        .node("Unsqueeze", &["x", "axes"], &["y"], vec![])
        .output("y")
        .model(13);
    assert_eq!(shape(&infer(&proto), "y"), "3×1×5×1");
}

#[test]
fn resize_scales_sizes_axes_and_aspect_ratio() {
    let run = |inputs: &[&str], g: G, attrs| {
        let proto = g
            .input("x", FLOAT, &["1", "3", "20", "30"])
            .node("Resize", inputs, &["y"], attrs)
            .output("y")
            .model(19);
        shape(&infer(&proto), "y")
    };
    let scales = |g: G, v: &[f32]| {
        let mut g = g;
        g.graph
            .initializer
            .push(onnx_memplan::onnx::proto::TensorProto {
                name: Some("scales".into()),
                dims: vec![v.len() as i64],
                data_type: Some(FLOAT),
                float_data: v.to_vec(),
                ..Default::default()
            });
        g
    };
    assert_eq!(
        run(
            &["x", "", "scales"],
            scales(G::default(), &[1.0, 1.0, 2.0, 0.5]),
            vec![]
        ),
        "1×3×40×15"
    );
    // floor(20 · 1.7) = 34, floor(30 · 1.7) = 51 with axes.
    assert_eq!(
        run(
            &["x", "", "scales"],
            scales(G::default(), &[1.7, 1.7]),
            vec![a_ints("axes", &[2, 3])]
        ),
        "1×3×34×51"
    );
    let sizes = G::default().ints("sizes", &[2], &[10, 10]);
    assert_eq!(
        run(
            &["x", "", "", "sizes"],
            sizes,
            vec![a_ints("axes", &[2, 3])]
        ),
        "1×3×10×10"
    );
    // not_larger: scale min(10/20, 10/30) = 1/3: round(20/3) = 7, 10.
    let sizes = G::default().ints("sizes", &[2], &[10, 10]);
    let attrs = vec![
        a_ints("axes", &[2, 3]),
        a_str("keep_aspect_ratio_policy", "not_larger"),
    ];
    assert_eq!(run(&["x", "", "", "sizes"], sizes, attrs), "1×3×7×10");
    let sizes = G::default().ints("sizes", &[2], &[10, 10]);
    let attrs = vec![
        a_ints("axes", &[2, 3]),
        a_str("keep_aspect_ratio_policy", "not_smaller"),
    ];
    assert_eq!(run(&["x", "", "", "sizes"], sizes, attrs), "1×3×10×15");
}

#[test]
fn matmul_one_d_and_batched_broadcast() {
    let run = |a: &[&str], b: &[&str]| {
        let proto = G::default()
            .input("a", FLOAT, a)
            .input("b", FLOAT, b)
            .node("MatMul", &["a", "b"], &["y"], vec![])
            .output("y")
            .model(13);
        infer_with(&proto, &Default::default()).map(|(m, _)| shape(&m, "y"))
    };
    assert_eq!(run(&["3"], &["3"]).unwrap(), "scalar");
    assert_eq!(run(&["3"], &["2", "3", "4"]).unwrap(), "2×4");
    assert_eq!(run(&["2", "3", "4"], &["4"]).unwrap(), "2×3");
    assert_eq!(
        run(&["5", "1", "3", "4"], &["6", "4", "2"]).unwrap(),
        "5×6×3×2"
    );
    assert_eq!(
        run(&["B", "S", "768"], &["768", "3072"]).unwrap(),
        "B×S×3072"
    );
    assert!(run(&["2", "3"], &["4", "5"]).is_err());
}

/// `Slice(x, starts, ends = Unsqueeze(Shape(y)[0]), axes=[0], steps)` with `starts`/`steps`
/// constants, the end taken from `y`'s first dim at run time.
fn slice_to_dim_of(x: &[&str], y: &[&str], start: i64, step: i64) -> String {
    let proto = G::default()
        .input("x", FLOAT, x)
        .input("y", FLOAT, y)
        .ints("i0", &[], &[0])
        .ints("zero", &[1], &[0])
        .ints("st", &[1], &[start])
        .ints("sp", &[1], &[step])
        .node("Shape", &["y"], &["ys"], vec![])
        .node("Gather", &["ys", "i0"], &["n"], vec![a_int("axis", 0)])
        .node("Unsqueeze", &["n", "zero"], &["en"], vec![])
        .node("Slice", &["x", "st", "en", "zero", "sp"], &["out"], vec![])
        .output("out")
        .model(13);
    shape(&infer(&proto), "out")
}

#[test]
fn slice_to_a_symbolic_end_keeps_a_whole_axis() {
    // ONNX Slice clamps `ends` to [0, dims[axis]]: ending at the axis's own size from 0 by 1
    // takes all of it (onnxruntime: x [5, 10] sliced to Shape(y)[0] with y [5, 3] gives 5×10).
    assert_eq!(slice_to_dim_of(&["n", "10"], &["n", "3"], 0, 1), "n×10");
    // Not provably whole: another size (min(n, m) elements), a later start, a known axis.
    assert_eq!(slice_to_dim_of(&["n", "10"], &["m", "3"], 0, 1), "?×10");
    assert_eq!(slice_to_dim_of(&["n", "10"], &["n", "3"], 1, 1), "?×10");
    assert_eq!(slice_to_dim_of(&["128", "10"], &["n", "3"], 0, 1), "?×10");
    // Bound, the same slice is concrete.
    assert_eq!(slice_to_dim_of(&["128", "10"], &["16", "3"], 0, 1), "16×10");
}

#[test]
fn slice_reversing_a_whole_symbolic_axis_keeps_it() {
    // steps -1 from -1 to INT64_MIN: every element, last first (numpy x[::-1]).
    assert_eq!(
        slice(&["n", "10"], &[-1], &[i64::MIN], Some(&[0]), Some(&[-1])),
        "n×10"
    );
    assert_eq!(
        slice(&["n", "10"], &[-2], &[i64::MIN], Some(&[0]), Some(&[-1])),
        "?×10"
    );
    // A start so negative it clamps to 0.
    assert_eq!(
        slice(&["n", "10"], &[i64::MIN], &[i64::MAX], Some(&[0]), None),
        "n×10"
    );
}
