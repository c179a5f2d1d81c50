//! Symbolic inference over ranges on the real models: every size of bert_tiny over a dynamic
//! sequence, and of resnet_small and mobilenet_v2 with their image height and width made
//! symbolic (strided convolutions and pooling), is an expression that, evaluated at a size,
//! equals what inference computes with that size bound (itself checked against onnxruntime
//! by scripts/ort_check.py).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::root;
use onnx_memplan::infer::InferOptions;
use onnx_memplan::ir::{Dim, Model, ValueType};
use onnx_memplan::pipeline::load_typed;

fn options(dims: &[(&str, i64)], ranges: &[(&str, i64, i64)]) -> InferOptions {
    InferOptions {
        dims: dims.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        ranges: ranges
            .iter()
            .map(|&(n, lo, hi)| (n.to_string(), (lo, hi)))
            .collect(),
        ..InferOptions::default()
    }
}

/// The tensor shapes by value name.
fn shapes(model: &Model) -> BTreeMap<String, Vec<Dim>> {
    model
        .graph
        .values
        .iter()
        .filter_map(|v| match &v.ty {
            Some(ValueType::Tensor(t)) => Some((v.name.clone(), t.shape.clone()?)),
            _ => None,
        })
        .collect()
}

/// Checks that every symbolic shape of `path` (typed with `symbolic`) evaluates, at each
/// point, to the shape inferred with the point bound; returns how many dims were
/// expressions (not plain symbols or numbers).
fn check_against_bound(path: &Path, symbolic: &InferOptions, points: &[Vec<(&str, i64)>]) -> usize {
    let (_, model, _) = load_typed(path, symbolic).unwrap();
    let sym = shapes(&model);
    for (name, shape) in &sym {
        assert!(
            shape.iter().all(|d| *d != Dim::Unknown),
            "{}: '{name}' has an unknown dim: {shape:?}",
            path.display()
        );
    }
    for point in points {
        let mut bound = symbolic.clone();
        for &(n, v) in point {
            bound.dims.insert(n.to_string(), v);
        }
        bound.ranges.clear();
        let (_, model, _) = load_typed(path, &bound).unwrap();
        for (name, want) in shapes(&model) {
            let have = &sym[&name];
            let value = |s: &str| point.iter().find(|(n, _)| *n == s).map(|&(_, v)| v);
            let got: Vec<Option<i64>> = have
                .iter()
                .map(|d| d.expr().and_then(|e| e.eval(&value)))
                .collect();
            let want: Vec<Option<i64>> = want.iter().map(Dim::value).collect();
            assert_eq!(got, want, "'{name}' at {point:?}: {have:?}");
        }
    }
    sym.values()
        .flatten()
        .filter(|d| matches!(d, Dim::Expr(_)))
        .count()
}

#[test]
fn bert_tiny_sizes_are_expressions_in_the_sequence() {
    let path = root().join("models/bert_tiny.onnx");
    let symbolic = options(&[("batch", 1)], &[("sequence", 1, 128)]);
    let points: Vec<Vec<(&str, i64)>> = [1, 2, 37, 64, 128]
        .iter()
        .map(|&v| vec![("sequence", v)])
        .collect();
    check_against_bound(&path, &symbolic, &points);
    // Without the range, `sequence ≤ 128` (the position table's length) is not known and the
    // position embedding's slice stays unknown.
    let (_, model, _) = load_typed(&path, &options(&[("batch", 1)], &[])).unwrap();
    let unranged = shapes(&model);
    assert!(unranged.values().flatten().any(|d| *d == Dim::Unknown));
}

#[test]
fn cnn_sizes_are_expressions_in_height_and_width() {
    for (model, lo, hi) in [
        ("resnet_small.onnx", 32, 160),
        ("mobilenet_v2.onnx", 32, 224),
    ] {
        let path = common::symbolic_dims::symbolic_image(&root().join("models").join(model));
        let symbolic = options(&[("batch", 1)], &[("H", lo, hi), ("W", lo, hi)]);
        let points = vec![
            vec![("H", lo), ("W", hi)],
            vec![("H", 77), ("W", 45)],
            vec![("H", hi), ("W", hi)],
        ];
        let exprs = check_against_bound(&path, &symbolic, &points);
        // Strided convolutions make floor quotients, e.g. `(H + 1)//2`.
        assert!(exprs > 10, "{model}: {exprs} expression dims");
    }
}
