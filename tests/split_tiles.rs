//! The split stage on a hand-worked chain: X[1,2,16,16] → Conv 3×3 stride 2 pad 1 → Relu →
//! Conv 3×3 pad 1 → Add(·, Relu) → Conv 3×3 pad 1 → Y[1,4,8,8], cut into 2×2 tiles of Y.
//!
//! Worked by hand (rows; columns are the same): tile row 0 makes Y rows [0,4). The last Conv
//! reads Add rows [-1,5): one row of padding, Add computes [0,5). The middle Conv reads Relu
//! rows [-1,6), so Relu computes [0,6) (the Add's own need [0,5) is inside), and the first Conv
//! reads X rows [0·2−1, 5·2−1+3) = [-1,12). Tile row 1 makes Y rows [4,8): Add [3,8) with one
//! row of end padding, Relu [2,8), and the Add then reads a Slice [3,8) of it; X rows [3,16),
//! no end padding (the original's last window ends at row 15). Halo: the first Conv computes
//! 4 tiles × 6×6 = 144 positions instead of 64 (80 more, 4·2·9 = 72 MACs each: 5760); the
//! middle Conv 4 × 5×5 = 100 instead of 64 (36 more, 4·4·9 = 144 MACs each: 5184); the last
//! Conv none. Extra MACs: 10944.
//!
//! The rewritten model is then run in onnxruntime against the original, element by element
//! (through the venv `scripts/ort_check.sh` creates, `.ci/venv`, or `MEMPLAN_PYTHON`; the test
//! says so and skips that part when neither has onnxruntime).

mod common;

use common::typed::Typed;
use common::{compare_in_onnxruntime, float_info, float_init, model, node, wave_init, write_model};
use onnx_memplan::onnx::proto::{AttributeProto, GraphProto, ModelProto, attribute_proto};
use onnx_memplan::pipeline::load_typed;
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::region::Span;
use onnx_memplan::split::tiling::tile;

fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

fn conv(
    input: &str,
    weight: &str,
    output: &str,
    stride: i64,
) -> onnx_memplan::onnx::proto::NodeProto {
    let mut n = node("Conv", &[input, weight], &[output]);
    n.attribute = vec![
        ints("kernel_shape", &[3, 3]),
        ints("pads", &[1, 1, 1, 1]),
        ints("strides", &[stride, stride]),
    ];
    n
}

fn residual_chain() -> ModelProto {
    model(GraphProto {
        name: Some("residual_chain".into()),
        node: vec![
            conv("x", "w1", "c1", 2),
            node("Relu", &["c1"], &["r1"]),
            conv("r1", "w2", "c2", 1),
            node("Add", &["c2", "r1"], &["a"]),
            conv("a", "w3", "y", 1),
        ],
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![float_info("y", &[1, 4, 8, 8])],
        initializer: vec![
            wave_init("w1", &[4, 2, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
            wave_init("w3", &[4, 4, 3, 3], 3.0),
        ],
        ..Default::default()
    })
}

/// A wider variant whose peak (two 32-channel 32×32 maps) the split can lower: X[1,3,64,64]
/// → Conv s2 → Relu → Conv → Add → Conv s2 → Y[1,8,16,16].
fn wide_chain() -> ModelProto {
    model(GraphProto {
        name: Some("wide_chain".into()),
        node: vec![
            conv("x", "w1", "c1", 2),
            node("Relu", &["c1"], &["r1"]),
            conv("r1", "w2", "c2", 1),
            node("Add", &["c2", "r1"], &["a"]),
            conv("a", "w3", "y", 2),
        ],
        input: vec![float_info("x", &[1, 3, 64, 64])],
        output: vec![float_info("y", &[1, 8, 16, 16])],
        initializer: vec![
            wave_init("w1", &[32, 3, 3, 3], 1.0),
            wave_init("w2", &[32, 32, 3, 3], 2.0),
            wave_init("w3", &[8, 32, 3, 3], 3.0),
        ],
        ..Default::default()
    })
}

#[test]
fn two_by_two_tiles_of_a_strided_residual_chain() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "residual_chain.onnx", &residual_chain());
    let (graph, order) = (original.graph(), &original.order);
    let chain = chain_of(graph, order, 17).expect("the five nodes form a chain");
    assert_eq!(graph.values[chain.output].name, "y");
    let tiling = tile(graph, &chain, [2, 2]).unwrap();

    let rows = |t: usize, k: usize| tiling.tiles()[t].computed[k][0];
    // Tile (0, 0): Conv1/Relu rows [0,6), Conv2/Add [0,5), Conv3 [0,4).
    assert_eq!(rows(0, 0), Span::new(0, 6));
    assert_eq!(rows(0, 1), Span::new(0, 6));
    assert_eq!(rows(0, 2), Span::new(0, 5));
    assert_eq!(rows(0, 3), Span::new(0, 5));
    assert_eq!(rows(0, 4), Span::new(0, 4));
    // Tile (1, 1): Conv1/Relu rows [2,8), Add [3,8), Conv3 [4,8).
    assert_eq!(rows(3, 0), Span::new(2, 8));
    assert_eq!(rows(3, 3), Span::new(3, 8));
    assert_eq!(rows(3, 4), Span::new(4, 8));
    // X rows read by the first Conv: [-1,12) and [3,16).
    assert_eq!(tiling.tiles()[0].reads[0][0].unwrap()[0], Span::new(-1, 12));
    assert_eq!(tiling.tiles()[3].reads[0][0].unwrap()[0], Span::new(3, 16));
    assert_eq!(tiling.halo, vec![80, 80, 36, 36, 0]);
    assert_eq!(tiling.extra_macs, 5760 + 5184);

    let rewritten = common::rewrite_alone(&original.proto, graph, order, (&chain, &tiling));
    assert!(rewritten.parts[0].copies.iter().all(|c| c.len() == 4));
    let split = dir.path().join("residual_chain.split.onnx");
    write_model(&rewritten.model, &split);
    // The rewritten model plans and verifies like any other.
    common::plans_and_matches(dir.path(), &original.path, &split);
}

/// Cut signatures: a chain signs alike in two loads of one model (its node parts numbered
/// once by the memo), so the second load's cut is the first's; the same operators on a wider
/// input, or the chain's first four nodes alone, sign otherwise.
#[test]
fn alike_chains_share_a_cut_signature_and_others_do_not() {
    use onnx_memplan::split::cuts::{Cuts, NodeKeys};
    let dir = tempfile::tempdir().unwrap();
    let load = |name: &str, proto: &ModelProto| {
        let path = dir.path().join(name);
        write_model(proto, &path);
        load_typed(&path, &Default::default()).unwrap().1
    };
    let (first, again, wide) = (
        load("a.onnx", &residual_chain()),
        load("b.onnx", &residual_chain()),
        load("c.onnx", &wide_chain()),
    );
    let cuts = Cuts::default();
    let signed = |typed: &onnx_memplan::ir::Model, nodes: usize| {
        let order: Vec<usize> = (0..nodes).collect();
        let chain = chain_of(&typed.graph, &order, 17).unwrap();
        Cuts::signature(&NodeKeys::new(&typed.graph, &cuts), &chain)
    };
    assert!(signed(&first, 5) == signed(&again, 5));
    assert!(signed(&first, 5) != signed(&wide, 5));
    assert!(signed(&first, 4) != signed(&first, 5));
    assert!(signed(&first, 4) == signed(&again, 4));
}

/// `plan --split auto` on a wider chain: the table's `model` is the annotated (rewritten)
/// model, which `verify` accepts as it is; `source` names the input file.
#[test]
fn split_auto_table_describes_the_annotated_model() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "wide_chain",
        &wide_chain(),
        &["--split", "auto", "--split-overhead", "50"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().expect("a splits section");
    assert_eq!(splits.source.file, "wide_chain.onnx");
    assert_eq!(splits.chains.len(), 1, "{splits:?}");
    assert!(splits.arena_after < splits.arena_before, "{splits:?}");
    assert!(splits.extra_macs * 2 <= splits.total_macs, "{splits:?}");
    let annotated = dir.path().join("wide_chain.memplan.onnx");
    assert_eq!(t.model.file, "wide_chain.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    // The input model is not what the table describes any more.
    let wrong = common::run_cli(&["verify", path.to_str().unwrap(), table.to_str().unwrap()]);
    assert_eq!(wrong.status.code(), Some(2));
    compare_in_onnxruntime(&path, &annotated);
}

/// Budget mode splits a step that alone exceeds the budget instead of refusing: the wide
/// chain's peak step (the middle Conv reads and writes two 32×32×32 float maps, 262144 bytes)
/// cannot fit half of it unsplit; split, it can. A budget below even small tiles is refused
/// with the node named.
#[test]
fn budget_splits_a_step_that_alone_exceeds_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide_chain.onnx");
    write_model(&wide_chain(), &path);
    let out = dir.path().join("out.onnx");
    let (p, o) = (path.to_str().unwrap(), out.to_str().unwrap());
    let refused = common::run_cli(&["plan", p, "-o", o, "--budget", "131072", "--split", "off"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("reads and writes 262144 bytes"));

    let fits = common::run_cli(&["plan", p, "-o", o, "--budget", "131072"]);
    assert!(
        fits.status.success(),
        "{}",
        String::from_utf8_lossy(&fits.stderr)
    );
    let t = common::read_table(&dir.path().join("out.memplan.json"));
    assert!(!t.splits.as_ref().unwrap().chains.is_empty());
    assert_eq!(t.offload.as_ref().unwrap().budget, 131072);
    common::assert_verifies(
        std::path::Path::new(o),
        &dir.path().join("out.memplan.json"),
    );

    let tiny = common::run_cli(&["plan", p, "-o", o, "--budget", "4096"]);
    assert_eq!(tiny.status.code(), Some(2));
    let said = String::from_utf8_lossy(&tiny.stderr);
    assert!(
        said.contains("node '") && said.contains("after splitting"),
        "{said}"
    );
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

/// One operator form under test: its node (reading `x`, 4 channels, writing `v`) and weights.
struct Form {
    name: &'static str,
    node: onnx_memplan::onnx::proto::NodeProto,
    inits: Vec<onnx_memplan::onnx::proto::TensorProto>,
}

fn forms() -> Vec<Form> {
    let with = |op: &str, inputs: &[&str], attrs: Vec<AttributeProto>| {
        let mut n = node(op, inputs, &["v"]);
        n.attribute = attrs;
        n
    };
    let w = |c_in: i64, k: i64| vec![wave_init("wf", &[4, c_in, k, k], 5.0)];
    vec![
        Form {
            name: "depthwise SAME_UPPER stride 2",
            node: with(
                "Conv",
                &["x", "wf"],
                vec![
                    int("group", 4),
                    string("auto_pad", "SAME_UPPER"),
                    ints("strides", &[2, 2]),
                ],
            ),
            inits: w(1, 3),
        },
        Form {
            name: "grouped SAME_LOWER",
            node: with(
                "Conv",
                &["x", "wf"],
                vec![int("group", 2), string("auto_pad", "SAME_LOWER")],
            ),
            inits: w(2, 4),
        },
        Form {
            name: "dilated 2, asymmetric pads, bias",
            node: with(
                "Conv",
                &["x", "wf", "bf"],
                vec![ints("dilations", &[2, 2]), ints("pads", &[2, 1, 0, 3])],
            ),
            inits: vec![
                wave_init("wf", &[4, 4, 3, 3], 6.0),
                wave_init("bf", &[4], 7.0),
            ],
        },
        Form {
            name: "VALID stride 2 kernel 2",
            node: with(
                "Conv",
                &["x", "wf"],
                vec![string("auto_pad", "VALID"), ints("strides", &[2, 2])],
            ),
            inits: w(4, 2),
        },
        Form {
            name: "MaxPool 3x3 stride 2 ceil_mode",
            node: with(
                "MaxPool",
                &["x"],
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("strides", &[2, 2]),
                    int("ceil_mode", 1),
                ],
            ),
            inits: Vec::new(),
        },
        Form {
            name: "AveragePool count_include_pad",
            node: with(
                "AveragePool",
                &["x"],
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("pads", &[1, 1, 1, 1]),
                    int("count_include_pad", 1),
                ],
            ),
            inits: Vec::new(),
        },
        Form {
            name: "AveragePool excluding pads, stride 2",
            node: with(
                "AveragePool",
                &["x"],
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("pads", &[1, 0, 1, 2]),
                    ints("strides", &[2, 2]),
                ],
            ),
            inits: Vec::new(),
        },
        Form {
            name: "BatchNormalization",
            node: with(
                "BatchNormalization",
                &["x", "bn_s", "bn_b", "bn_m", "bn_v"],
                Vec::new(),
            ),
            inits: vec![
                wave_init("bn_s", &[4], 1.0),
                wave_init("bn_b", &[4], 2.0),
                wave_init("bn_m", &[4], 3.0),
                float_init("bn_v", &[4], &[0.5, 1.0, 1.5, 2.0]),
            ],
        },
    ]
}

/// Every Conv and pool form the rule table accepts, followed by Relu, a channel Concat with
/// it, a per-channel Mul and a 3×3 Conv, cut into a 3×2 grid: onnxruntime must agree with the
/// unsplit model element by element (and onnx.checker accept the rewrite).
#[test]
fn every_window_form_tiles_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (i, form) in forms().into_iter().enumerate() {
        let mut inits = form.inits;
        inits.push(wave_init("wl", &[4, 8, 3, 3], 9.0));
        inits.push(wave_init("scale", &[8, 1, 1], 4.0));
        let mut last = conv("m", "wl", "y", 1);
        last.name = Some("last".into());
        let graph = GraphProto {
            name: Some("form".into()),
            node: vec![
                form.node,
                node("Relu", &["v"], &["r"]),
                {
                    let mut n = node("Concat", &["v", "r"], &["c"]);
                    n.attribute = vec![int("axis", 1)];
                    n
                },
                node("Mul", &["c", "scale"], &["m"]),
                last,
            ],
            input: vec![float_info("x", &[1, 4, 13, 11])],
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
        };
        let path = dir.path().join(format!("form{i}.onnx"));
        write_model(&model(graph), &path);
        let (mut proto, typed, _) = load_typed(&path, &Default::default()).unwrap();
        let g = &typed.graph;
        // The output's shape depends on the form: write the inferred one into both models.
        proto.graph.as_mut().unwrap().output[0].r#type =
            Some(g.value("y").unwrap().ty.as_ref().unwrap().to_proto());
        write_model(&proto, &path);
        let order: Vec<usize> = (0..g.nodes.len()).collect();
        let chain = chain_of(g, &order, 17).unwrap_or_else(|| panic!("{}: not a chain", form.name));
        let tiling =
            tile(g, &chain, [3, 2]).unwrap_or_else(|| panic!("{}: no 3×2 grid", form.name));
        let rewritten = common::rewrite_alone(&proto, g, &order, (&chain, &tiling));
        let split = dir.path().join(format!("form{i}.split.onnx"));
        {
            use prost::Message;
            std::fs::write(&split, rewritten.model.encode_to_vec()).unwrap();
        }
        eprintln!("{}:", form.name);
        compare_in_onnxruntime(&path, &split);
    }
}

/// A chain whose output outweighs its intermediates: X[1,4,32,32] → Conv 3×3 pad 1 (16
/// channels) → Relu → Conv 3×3 pad 1 (64 channels) → Y[1,64,32,32] (256 KiB) →
/// GlobalAveragePool → Z. Unsplit, the last Conv holds the Relu's 64 KiB and Y's 256 KiB
/// (320 KiB). Split with a plain Concat, the tiles' results (256 KiB in all) and Y coexist at
/// the Concat (512 KiB): no gain. Only with the tiles written into Y in place does the split
/// pay: Y plus X (16 KiB) plus one tile's Relu.
fn expanding_chain() -> ModelProto {
    model(GraphProto {
        name: Some("expanding_chain".into()),
        node: vec![
            conv("x", "w1", "c1", 1),
            node("Relu", &["c1"], &["r1"]),
            conv("r1", "w2", "y", 1),
            node("GlobalAveragePool", &["y"], &["z"]),
        ],
        input: vec![float_info("x", &[1, 4, 32, 32])],
        output: vec![float_info("z", &[1, 64, 1, 1])],
        initializer: vec![
            wave_init("w1", &[16, 4, 3, 3], 1.0),
            wave_init("w2", &[64, 16, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

/// The tiles' results land in the chain's output as strided views. Worked by hand: Y is
/// [1,64,32,32] float32, row-major strides 64·32·32·4 = 262144, 32·32·4 = 4096, 32·4 = 128
/// and 4 bytes. A tile making rows [h0,h1) and columns [w0,w1) of Y is a view with Y's
/// strides starting h0·128 + w0·4 bytes into Y: directly when the grid has one row or one
/// column of tiles, else w0·4 bytes into its row strip (itself a view of Y starting h0·128
/// bytes in). The Concats then move nothing, so the arena falls below the unsplit 320 KiB
/// (see [`expanding_chain`]); the table verifies against the annotated model, which gives the
/// original's output in onnxruntime.
#[test]
fn split_tiles_are_strided_views_of_the_chain_output() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = common::plan_written(
        dir.path(),
        "expanding_chain",
        &expanding_chain(),
        &["--split", "auto", "--split-overhead", "50"],
    );
    let t = common::read_table(&table);
    let splits = t.splits.as_ref().unwrap();
    assert!(splits.arena_after < 320 * 1024, "{splits:?}");
    let chain = &splits.chains[0];
    assert_eq!(chain.output, "y");
    let [rows, cols] = chain.grid;
    assert!(rows * cols > 1, "{chain:?}");
    let entry = |name: &str| {
        t.tensors
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no entry '{name}'"))
    };
    let y = entry("y");
    let y_strides = vec![262144, 4096, 128, 4];
    for (k, region) in chain.tiles.iter().enumerate() {
        let [[h0, _], [w0, _]] = *region;
        let (r, c) = (k / cols, k % cols);
        let tile = entry(&format!("y/split1/t{r}_{c}"));
        assert_eq!(tile.strides.as_ref(), Some(&y_strides), "{tile:?}");
        let start = (h0 * 128 + w0 * 4) as u64;
        assert_eq!(tile.offset, Some(y.offset.unwrap() + start), "{tile:?}");
        if rows > 1 && cols > 1 {
            let strip = entry(&format!("y/split1/row{r}"));
            assert_eq!(tile.alias_of.as_deref(), Some(strip.name.as_str()));
            assert_eq!(tile.alias_offset, Some(w0 as u64 * 4));
            assert_eq!(strip.alias_of.as_deref(), Some("y"));
            assert_eq!(strip.alias_offset, Some(h0 as u64 * 128));
            assert_eq!(strip.strides.as_ref(), Some(&y_strides));
        } else {
            assert_eq!(tile.alias_of.as_deref(), Some("y"));
            assert_eq!(tile.alias_offset, Some(start));
        }
    }
    let annotated = dir.path().join("expanding_chain.memplan.onnx");
    common::assert_verifies(&annotated, &table);
    compare_in_onnxruntime(&path, &annotated);
}

/// The verifier's checks of strided views, each on a hand-made bad copy of the table of
/// [`split_tiles_are_strided_views_of_the_chain_output`]: a tile moved onto its neighbour (two
/// views of one strip sharing elements), a tile whose W stride is doubled so it reaches past
/// its strip, a tile claiming its own row-major layout inside the strip, and the model input
/// (live while the tiles are made) moved onto the first tile's elements.
#[test]
fn verify_refuses_bad_strided_views() {
    let dir = tempfile::tempdir().unwrap();
    let (_, table) = common::plan_written(
        dir.path(),
        "expanding_chain",
        &expanding_chain(),
        &["--split", "auto", "--split-overhead", "50"],
    );
    let annotated = dir.path().join("expanding_chain.memplan.onnx");
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let chain = &good["splits"]["chains"][0];
    assert!(
        chain["grid"][0].as_u64().unwrap() > 1 && chain["grid"][1].as_u64().unwrap() > 1,
        "a grid of several rows and columns: {chain}"
    );
    let position = |name: &str| {
        good["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .position(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no entry '{name}'"))
    };
    let refuse = |edit: &dyn Fn(&mut serde_json::Value), needle: &str| {
        let mut bad = good.clone();
        edit(&mut bad["tensors"]);
        let path = dir.path().join("bad.memplan.json");
        std::fs::write(&path, serde_json::to_string(&bad).unwrap()).unwrap();
        common::assert_verify_refuses(&annotated, &path, needle);
    };
    let (t00, t01) = (position("y/split1/t0_0"), position("y/split1/t0_1"));
    refuse(
        &|t| {
            t[t01]["offset"] = t[t00]["offset"].clone();
            t[t01]["alias_offset"] = t[t00]["alias_offset"].clone();
        },
        "views 'y/split1/t0_0' and 'y/split1/t0_1' of one tensor are both live",
    );
    // The strip's last tile: doubling its W stride takes its last column past the strip's.
    let cols = chain["grid"][1].as_u64().unwrap();
    let last = position(&format!("y/split1/t0_{}", cols - 1));
    refuse(
        &|t| t[last]["strides"][3] = serde_json::json!(8),
        "the view reaches past its parent",
    );
    refuse(
        &|t| t[t00]["strides"] = serde_json::json!([65536, 1024, 64, 4]),
        "are not the parent's",
    );
    // The input is scattered into bands (docs/format.md, "Scattered inputs"): the first is
    // read by the first row of tiles, while their results are written.
    let band = position("x/split1/band0");
    refuse(
        &|t| t[band]["offset"] = t[t00]["offset"].clone(),
        "tensors 'x/split1/band0' and 'y/split1/t0_0' are both live",
    );
}

/// X[1,2,12,12] → Conv 3×3 pad 1 (8 channels) → Slice of channels [2,6) along `axis` → Conv
/// 3×3 pad 1 → Y[1,4,12,12] (`axis` 1), or a Slice of rows [2,6) along H (`axis` 2).
fn sliced_chain(axis: i64) -> ModelProto {
    let mut first = conv("x", "w1", "c1", 1);
    first.name = Some("first".into());
    model(GraphProto {
        name: Some("sliced_chain".into()),
        node: vec![
            first,
            node("Slice", &["c1", "starts", "ends", "axes"], &["s"]),
            conv("s", "w2", "y", 1),
        ],
        input: vec![float_info("x", &[1, 2, 12, 12])],
        output: vec![float_info(
            "y",
            if axis == 1 {
                &[1, 4, 12, 12]
            } else {
                &[1, 4, 4, 12]
            },
        )],
        initializer: vec![
            wave_init("w1", &[8, 2, 3, 3], 1.0),
            wave_init("w2", &[4, if axis == 1 { 4 } else { 8 }, 3, 3], 2.0),
            common::int_init("starts", &[1], &[2]),
            common::int_init("ends", &[1], &[6]),
            common::int_init("axes", &[1], &[axis]),
        ],
        ..Default::default()
    })
}

/// A Slice along channels keeps every position, so it joins a chain like an elementwise node
/// (worked by hand for tile (0, 0) of 2×2: Y rows and columns [0,6) read Slice [-1,7), which
/// the Slice computes clipped, [0,7), from the same positions of the first Conv); each tile
/// copy slices the same channels. A Slice along H moves positions and ends the chain.
#[test]
fn a_channel_slice_joins_a_chain_and_a_row_slice_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sliced_chain.onnx");
    write_model(&sliced_chain(1), &path);
    let (proto, typed, _) = load_typed(&path, &Default::default()).unwrap();
    let g = &typed.graph;
    let order: Vec<usize> = (0..g.nodes.len()).collect();
    let chain = chain_of(g, &order, 17).expect("Conv, channel Slice and Conv form a chain");
    let tiling = tile(g, &chain, [2, 2]).unwrap();
    let tiles = tiling.tiles();
    let first = &tiles[0];
    assert_eq!(first.computed[1], [Span::new(0, 7), Span::new(0, 7)]);
    assert_eq!(first.computed[0], first.computed[1]);
    assert_eq!(first.reads[1][0], Some(first.computed[1]));
    let rewritten = common::rewrite_alone(&proto, g, &order, (&chain, &tiling));
    let nodes = &rewritten.model.graph.as_ref().unwrap().node;
    let slices: Vec<_> = nodes
        .iter()
        .filter(|n| n.op_type() == "Slice" && n.input[0].starts_with("c1/"))
        .collect();
    assert_eq!(slices.len(), 4, "one channel Slice per tile");
    for s in &slices {
        assert_eq!(s.input[1..], ["starts", "ends", "axes"]);
    }
    let split = dir.path().join("sliced_chain.split.onnx");
    write_model(&rewritten.model, &split);
    common::plans_and_matches(dir.path(), &path, &split);

    let rows = dir.path().join("row_sliced_chain.onnx");
    write_model(&sliced_chain(2), &rows);
    let (_, typed, _) = load_typed(&rows, &Default::default()).unwrap();
    let order: Vec<usize> = (0..typed.graph.nodes.len()).collect();
    assert!(chain_of(&typed.graph, &order, 17).is_none());
    assert!(chain_of(&typed.graph, &order[..1], 17).is_some());
}
