//! The split stage on chains through upsampling (Resize, ConvTranspose) and on chains whose
//! intermediates are also read after the chain (U-Net skips), each worked by hand and then run
//! in onnxruntime against the unsplit model element by element (through the venv
//! `scripts/ort_check.sh` creates, `.ci/venv`, or `MEMPLAN_PYTHON`; the comparison says so
//! and is skipped when neither has onnxruntime).

mod common;

use common::{
    compare_in_onnxruntime, float_info, float_init, int_init, model, node, wave_init, write_model,
};
use onnx_memplan::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, attribute_proto,
};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::{Chain, chain_of};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rules::rule_of;
use onnx_memplan::split::tiling::{Tiling, tile};

fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

fn string(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(value.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

fn with(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = node(op, inputs, &[output]);
    n.attribute = attrs;
    n
}

/// A 3×3 Conv with one pixel of padding.
fn conv(input: &str, weight: &str, output: &str) -> NodeProto {
    with(
        "Conv",
        &[input, weight],
        output,
        vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
    )
}

/// A model of `nodes` reading `x` of `input` shape and writing `y`, at `opset`; the output's
/// type is left to inference (the caller writes the inferred one back).
fn graph_model(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    input: &[i64],
    opset: i64,
) -> ModelProto {
    let mut m = model(GraphProto {
        name: Some("upsample".into()),
        node: nodes,
        input: vec![float_info("x", input)],
        output: vec![{
            let mut y = float_info("y", &[]);
            if let Some(onnx_memplan::onnx::proto::type_proto::Value::TensorType(t)) =
                y.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                t.shape = None;
            }
            y
        }],
        initializer: inits,
        ..Default::default()
    });
    m.opset_import[0].version = Some(opset);
    m
}

/// Writes the model (its output typed as inferred), cuts the chain made of its first `len`
/// nodes into `grid`, writes the rewrite and compares both in onnxruntime.
fn split_and_compare(
    dir: &std::path::Path,
    stem: &str,
    m: &ModelProto,
    len: usize,
    grid: [usize; 2],
) -> (Chain, Tiling) {
    let path = dir.join(format!("{stem}.onnx"));
    write_model(m, &path);
    let (mut proto, typed, _) = load_typed(&path, &Default::default()).unwrap();
    let g = &typed.graph;
    proto.graph.as_mut().unwrap().output[0].r#type =
        Some(g.value("y").unwrap().ty.as_ref().unwrap().to_proto());
    write_model(&proto, &path);
    let order: Vec<usize> = (0..g.nodes.len()).collect();
    let chain = chain_of(g, &order[..len], 17).unwrap_or_else(|| panic!("{stem}: not a chain"));
    let tiling = tile(g, &chain, grid).unwrap_or_else(|| panic!("{stem}: no {grid:?} grid"));
    let rewritten = common::rewrite_alone(&proto, g, &order, (&chain, &tiling));
    let split = dir.join(format!("{stem}.split.onnx"));
    write_model(&rewritten.model, &split);
    eprintln!("{stem}:");
    compare_in_onnxruntime(&path, &split);
    (chain, tiling)
}

/// Conv → Resize nearest ×2 (asymmetric, floor; `scales`) → Conv, X[1,3,10,12] → Y[1,4,20,24]
/// in 2×2 tiles. Worked by hand (rows): tile row 0 makes Y rows [0,10); the last Conv reads
/// U rows [-1,11), so U [0,11); nearest floor reads C rows floor(0/2) = 0 to floor(10/2) = 5:
/// C [0,6), whose Resize makes U [0,12), cropped to [0,11); the first Conv reads X [-1,7).
/// Tile row 1 makes Y [10,20): U [9,20), C rows 4 to 9: [4,10), its Resize makes U [8,20),
/// cropped to [9,20); X [3,11). Columns: Y [0,12) → U [0,13) → C [0,7); Y [12,24) → U [11,24)
/// → C [5,12). The first Conv computes (6+6)·(7+7) = 168 positions instead of 10·12 = 120:
/// 48 more at 4·3·9 = 108 MACs each, 5184; the Resize has no MACs and the last Conv no halo.
#[test]
fn resize_nearest_chain_in_2x2_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let m = graph_model(
        vec![
            conv("x", "w1", "c"),
            with(
                "Resize",
                &["c", "", "sc"],
                "u",
                vec![
                    string("mode", "nearest"),
                    string("coordinate_transformation_mode", "asymmetric"),
                    string("nearest_mode", "floor"),
                ],
            ),
            conv("u", "w2", "y"),
        ],
        vec![
            wave_init("w1", &[4, 3, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        &[1, 3, 10, 12],
        17,
    );
    let (_, t) = split_and_compare(dir.path(), "nearest", &m, 3, [2, 2]);
    let rows = |tile: usize, k: usize| t.tiles()[tile].computed[k][0];
    assert_eq!(rows(0, 1), Span::new(0, 11));
    assert_eq!(t.tiles()[0].produced[1][0], Span::new(0, 12));
    assert_eq!(rows(0, 0), Span::new(0, 6));
    assert_eq!(t.tiles()[0].reads[0][0].unwrap()[0], Span::new(-1, 7));
    assert_eq!(rows(3, 1), Span::new(9, 20));
    assert_eq!(t.tiles()[3].produced[1][0], Span::new(8, 20));
    assert_eq!(rows(3, 0), Span::new(4, 10));
    assert_eq!(t.tiles()[3].reads[0][0].unwrap()[0], Span::new(3, 11));
    assert_eq!(t.tiles()[0].computed[0][1], Span::new(0, 7));
    assert_eq!(t.tiles()[3].computed[0][1], Span::new(5, 12));
    assert_eq!(t.extra_macs, 5184);
}

/// Conv → Resize bilinear half_pixel given `sizes` [1,4,18,14] → Conv, X[1,3,9,7], in 3×2
/// tiles. Worked by hand for tile row 1 (Y rows [6,12)): the last Conv reads U [5,13);
/// half_pixel ×2 maps output row o to x = (o + ½)/2 − ½, so x(5) = 2.25 reads C rows 2 and 3,
/// x(12) = 5.75 rows 5 and 6: C [2,7), whose Resize (of a 5-row slice, sizes [1,4,10,…])
/// makes U [4,14), cropped to [5,13). Tile row 0 (Y [0,6)): U [0,7), x(0) = −0.25 clamps to
/// row 0, x(6) = 2.75 reads 2 and 3: C [0,4).
#[test]
fn resize_bilinear_half_pixel_chain_in_3x2_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let m = graph_model(
        vec![
            conv("x", "w1", "c"),
            with(
                "Resize",
                &["c", "", "", "sz"],
                "u",
                vec![
                    string("mode", "linear"),
                    string("coordinate_transformation_mode", "half_pixel"),
                ],
            ),
            conv("u", "w2", "y"),
        ],
        vec![
            wave_init("w1", &[4, 3, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
            int_init("sz", &[4], &[1, 4, 18, 14]),
        ],
        &[1, 3, 9, 7],
        17,
    );
    let (_, t) = split_and_compare(dir.path(), "bilinear", &m, 3, [3, 2]);
    // Tiles are row by row: tile 2 is (1, 0).
    assert_eq!(t.tiles()[2].computed[1][0], Span::new(5, 13));
    assert_eq!(t.tiles()[2].computed[0][0], Span::new(2, 7));
    assert_eq!(t.tiles()[2].produced[1][0], Span::new(4, 14));
    assert_eq!(t.tiles()[0].computed[0][0], Span::new(0, 4));
}

/// A Resize form: its name, its inputs after the resized tensor `c`, its attributes, the
/// initializer of its scales or sizes, and the opset.
type ResizeForm = (
    &'static str,
    Vec<&'static str>,
    Vec<AttributeProto>,
    TensorProto,
    i64,
);

/// Every Resize form the rule accepts, between two Convs, in 3×2 tiles: onnxruntime must
/// agree with the unsplit model.
#[test]
fn every_resize_form_tiles_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let modes = |mode: &str, transform: &str, nearest: &str| {
        let mut a = vec![
            string("mode", mode),
            string("coordinate_transformation_mode", transform),
        ];
        if !nearest.is_empty() {
            a.push(string("nearest_mode", nearest));
        }
        a
    };
    let forms: Vec<ResizeForm> = vec![
        (
            "nearest half_pixel round_prefer_floor x2, sizes",
            vec!["", "", "sz"],
            modes("nearest", "half_pixel", "round_prefer_floor"),
            int_init("sz", &[4], &[1, 4, 22, 18]),
            17,
        ),
        (
            "nearest pytorch_half_pixel round_prefer_ceil x3",
            vec!["", "sc"],
            modes("nearest", "pytorch_half_pixel", "round_prefer_ceil"),
            float_init("sc", &[4], &[1.0, 1.0, 3.0, 3.0]),
            17,
        ),
        (
            "nearest asymmetric ceil x2 on H only",
            vec!["", "sc"],
            modes("nearest", "asymmetric", "ceil"),
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 1.0]),
            17,
        ),
        (
            "linear asymmetric x3, sizes",
            vec!["", "", "sz"],
            modes("linear", "asymmetric", ""),
            int_init("sz", &[4], &[1, 4, 33, 27]),
            17,
        ),
        (
            "linear pytorch_half_pixel x2, opset 11 roi",
            vec!["roi", "sc"],
            modes("linear", "pytorch_half_pixel", ""),
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 2.0]),
            11,
        ),
        (
            "linear half_pixel_symmetric x2, opset 19",
            vec!["", "sc"],
            modes("linear", "half_pixel_symmetric", ""),
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 2.0]),
            19,
        ),
        (
            "opset 10 nearest x2",
            vec!["sc"],
            vec![string("mode", "nearest")],
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 2.0]),
            10,
        ),
    ];
    for (i, (name, inputs, attrs, init, opset)) in forms.into_iter().enumerate() {
        let mut resize_inputs = vec!["c"];
        resize_inputs.extend(inputs.iter().copied());
        let mut inits = vec![
            wave_init("w1", &[4, 3, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
            init,
        ];
        if inputs.contains(&"roi") {
            inits.push(float_init("roi", &[0], &[]));
        }
        let m = graph_model(
            vec![
                conv("x", "w1", "c"),
                with("Resize", &resize_inputs, "u", attrs),
                conv("u", "w2", "y"),
            ],
            inits,
            &[1, 3, 11, 9],
            opset,
        );
        eprintln!("{name}");
        split_and_compare(dir.path(), &format!("form{i}"), &m, 3, [3, 2]);
    }
}

/// The Resize forms a tile cannot reproduce exactly have no rule (they end a chain):
/// align_corners (the mapping depends on the whole length), cubic, tf_crop_and_resize, a
/// factor of 1.5 and antialias.
#[test]
fn inexact_resize_forms_have_no_rule() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<AttributeProto>, [f32; 4])> = vec![
        (
            "align_corners",
            vec![
                string("mode", "linear"),
                string("coordinate_transformation_mode", "align_corners"),
            ],
            [1.0, 1.0, 2.0, 2.0],
        ),
        ("cubic", vec![string("mode", "cubic")], [1.0, 1.0, 2.0, 2.0]),
        (
            "factor 1.5",
            vec![string("mode", "nearest")],
            [1.0, 1.0, 1.5, 1.5],
        ),
        (
            "antialias",
            vec![string("mode", "linear"), int("antialias", 1)],
            [1.0, 1.0, 2.0, 2.0],
        ),
        (
            "channels scaled",
            vec![string("mode", "nearest")],
            [1.0, 2.0, 2.0, 2.0],
        ),
    ];
    for (i, (name, attrs, scales)) in cases.into_iter().enumerate() {
        let m = graph_model(
            vec![with("Resize", &["x", "", "sc"], "y", attrs)],
            vec![float_init("sc", &[4], &scales)],
            &[1, 4, 8, 8],
            19,
        );
        let path = dir.path().join(format!("refused{i}.onnx"));
        write_model(&m, &path);
        let (_, typed, _) = load_typed(&path, &Default::default()).unwrap();
        let g = &typed.graph;
        assert_eq!(rule_of(g, &g.nodes[0]), None, "{name}");
    }
}

/// ConvTranspose k = s = 2 (no overlap), 2 groups, → Conv, X[1,4,6,5] → U[1,4,12,10] → Y, in
/// 2×2 tiles. Worked by hand: U row o comes from X row o div 2 alone. Tile row 0 (Y [0,6)):
/// U [0,7), X [0,4), the copy makes U [0,8), cropped to [0,7); tile row 1 (Y [6,12)): U
/// [5,12), X [2,6), makes [4,12). Columns: Y [0,5) → U [0,6) → X [0,3); Y [5,10) → U [4,10) →
/// X [2,5). The copies read 4 tiles × 4·3 = 48 input positions instead of 6·5 = 30: 18 more
/// at 4·2·2·2 = 32 MACs each (input channels × output channels per group × kernel), 576.
#[test]
fn conv_transpose_chain_in_2x2_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let m = graph_model(
        vec![
            with(
                "ConvTranspose",
                &["x", "wt", "bt"],
                "u",
                vec![
                    ints("kernel_shape", &[2, 2]),
                    ints("strides", &[2, 2]),
                    int("group", 2),
                ],
            ),
            conv("u", "w2", "y"),
        ],
        vec![
            wave_init("wt", &[4, 2, 2, 2], 1.0),
            wave_init("bt", &[4], 3.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
        ],
        &[1, 4, 6, 5],
        17,
    );
    let (_, t) = split_and_compare(dir.path(), "convtranspose", &m, 2, [2, 2]);
    assert_eq!(t.tiles()[0].computed[0][0], Span::new(0, 7));
    assert_eq!(t.tiles()[0].reads[0][0].unwrap()[0], Span::new(0, 4));
    assert_eq!(t.tiles()[0].produced[0][0], Span::new(0, 8));
    assert_eq!(t.tiles()[3].computed[0][0], Span::new(5, 12));
    assert_eq!(
        t.tiles()[3].reads[0][0].unwrap(),
        [Span::new(2, 6), Span::new(2, 5)]
    );
    assert_eq!(t.tiles()[3].produced[0][0], Span::new(4, 12));
    assert_eq!(t.extra_macs, 576);
}

/// ConvTranspose forms with overlapping kernels (stride below the kernel's extent), padding
/// and dilation, in 3×2 tiles; and the forms without a rule: output_padding, and a stride
/// longer than the kernel (rows no input reaches).
#[test]
fn overlapping_conv_transpose_forms_tile_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let forms: Vec<(&str, Vec<AttributeProto>, i64)> = vec![
        (
            "k3 s2 pads 1",
            vec![ints("strides", &[2, 2]), ints("pads", &[1, 1, 1, 1])],
            3,
        ),
        (
            "k4 s2 asymmetric pads",
            vec![ints("strides", &[2, 2]), ints("pads", &[1, 2, 2, 0])],
            4,
        ),
        ("k3 s1 pads 1", vec![ints("pads", &[1, 1, 1, 1])], 3),
        (
            "k2 dilation 2 s2",
            vec![ints("strides", &[2, 2]), ints("dilations", &[2, 2])],
            2,
        ),
    ];
    for (i, (name, attrs, k)) in forms.into_iter().enumerate() {
        let m = graph_model(
            vec![
                with("ConvTranspose", &["x", "wt"], "u", attrs),
                conv("u", "w2", "y"),
            ],
            vec![
                wave_init("wt", &[4, 4, k, k], 1.0),
                wave_init("w2", &[4, 4, 3, 3], 2.0),
            ],
            &[1, 4, 7, 6],
            17,
        );
        eprintln!("{name}");
        split_and_compare(dir.path(), &format!("ct{i}"), &m, 2, [3, 2]);
    }
    for (i, (name, attrs)) in [
        (
            "output_padding",
            vec![ints("strides", &[2, 2]), ints("output_padding", &[1, 1])],
        ),
        ("stride past the kernel", vec![ints("strides", &[3, 3])]),
    ]
    .into_iter()
    .enumerate()
    {
        let m = graph_model(
            vec![with("ConvTranspose", &["x", "wt"], "y", attrs)],
            vec![wave_init("wt", &[4, 4, 2, 2], 1.0)],
            &[1, 4, 7, 6],
            17,
        );
        let path = dir.path().join(format!("ct_refused{i}.onnx"));
        write_model(&m, &path);
        let (_, typed, _) = load_typed(&path, &Default::default()).unwrap();
        let g = &typed.graph;
        assert_eq!(rule_of(g, &g.nodes[0]), None, "{name}");
    }
}

/// A chain whose intermediate is also read after it (a U-Net skip): Conv → Relu (R, also read
/// by the Concat after the chain) → MaxPool 2×2 → Conv → Y[1,4,8,8]; after the chain, Resize
/// nearest ×2 of Y and Concat with R. In 2×2 tiles each tile also writes its part of R:
/// R[1,4,16,16] is cut at the same fractions as Y, rows [0,8) and [8,16). Worked by hand (rows):
/// tile row 0 makes Y [0,4); the last Conv reads M [-1,5) → M [0,5); the pool reads R [0,10),
/// which holds its own part [0,8). Tile row 1: Y [4,8), M [3,8), R [6,16) ⊇ [8,16).
#[test]
fn chain_with_an_intermediate_read_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = graph_model(
        vec![
            conv("x", "w1", "c"),
            node("Relu", &["c"], &["r"]),
            with(
                "MaxPool",
                &["r"],
                "p",
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            conv("p", "w2", "q"),
            with(
                "Resize",
                &["q", "", "sc"],
                "u",
                vec![string("mode", "nearest")],
            ),
            {
                let mut n = node("Concat", &["u", "r"], &["y"]);
                n.attribute = vec![int("axis", 1)];
                n
            },
        ],
        vec![
            wave_init("w1", &[4, 3, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
            float_init("sc", &[4], &[1.0, 1.0, 2.0, 2.0]),
        ],
        &[1, 3, 16, 16],
        17,
    );
    let (chain, t) = split_and_compare(dir.path(), "skip", &m, 4, [2, 2]);
    assert_eq!(chain.extra, vec![1], "R is the other output");
    assert_eq!(chain.last, 3);
    assert_eq!(t.tiles()[0].extra_parts[0][0], Span::new(0, 8));
    assert_eq!(t.tiles()[0].computed[1][0], Span::new(0, 10));
    assert_eq!(t.tiles()[0].computed[2][0], Span::new(0, 5));
    assert_eq!(t.tiles()[3].extra_parts[0][0], Span::new(8, 16));
    assert_eq!(t.tiles()[3].computed[1][0], Span::new(6, 16));
    assert_eq!(t.tiles()[3].computed[2][0], Span::new(3, 8));
}
