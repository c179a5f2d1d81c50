//! A chain reading the output an earlier split assembled reads that split's parts as bands
//! instead, and the Concat assembling them goes. Worked by hand on X[1,2,16,16] → Conv 3×3
//! pad 1 → Relu = Y1[1,4,16,16] → Conv 3×3 pad 1 → Relu → Add(·, Y1) = Y[1,4,16,16]:
//!
//! - split 1 cuts the first two nodes into 2×1 tiles: Y1 rows [0,8) and [8,16), assembled by
//!   a Concat along H;
//! - split 2 cuts the last three into 4×1 tiles of 4 rows. Tile b's Conv reads Y1 rows
//!   [4b−1, 4b+5), clipped: [0,5) (a Slice of band 0), [3,9) (band 0 rows [3,8) joined to
//!   band 1 row [0,1)), [7,13) (band 0 row [7,8) joined to band 1 rows [0,5)), [11,16) (a
//!   Slice of band 1, rows [3,8)); its Add reads Y1 rows [4b, 4b+4): band 0 rows [0,4) and
//!   [4,8), band 1 rows [0,4) and [4,8).
//!
//! Band 0 is last read by tile 2, so it is freed before tile 3 runs: Y1 is never whole.
//!
//! Split in the other order (the second block first, its tiles taking those eight Slices of
//! Y1; then the first block), the first block's output is never assembled: each Slice
//! becomes the same read of its row strips, at the Slice's step.

mod common;

use common::{
    assert_never_whole, assert_verifies, compare_in_onnxruntime, conv3x3, cut_reading_split1,
    float_info, model, node, plan_written, raw_init, read_table, rows_of_16_wide, wave_init,
    write_model, writer, writer_at,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::split::rewrite::Rewritten;
use std::path::{Path, PathBuf};

/// The two blocks of the module comment.
fn two_blocks() -> ModelProto {
    model(GraphProto {
        name: Some("two_blocks".into()),
        node: vec![
            conv3x3("x", "w1", "c1"),
            node("Relu", &["c1"], &["y1"]),
            conv3x3("y1", "w2", "c2"),
            node("Relu", &["c2"], &["r2"]),
            node("Add", &["r2", "y1"], &["y"]),
        ],
        input: vec![float_info("x", &[1, 2, 16, 16])],
        output: vec![float_info("y", &[1, 4, 16, 16])],
        initializer: vec![
            wave_init("w1", &[4, 2, 3, 3], 1.0),
            wave_init("w2", &[4, 4, 3, 3], 2.0),
        ],
        ..Default::default()
    })
}

/// The model of the module comment written to `dir`, with the nodes of chain `a` cut by
/// `grid_a` and then, on the rewritten model, those of chain `b` by `grid_b` (its tiles run
/// `early` or not); chains are named by the outputs of their nodes. Returns the original's
/// path, the first rewrite's Concat or Slices feeding the second, and the second rewrite.
fn split_twice(
    dir: &Path,
    (a, grid_a): (&[&str], [usize; 2]),
    (b, grid_b): (&[&str], [usize; 2]),
    early: bool,
) -> (PathBuf, ModelProto, Rewritten) {
    split_twice_model(dir, &two_blocks(), (a, grid_a), (b, grid_b), early)
}

/// [`split_twice`] on another model of two blocks.
fn split_twice_model(
    dir: &Path,
    blocks: &ModelProto,
    (a, grid_a): (&[&str], [usize; 2]),
    (b, grid_b): (&[&str], [usize; 2]),
    early: bool,
) -> (PathBuf, ModelProto, Rewritten) {
    let original = dir.join("two_blocks.onnx");
    write_model(blocks, &original);
    let once = cut_reading_split1(&original, (a, grid_a), "split1", false);
    assert!(once.dropped.is_empty() && once.unsliced.is_empty());
    let split1 = dir.join("two_blocks.split1.onnx");
    write_model(&once.model, &split1);
    let twice = cut_reading_split1(&split1, (b, grid_b), "split2", early);
    (original, once.model, twice)
}

/// The rows of the bands `bands` that tile `t`'s Conv (`c2` copy `c2/{label}/t{t}_0`) reads:
/// one Slice of a band, or the Concat along H of Slices of both.
fn conv_reads(m: &ModelProto, label: &str, t: usize) -> Vec<(String, [i64; 2])> {
    let input = writer(m, &writer(m, &format!("c2/{label}/t{t}_0")).input[0]);
    if input.op_type() == "Slice" {
        return vec![rows_of_16_wide(m, input)];
    }
    assert_eq!(input.op_type(), "Concat");
    let axis = input.attribute.iter().find(|a| a.name() == "axis").unwrap();
    assert_eq!(axis.i, Some(2));
    input
        .input
        .iter()
        .map(|p| rows_of_16_wide(m, writer(m, p)))
        .collect()
}

/// The rows of the bands that tile `t`'s Add (`y/{label}/t{t}_0`) reads as its residual.
fn residual_reads(m: &ModelProto, label: &str, t: usize) -> (String, [i64; 2]) {
    rows_of_16_wide(
        m,
        writer(m, &writer(m, &format!("y/{label}/t{t}_0")).input[1]),
    )
}

/// The reads of the module comment, with `bands` the first block's two row strips and
/// `label` the second block's split.
fn assert_band_reads(m: &ModelProto, label: &str, bands: &[String]) {
    assert_never_whole(m, "y1");
    let (b0, b1) = (bands[0].clone(), bands[1].clone());
    assert_eq!(conv_reads(m, label, 0), [(b0.clone(), [0, 5])]);
    assert_eq!(
        conv_reads(m, label, 1),
        [(b0.clone(), [3, 8]), (b1.clone(), [0, 1])]
    );
    assert_eq!(
        conv_reads(m, label, 2),
        [(b0.clone(), [7, 8]), (b1.clone(), [0, 5])]
    );
    assert_eq!(conv_reads(m, label, 3), [(b1.clone(), [3, 8])]);
    assert_eq!(residual_reads(m, label, 0), (b0.clone(), [0, 4]));
    assert_eq!(residual_reads(m, label, 1), (b0, [4, 8]));
    assert_eq!(residual_reads(m, label, 2), (b1.clone(), [0, 4]));
    assert_eq!(residual_reads(m, label, 3), (b1, [4, 8]));
}

/// Plans the rewritten model `m`: band 0 is freed before tile 3's Conv runs (`label` the
/// second block's split), the table verifies, and the model gives the original's outputs.
fn assert_plans_with_bands_freed(
    dir: &Path,
    original: &Path,
    m: &ModelProto,
    label: &str,
    bands: &[String],
) {
    let (split, table) = plan_written(dir, "two_blocks.split2", m, &[]);
    let annotated = dir.join("two_blocks.split2.memplan.onnx");
    let t = read_table(&table);
    let entry = |name: &str| t.tensors.iter().find(|e| e.name == name).unwrap();
    let step_of = |node: &str| common::step_of(&split, &t, node);
    let tile3 = step_of(writer(m, &format!("c2/{label}/t3_0")).name());
    assert!(
        entry(&bands[0]).last < tile3,
        "band 0 is freed before tile 3"
    );
    assert!(entry(&bands[1]).last >= tile3);
    assert_verifies(&split, &table);
    compare_in_onnxruntime(original, &annotated);
}

#[test]
fn a_chain_reads_an_earlier_splits_parts_as_bands() {
    let dir = tempfile::tempdir().unwrap();
    let first = (&["c1", "y1"][..], [2, 1]);
    let second = (&["c2", "r2", "y"][..], [4, 1]);
    let (original, once, twice) = split_twice(dir.path(), first, second, false);
    // Split 1 assembled Y1 from its two rows of tiles; split 2 dropped that Concat.
    let assembled = writer(&once, "y1");
    assert_eq!(assembled.op_type(), "Concat");
    let bands = assembled.input.clone();
    assert_eq!(bands.len(), 2);
    assert_eq!(twice.dropped, [assembled.name().to_string()]);
    assert!(twice.unsliced.is_empty());
    assert_band_reads(&twice.model, "split2", &bands);
    assert_plans_with_bands_freed(dir.path(), &original, &twice.model, "split2", &bands);
}

#[test]
fn a_chain_whose_output_an_earlier_split_slices_is_read_as_bands_there() {
    let dir = tempfile::tempdir().unwrap();
    let first = (&["c2", "r2", "y"][..], [4, 1]);
    let second = (&["c1", "y1"][..], [2, 1]);
    let (original, once, twice) = split_twice(dir.path(), first, second, false);
    // Split 1's tiles took eight Slices of Y1 (a Conv's and an Add's per tile); split 2
    // dropped them, and its rows of tiles are the bands.
    let g = once.graph.as_ref().unwrap();
    let slices: Vec<String> = g
        .node
        .iter()
        .filter(|n| n.input.first().is_some_and(|i| i == "y1"))
        .map(|n| {
            assert_eq!(n.op_type(), "Slice");
            n.name().to_string()
        })
        .collect();
    assert_eq!(slices.len(), 8);
    let mut unsliced = twice.unsliced.clone();
    unsliced.sort();
    let mut expected = slices.clone();
    expected.sort();
    assert_eq!(unsliced, expected);
    assert!(twice.dropped.is_empty());
    let bands = vec!["y1/split2/t0_0".to_string(), "y1/split2/t1_0".to_string()];
    for band in &bands {
        writer(&twice.model, band);
    }
    assert_band_reads(&twice.model, "split1", &bands);
    assert_plans_with_bands_freed(dir.path(), &original, &twice.model, "split1", &bands);
}

#[test]
fn tiles_reading_bands_run_as_soon_as_their_bands_are_made() {
    let dir = tempfile::tempdir().unwrap();
    let first = (&["c1", "y1"][..], [2, 1]);
    let second = (&["c2", "r2", "y"][..], [4, 1]);
    let (original, once, twice) = split_twice(dir.path(), first, second, true);
    let bands = writer(&once, "y1").input.clone();
    assert_band_reads(&twice.model, "split2", &bands);
    // Tile 0 of the second block reads band 0 only (rows [0,5) and [0,4)), so it runs right
    // after the first block's tile 0 made band 0, before its tile 1 makes band 1; tiles 1 to 3
    // read band 1 too, so they follow it.
    let at = |output: &str| writer_at(&twice.model, output);
    let (band0, band1) = (at(&bands[0]), at(&bands[1]));
    assert!(band0 < at("y/split2/t0_0") && at("y/split2/t0_0") < at("c1/split1/t1_0"));
    for t in 1..4 {
        assert!(
            at(&format!("c2/split2/t{t}_0")) > band1,
            "tile {t} follows band 1"
        );
    }
    // Planned in that order, the table verifies and onnxruntime agrees.
    let (split, table) = plan_written(dir.path(), "two_blocks.early", &twice.model, &[]);
    assert_verifies(&split, &table);
    let annotated = dir.path().join("two_blocks.early.memplan.onnx");
    compare_in_onnxruntime(&original, &annotated);
}

/// The two blocks with the second Conv's weight dequantized from int8 by a node stored just
/// before that Conv, as a planned QDQ model runs a weight's DequantizeLinear with its unit.
fn two_blocks_with_a_dequantized_weight() -> ModelProto {
    let mut m = two_blocks();
    let g = m.graph.as_mut().unwrap();
    g.initializer.retain(|t| t.name() != "w2");
    let w2: Vec<u8> = (0..4 * 4 * 9).map(|i| ((i * 37) % 181) as u8).collect();
    g.initializer.push(raw_init("w2_q", &[4, 4, 3, 3], 3, w2));
    g.initializer
        .push(raw_init("w2_s", &[], 1, 0.01f32.to_le_bytes().to_vec()));
    g.node
        .insert(2, node("DequantizeLinear", &["w2_q", "w2_s"], &["w2"]));
    m
}

/// Worked by hand as the test above: tile 0 of the second block reads band 0 only, so it runs
/// before the first block's tile 1, though the weight it reads is made by a node stored after
/// that tile. That node reads constants alone: the rewrite runs it first instead of holding
/// the tiles back.
#[test]
fn a_weight_made_from_constants_holds_no_tile_back() {
    let dir = tempfile::tempdir().unwrap();
    let first = (&["c1", "y1"][..], [2, 1]);
    let second = (&["c2", "r2", "y"][..], [4, 1]);
    let blocks = two_blocks_with_a_dequantized_weight();
    let (original, once, twice) = split_twice_model(dir.path(), &blocks, first, second, true);
    let bands = writer(&once, "y1").input.clone();
    let at = |output: &str| writer_at(&twice.model, output);
    assert_eq!(at("w2"), 0, "the weight's DequantizeLinear runs first");
    assert!(at(&bands[0]) < at("y/split2/t0_0") && at("y/split2/t0_0") < at("c1/split1/t1_0"));
    let (split, table) = plan_written(dir.path(), "two_blocks.early", &twice.model, &[]);
    assert_verifies(&split, &table);
    let annotated = dir.path().join("two_blocks.early.memplan.onnx");
    compare_in_onnxruntime(&original, &annotated);
}
