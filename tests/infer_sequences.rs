//! Sequences and optionals: element types, known lengths, splitting and concatenating.

mod infer_support;
use infer_support::*;

#[test]
fn sequence_ops_track_element_types_and_lengths() {
    let proto = G::default()
        .input("a", FLOAT, &["2", "3"])
        .input("b", FLOAT, &["4", "3"])
        .ints("pos", &[], &[0])
        .node("SequenceConstruct", &["a", "b"], &["s"], vec![])
        .node("SequenceLength", &["s"], &["n"], vec![])
        .node("SequenceInsert", &["s", "a"], &["s3"], vec![])
        .node("SequenceLength", &["s3"], &["n3"], vec![])
        .node("SequenceAt", &["s3", "pos"], &["first"], vec![])
        .node(
            "ConcatFromSequence",
            &["s3"],
            &["cat"],
            vec![a_int("axis", 0)],
        )
        .node("SequenceEmpty", &[], &["empty"], vec![])
        .node("SequenceInsert", &["empty", "b"], &["one"], vec![])
        .node(
            "SplitToSequence",
            &["b"],
            &["rows"],
            vec![a_int("axis", 0), a_int("keepdims", 0)],
        )
        .node("Optional", &["a"], &["opt"], vec![])
        .node("OptionalGetElement", &["opt"], &["got"], vec![])
        .node("OptionalHasElement", &["opt"], &["has"], vec![])
        .output("cat")
        .model(18);
    let m = infer(&proto);
    assert_eq!(ty(&m, "s"), "seq(float32 ?×3)");
    assert_eq!(value(&m, "n"), Some(vec![2]));
    assert_eq!(value(&m, "n3"), Some(vec![3]));
    assert_eq!(ty(&m, "first"), "float32 ?×3");
    assert_eq!(ty(&m, "cat"), "float32 ?×3");
    assert_eq!(
        ty(&m, "one"),
        "seq(float32 4×3)",
        "inserting into a known-empty sequence"
    );
    assert_eq!(ty(&m, "rows"), "seq(float32 3)");
    assert_eq!(ty(&m, "opt"), "optional(float32 2×3)");
    assert_eq!(ty(&m, "got"), "float32 2×3");
    assert_eq!(ty(&m, "has"), "bool scalar");
}
