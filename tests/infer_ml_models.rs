//! Shape rules of `ai.onnx.ml` classifiers, regressors and transforms (src/infer/ops/ml.rs),
//! with expectations taken from the ONNX-ML operator specs and, where the spec leaves the score
//! width open, from onnxruntime's kernels (checked against onnxruntime 1.32 with one-node
//! models).

mod node_harness;

use node_harness::{FLOAT, INT64, In, STRING, floats, int, ints, map_type, node, string, strings};

const ML: &str = "ai.onnx.ml";

#[test]
fn linear_models() {
    // Y [N] labels, Z [N, E] scores with one class per intercept.
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["batch", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(floats("intercepts", &[0.1; 3]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .expect(&["int64 batch", "float32 batch×3"]);
    // A single intercept with two labels scores both classes; a [C] input is one example.
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(floats("coefficients", &[0.1; 3]))
        .attr(floats("intercepts", &[0.1]))
        .attr(strings("classlabels_strings", &["no", "yes"]))
        .outputs(2)
        .expect(&["string 1", "float32 1×2"]);
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 3]))
        .outputs(2)
        .rejects("classlabels");
    node(ML, "LinearRegressor")
        .inputs(vec![In::T("x", INT64, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(int("targets", 2))
        .expect(&["float32 4×2"]);
}

#[test]
fn support_vector_classifier_without_probabilities_scores_class_pairs() {
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(ints("vectors_per_class", &[1, 1, 1, 1]))
        .attr(floats("support_vectors", &[0.1; 12]))
        .attr(floats("coefficients", &[0.1; 12]))
        .attr(floats("rho", &[0.1; 6]))
        .attr(ints("classlabels_ints", &[0, 1, 2, 3]))
        .outputs(2)
        .expect(&["int64 4", "float32 4×6"]);
}

#[test]
fn support_vector_machines() {
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(floats("rho", &[0.1; 3]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .expect(&["int64 4", "float32 4×3"]);
    node(ML, "SVMRegressor")
        .inputs(vec![In::T("x", FLOAT, &["n", "3"])])
        .attr(floats("coefficients", &[0.1; 3]))
        .expect(&["float32 n×1"]);
}

#[test]
fn tree_ensemble_classifier_with_integer_labels() {
    node(ML, "TreeEnsembleClassifier")
        .inputs(vec![In::T("x", FLOAT, &["n", "3"])])
        .attr(ints("classlabels_int64s", &[0, 1]))
        .outputs(2)
        .expect(&["int64 n", "float32 n×2"]);
    // `classlabels_ints` is not an attribute of this operator (onnxruntime: "Unrecognized
    // attribute"), so it gives no labels.
    node(ML, "TreeEnsembleClassifier")
        .inputs(vec![In::T("x", FLOAT, &["n", "3"])])
        .attr(ints("classlabels_ints", &[0, 1]))
        .outputs(2)
        .rejects("classlabels_int64s");
    // X must be [N, F]: ONNX's shape rule (and so onnxruntime) rejects rank 1.
    node(ML, "TreeEnsembleClassifier")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(strings("classlabels_strings", &["a", "b", "c"]))
        .outputs(2)
        .rejects("rank 1");
}

#[test]
fn support_vector_classifier_score_widths() {
    // onnxruntime 1.32, SVC mode without prob_a: two labels give 2 scores, three give
    // C(C-1)/2 = 3; with prob_a/prob_b one probability per class (4 for 4 labels).
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(ints("vectors_per_class", &[1, 1]))
        .attr(floats("support_vectors", &[0.1; 6]))
        .attr(floats("coefficients", &[0.1; 2]))
        .attr(floats("rho", &[0.1]))
        .attr(ints("classlabels_ints", &[0, 1]))
        .outputs(2)
        .expect(&["int64 4", "float32 4×2"]);
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(ints("vectors_per_class", &[1, 1, 1]))
        .attr(floats("support_vectors", &[0.1; 9]))
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(floats("rho", &[0.1; 3]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .expect(&["int64 1", "float32 1×3"]);
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(ints("vectors_per_class", &[1, 1, 1, 1]))
        .attr(floats("support_vectors", &[0.1; 12]))
        .attr(floats("coefficients", &[0.1; 12]))
        .attr(floats("rho", &[0.1; 6]))
        .attr(floats("prob_a", &[0.1; 6]))
        .attr(floats("prob_b", &[0.1; 6]))
        .attr(strings("classlabels_strings", &["a", "b", "c", "d"]))
        .outputs(2)
        .expect(&["string 4", "float32 4×4"]);
    // The linear mode (no support vectors): one score per class.
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(floats("rho", &[0.1]))
        .attr(ints("classlabels_ints", &[0, 1]))
        .outputs(2)
        .expect(&["int64 4", "float32 4×2"]);
    // onnxruntime: "Input shape must have 1 or 2 dimensions"; and a label list is required.
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["2", "2", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(floats("rho", &[0.1; 3]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .rejects("rank 3");
    node(ML, "SVMClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(floats("rho", &[0.1; 3]))
        .outputs(2)
        .rejects("classlabels_ints");
}

#[test]
fn linear_classifier_scores_one_column_per_intercept() {
    // ONNX-ML's shape rule and onnxruntime: the score width is the number of intercepts (here
    // 2 with 3 labels), 2 for one intercept with two labels.
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(floats("intercepts", &[0.1; 2]))
        .attr(strings("classlabels_strings", &["a", "b", "c"]))
        .outputs(2)
        .expect(&["string 4", "float32 4×2"]);
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 3]))
        .attr(floats("intercepts", &[0.1]))
        .attr(ints("classlabels_ints", &[5, 6]))
        .outputs(2)
        .expect(&["int64 4", "float32 4×2"]);
    // onnxruntime: "intercepts must not be empty"; ONNX: "Input's shape should be 1D or 2D".
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .rejects("intercepts");
    node(ML, "LinearClassifier")
        .inputs(vec![In::T("x", FLOAT, &["2", "2", "3"])])
        .attr(floats("coefficients", &[0.1; 9]))
        .attr(floats("intercepts", &[0.1; 3]))
        .attr(ints("classlabels_ints", &[0, 1, 2]))
        .outputs(2)
        .rejects("rank 3");
}

#[test]
fn invalid_nodes_are_input_errors_naming_the_node() {
    // Each is refused by ONNX's shape rule or by onnxruntime.
    node(ML, "OneHotEncoder")
        .inputs(vec![In::T("x", INT64, &["2", "2"])])
        .rejects("cats_int64s");
    node(ML, "OneHotEncoder")
        .inputs(vec![In::T("x", INT64, &["2", "2"])])
        .attr(ints("cats_int64s", &[1, 2]))
        .attr(strings("cats_strings", &["a"]))
        .rejects("exactly one");
    node(ML, "FeatureVectorizer")
        .inputs(vec![In::T("a", FLOAT, &["n", "2"])])
        .rejects("inputdimensions");
    node(ML, "LinearRegressor")
        .inputs(vec![In::T("x", FLOAT, &["2", "2", "3"])])
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(int("targets", 2))
        .rejects("rank 3");
    node(ML, "SVMRegressor")
        .inputs(vec![In::T("x", FLOAT, &["2", "2", "3"])])
        .attr(floats("coefficients", &[0.1]))
        .rejects("rank 3");
    node(ML, "TreeEnsembleRegressor")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(int("n_targets", 2))
        .rejects("rank 1");
    // ONNX's rule: "ZipMap input shape should be 1D or 2D".
    node(ML, "ZipMap")
        .inputs(vec![In::T("p", FLOAT, &["2", "3", "1"])])
        .attr(ints("classlabels_int64s", &[0, 1, 2]))
        .rejects("rank 3");
    // The messages name the node.
    node(ML, "LinearRegressor")
        .inputs(vec![In::T("x", FLOAT, &["2", "2", "3"])])
        .rejects("(LinearRegressor)");
}

#[test]
fn regressor_widths() {
    // onnxruntime: LinearRegressor on a [C] input gives [1, targets]; SVMRegressor [N, 1];
    // TreeEnsembleRegressor without n_targets has an unknown width in ONNX's shape rule.
    node(ML, "LinearRegressor")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(floats("coefficients", &[0.1; 6]))
        .attr(int("targets", 2))
        .expect(&["float32 1×2"]);
    node(ML, "SVMRegressor")
        .inputs(vec![In::T("x", FLOAT, &["3"])])
        .attr(floats("coefficients", &[0.1]))
        .expect(&["float32 1×1"]);
    node(ML, "TreeEnsembleRegressor")
        .inputs(vec![In::T("x", FLOAT, &["4", "3"])])
        .expect(&["float32 4×?"]);
}

#[test]
fn tree_ensembles() {
    node(ML, "TreeEnsembleClassifier")
        .inputs(vec![In::T("x", FLOAT, &["n", "3"])])
        .attr(strings("classlabels_strings", &["a", "b", "c"]))
        .outputs(2)
        .expect(&["string n", "float32 n×3"]);
    node(ML, "TreeEnsembleRegressor")
        .inputs(vec![In::T("x", FLOAT, &["n", "3"])])
        .attr(int("n_targets", 2))
        .expect(&["float32 n×2"]);
}

#[test]
fn feature_transforms() {
    // One more axis of the category count.
    node(ML, "OneHotEncoder")
        .inputs(vec![In::T("x", INT64, &["2", "2"])])
        .attr(ints("cats_int64s", &[1, 2, 3, 4, 5]))
        .expect(&["float32 2×2×5"]);
    node(ML, "Imputer")
        .inputs(vec![In::T("x", INT64, &["2", "3"])])
        .expect(&["int64 2×3"]);
    node(ML, "CategoryMapper")
        .inputs(vec![In::T("x", STRING, &["2", "3"])])
        .expect(&["int64 2×3"]);
    node(ML, "CategoryMapper")
        .inputs(vec![In::T("x", INT64, &["3"])])
        .expect(&["string 3"]);
    node(ML, "FeatureVectorizer")
        .inputs(vec![
            In::T("a", FLOAT, &["n", "2"]),
            In::T("b", FLOAT, &["n", "5"]),
        ])
        .attr(ints("inputdimensions", &[2, 3]))
        .expect(&["float32 n×5"]);
}

#[test]
fn maps_in_and_out() {
    // DictVectorizer: [1, vocabulary] of the map's value type.
    node(ML, "DictVectorizer")
        .inputs(vec![In::Typed("m", map_type(STRING, FLOAT))])
        .attr(strings("string_vocabulary", &["a", "b", "c", "d"]))
        .expect(&["float32 1×4"]);
    node(ML, "CastMap")
        .inputs(vec![In::Typed("m", map_type(INT64, FLOAT))])
        .attr(string("map_form", "SPARSE"))
        .attr(int("max_map", 7))
        .expect(&["float32 1×7"]);
    node(ML, "ZipMap")
        .inputs(vec![In::T("p", FLOAT, &["n", "3"])])
        .attr(ints("classlabels_int64s", &[0, 1, 2]))
        .expect(&["seq(map(int64, float32 scalar))"]);
}
