//! Convolution and pooling output sizes, worked by hand from the ONNX spec formulas:
//! `out = floor((in + pad_begin + pad_end - ((k - 1) * dilation + 1)) / stride) + 1`
//! (ceil instead of floor with `ceil_mode`), `ceil(in / stride)` for SAME padding,
//! `stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads` for ConvTranspose.

mod infer_support;
use infer_support::*;

fn conv(x: &[&str], w: &[i64], attrs: Vec<onnx_memplan::onnx::proto::AttributeProto>) -> String {
    let proto = G::default()
        .input("x", FLOAT, x)
        .floats("w", w)
        .node("Conv", &["x", "w"], &["y"], attrs)
        .output("y")
        .model(17);
    shape(&infer(&proto), "y")
}

#[test]
fn conv_explicit_pads_and_strides() {
    // (224 + 3 + 3 - 7) / 2 + 1 = 111 + 1 = 112 (ResNet stem).
    let y = conv(
        &["1", "3", "224", "224"],
        &[64, 3, 7, 7],
        vec![a_ints("strides", &[2, 2]), a_ints("pads", &[3, 3, 3, 3])],
    );
    assert_eq!(y, "1×64×112×112");
    // Asymmetric pads: H: (10 + 1 + 0 - 3) / 1 + 1 = 9, W: (12 + 0 + 2 - 3) / 1 + 1 = 12.
    let y = conv(
        &["2", "3", "10", "12"],
        &[8, 3, 3, 3],
        vec![a_ints("pads", &[1, 0, 0, 2])],
    );
    assert_eq!(y, "2×8×9×12");
}

#[test]
fn conv_dilations_and_groups() {
    // Effective kernel (3 - 1) * 2 + 1 = 5: 10 - 5 + 1 = 6.
    let y = conv(
        &["1", "4", "10", "10"],
        &[4, 2, 3, 3],
        vec![a_ints("dilations", &[2, 2]), a_int("group", 2)],
    );
    assert_eq!(y, "1×4×6×6");
    // 1-D convolution with stride 3: (11 - 2) / 3 + 1 = 4.
    let y = conv(&["1", "1", "11"], &[5, 1, 2], vec![a_ints("strides", &[3])]);
    assert_eq!(y, "1×5×4");
}

#[test]
fn conv_auto_pad_modes() {
    // SAME_UPPER / SAME_LOWER: ceil(7 / 2) = 4.
    for mode in ["SAME_UPPER", "SAME_LOWER"] {
        let y = conv(
            &["1", "1", "7", "7"],
            &[1, 1, 3, 3],
            vec![a_str("auto_pad", mode), a_ints("strides", &[2, 2])],
        );
        assert_eq!(y, "1×1×4×4", "{mode}");
    }
    // VALID: (7 - 3) / 2 + 1 = 3.
    let y = conv(
        &["1", "1", "7", "7"],
        &[1, 1, 3, 3],
        vec![a_str("auto_pad", "VALID"), a_ints("strides", &[2, 2])],
    );
    assert_eq!(y, "1×1×3×3");
}

#[test]
fn conv_keeps_symbols_and_forms_stride_expressions() {
    let y = conv(
        &["N", "3", "H", "W"],
        &[16, 3, 3, 3],
        vec![a_ints("pads", &[1, 1, 1, 1])],
    );
    assert_eq!(y, "N×16×H×W");
    let y = conv(
        &["N", "3", "H", "W"],
        &[16, 3, 3, 3],
        vec![a_ints("strides", &[2, 2])],
    );
    // ONNX's rule floor((H + 0 - 3) / 2) + 1, worked by hand: floor((H - 3)/2) + 1 =
    // floor((H + 1)/2) - 2 + 1.
    assert_eq!(y, "N×16×((H + 1)//2 - 1)×((W + 1)//2 - 1)");
    // SAME_UPPER: ceil(H / 2) = floor((H + 1) / 2) whatever H is.
    let y = conv(
        &["N", "3", "H", "W"],
        &[16, 3, 3, 3],
        vec![a_str("auto_pad", "SAME_UPPER"), a_ints("strides", &[2, 2])],
    );
    assert_eq!(y, "N×16×((H + 1)//2)×((W + 1)//2)");
}

#[test]
fn conv_transpose_formula_and_output_shape() {
    let run = |attrs| {
        let proto = G::default()
            .input("x", FLOAT, &["1", "1", "3", "3"])
            .floats("w", &[1, 2, 3, 3])
            .node("ConvTranspose", &["x", "w"], &["y"], attrs)
            .output("y")
            .model(17);
        shape(&infer(&proto), "y")
    };
    // 3 * (3 - 1) + 1 + 3 - 0 = 10 and 3 * (3 - 1) + 0 + 3 - 0 = 9.
    assert_eq!(
        run(vec![
            a_ints("strides", &[3, 2]),
            a_ints("output_padding", &[1, 0])
        ]),
        "1×2×10×7"
    );
    // Pads subtract: 2 * (3 - 1) + 3 - 1 - 1 = 5.
    assert_eq!(
        run(vec![
            a_ints("strides", &[2, 2]),
            a_ints("pads", &[1, 1, 1, 1])
        ]),
        "1×2×5×5"
    );
    // SAME_UPPER: in * stride.
    assert_eq!(
        run(vec![
            a_ints("strides", &[2, 2]),
            a_str("auto_pad", "SAME_UPPER")
        ]),
        "1×2×6×6"
    );
    assert_eq!(
        run(vec![
            a_ints("output_shape", &[10, 8]),
            a_ints("strides", &[3, 2])
        ]),
        "1×2×10×8"
    );
    // group multiplies the output channels: W [C, M/group, k, k].
    assert_eq!(run(vec![a_int("group", 1)]), "1×2×5×5");
}

fn pool(op: &str, x: &[&str], attrs: Vec<onnx_memplan::onnx::proto::AttributeProto>) -> String {
    let proto = G::default()
        .input("x", FLOAT, x)
        .node(op, &["x"], &["y"], attrs)
        .output("y")
        .model(19);
    shape(&infer(&proto), "y")
}

#[test]
fn pooling_floor_and_ceil_modes() {
    // floor((32 - 3) / 2) + 1 = 15; ceil((32 - 3) / 2) + 1 = 16.
    let k = || vec![a_ints("kernel_shape", &[3, 3]), a_ints("strides", &[2, 2])];
    assert_eq!(pool("MaxPool", &["1", "8", "32", "32"], k()), "1×8×15×15");
    let mut ceil = k();
    ceil.push(a_int("ceil_mode", 1));
    assert_eq!(pool("MaxPool", &["1", "8", "32", "32"], ceil), "1×8×16×16");
    // A last window starting in the right padding is dropped (PyTorch rule):
    // ceil((5 + 1 + 1 - 2) / 2) + 1 = 4, but (4 - 1) * 2 = 6 >= 5 + 1, so 3.
    let attrs = vec![
        a_ints("kernel_shape", &[2]),
        a_ints("strides", &[2]),
        a_ints("pads", &[1, 1]),
        a_int("ceil_mode", 1),
    ];
    assert_eq!(pool("AveragePool", &["1", "1", "5"], attrs), "1×1×3");
}

#[test]
fn pooling_dilation_same_padding_and_global() {
    // Effective kernel (2 - 1) * 3 + 1 = 4: (10 - 4) / 1 + 1 = 7.
    let attrs = vec![
        a_ints("kernel_shape", &[2, 2]),
        a_ints("dilations", &[3, 3]),
    ];
    assert_eq!(pool("MaxPool", &["1", "1", "10", "10"], attrs), "1×1×7×7");
    let attrs = vec![
        a_ints("kernel_shape", &[3, 3]),
        a_ints("strides", &[2, 2]),
        a_str("auto_pad", "SAME_UPPER"),
    ];
    assert_eq!(pool("AveragePool", &["1", "1", "9", "8"], attrs), "1×1×5×4");
    assert_eq!(
        pool("GlobalAveragePool", &["batch", "512", "7", "7"], vec![]),
        "batch×512×1×1"
    );
    let attrs = vec![a_ints("kernel_shape", &[2, 2]), a_int("p", 2)];
    assert_eq!(pool("LpPool", &["1", "3", "4", "4"], attrs), "1×3×3×3");
}

#[test]
fn max_pool_indices_output_is_int64() {
    let proto = G::default()
        .input("x", FLOAT, &["1", "1", "4", "4"])
        .node(
            "MaxPool",
            &["x"],
            &["y", "i"],
            vec![a_ints("kernel_shape", &[2, 2]), a_ints("strides", &[2, 2])],
        )
        .output("y")
        .output("i")
        .model(12);
    let m = infer(&proto);
    assert_eq!(ty(&m, "i"), "int64 1×1×2×2");
}
