//! Row strips that stream: each strip computes every row of every node once and reads the
//! rows above its own from the earlier strips' results, as a line buffer does. Worked by hand
//! on X[1,2,16,16] → Conv 3×3 pad 1 = C1 → Relu = Y1[1,4,16,16] → Conv 3×3 pad 1 = C2 → Relu
//! = Y, cut into 4 row strips:
//!
//! - Y and C2: rows [0,4), [4,8), [8,12), [12,16) (the parts);
//! - recomputing halos, strip t would compute Y1 and C1 rows [4t−1, 4t+5) clipped: 5, 6, 6
//!   and 5 rows, 6 rows (96 positions) more than the 16 of Y1, each 4·2·9 = 72 MACs of C1:
//!   6912 extra MACs;
//! - streamed, strip t computes Y1 and C1 from where strip t−1 stopped to where its receptive
//!   field ends (5, 9, 13, 16): rows [0,5), [5,9), [9,13), [13,16); no MAC is recomputed. C1's
//!   copies read X rows [−1,6), [4,10), [8,14), [12,17) (pads 1 above the first, 1 below the
//!   last);
//! - C2's copy in strip t reads Y1 rows [4t−1, 4t+5) clipped: [0,5) is strip 0's part itself;
//!   [3,9) joins the last two rows of strip 0's part (sliced off right after it is made, so
//!   the part dies with strip 0) to strip 1's part; likewise [7,13) and [11,16).
//!
//! The estimate counts those two rows of Y1 (2 · 16 · 4 channels · 4 bytes = 512) as carried
//! into strips 1 to 3; C1's, C2's and Y's readers start at their own strips' first rows.

mod common;

use common::typed::Typed;
use common::{
    assert_verifies, compare_in_onnxruntime, conv3x3, float_info, model, node, plan_written,
    read_table, rows_of_16_wide, wave_init, writer,
};
use onnx_memplan::onnx::proto::{GraphProto, ModelProto};
use onnx_memplan::split::chain::chain_of;
use onnx_memplan::split::estimate::{Banding, ChainEstimate};
use onnx_memplan::split::region::Span;
use onnx_memplan::split::rewrite::{BandSources, rewrite};
use onnx_memplan::split::tiling::{stream, tile};

/// The chain of the module comment.
fn two_convs() -> ModelProto {
    model(GraphProto {
        name: Some("two_convs".into()),
        node: vec![
            conv3x3("x", "w1", "c1"),
            node("Relu", &["c1"], &["y1"]),
            conv3x3("y1", "w2", "c2"),
            node("Relu", &["c2"], &["y"]),
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

/// The `pads` attribute of the node writing `output`.
fn pads(m: &ModelProto, output: &str) -> Vec<i64> {
    let n = writer(m, output);
    n.attribute
        .iter()
        .find(|a| a.name() == "pads")
        .unwrap()
        .ints
        .clone()
}

#[test]
fn streamed_row_strips_compute_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let original = Typed::write(dir.path(), "two_convs.onnx", &two_convs());
    let (graph, order) = (original.graph(), &original.order);
    let chain = chain_of(graph, order, 17).expect("the four nodes form a chain");

    let recomputing = tile(graph, &chain, [4, 1]).unwrap();
    assert!(!recomputing.streamed);
    assert_eq!(recomputing.extra_macs, 6912);
    assert_eq!(recomputing.halo, [96, 96, 0, 0]);

    let tiling = stream(graph, &chain, 4).unwrap();
    assert!(tiling.streamed);
    assert_eq!(tiling.extra_macs, 0);
    assert_eq!(tiling.halo, [0, 0, 0, 0]);
    let rows = |k: usize| -> Vec<Span> { tiling.each().map(|t| t.computed(k)[0]).collect() };
    let spans =
        |s: &[(i64, i64)]| -> Vec<Span> { s.iter().map(|&(a, b)| Span::new(a, b)).collect() };
    assert_eq!(rows(0), spans(&[(0, 5), (5, 9), (9, 13), (13, 16)]));
    assert_eq!(rows(1), rows(0));
    assert_eq!(rows(2), spans(&[(0, 4), (4, 8), (8, 12), (12, 16)]));
    assert_eq!(rows(3), rows(2));
    let x_reads: Vec<Span> = tiling.each().map(|t| t.read(0, 0).unwrap()[0]).collect();
    assert_eq!(x_reads, spans(&[(-1, 6), (4, 10), (8, 14), (12, 17)]));

    let cut = rewrite(
        &original.proto,
        graph,
        order,
        (&chain, &tiling),
        "split1",
        &BandSources::NONE,
    );
    let m = &cut.model;
    // Pads (top, left, bottom, right) only at the tensor's own borders.
    assert_eq!(pads(m, "c1/split1/t0_0"), [1, 1, 0, 1]);
    assert_eq!(pads(m, "c1/split1/t1_0"), [0, 1, 0, 1]);
    assert_eq!(pads(m, "c1/split1/t3_0"), [0, 1, 1, 1]);
    assert_eq!(pads(m, "c2/split1/t0_0"), [1, 1, 0, 1]);
    assert_eq!(pads(m, "c2/split1/t1_0"), [0, 1, 0, 1]);
    // C2's reads of Y1: strip 0's part, then a tail of the part before joined to the next.
    assert_eq!(writer(m, "c2/split1/t0_0").input[0], "y1/split1/t0_0");
    for (t, tail) in [(1, [3, 5]), (2, [7, 9]), (3, [11, 13])] {
        let joined = writer(m, &writer(m, &format!("c2/split1/t{t}_0")).input[0]);
        assert_eq!(joined.op_type(), "Concat");
        let axis = joined
            .attribute
            .iter()
            .find(|a| a.name() == "axis")
            .unwrap();
        assert_eq!(axis.i, Some(2));
        let before = format!("y1/split1/t{}_0", t - 1);
        let tail_rows = [
            tail[0] - rows(1)[t - 1].start,
            tail[1] - rows(1)[t - 1].start,
        ];
        assert_eq!(
            rows_of_16_wide(m, writer(m, &joined.input[0])),
            (before, tail_rows),
            "strip {t} reads the tail of strip {} (Y1 rows {tail:?})",
            t - 1
        );
        assert_eq!(joined.input[1], format!("y1/split1/t{t}_0"));
    }

    // Planned: strip 0's part of Y1 dies before strip 1's C2 runs (its tail lives on); the
    // table verifies; onnxruntime gives the original's output.
    let (split, table) = plan_written(dir.path(), "two_convs.split", m, &[]);
    let annotated = dir.path().join("two_convs.split.memplan.onnx");
    let t = read_table(&table);
    let step_of = |output: &str| common::step_of(&split, &t, writer(m, output).name());
    let part0 = t
        .tensors
        .iter()
        .find(|e| e.name == "y1/split1/t0_0")
        .unwrap();
    assert!(part0.last < step_of("c2/split1/t1_0"));
    // The estimate carries Y1's two rows into each later strip (the unsplit plan's table).
    let unsplit = dir.path().join("unsplit.onnx");
    assert!(
        common::plan_to(&original.path, &unsplit, &[])
            .status
            .success()
    );
    let table0 = read_table(&dir.path().join("unsplit.memplan.json"));
    let banding = Banding {
        made_by_split: &|_| false,
        progressive: false,
    };
    let estimate = ChainEstimate::new(graph, (&table0, &[0; 4]), &chain, [0, 3], &banding);
    assert_eq!(
        estimate.carried_by_tile(&chain, &tiling),
        [0, 512, 512, 512]
    );
    assert_eq!(estimate.carried_by_tile(&chain, &recomputing), [0; 4]);
    assert_verifies(&split, &table);
    compare_in_onnxruntime(&original.path, &annotated);
}
