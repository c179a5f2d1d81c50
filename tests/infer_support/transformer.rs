//! A large transformer-encoder-shaped graph for inference scale tests and benchmarks.

use super::*;

/// One encoder layer: attention with the exporter's shape-computation chain, then an MLP.
fn encoder_layer(mut g: G, l: usize, x: &str) -> (G, String) {
    let n = |s: &str| format!("l{l}_{s}");
    let ln = |g: G, inp: &str, out: &str| {
        g.node(
            "LayerNormalization",
            &[inp, "gamma", "beta"],
            &[out],
            vec![a_int("axis", -1)],
        )
    };
    g = ln(g, x, &n("ln1"));
    g = g
        .node("MatMul", &[&n("ln1"), "w_qkv"], &[&n("qkv")], vec![])
        .node("Add", &[&n("qkv"), "b_qkv"], &[&n("qkvb")], vec![])
        .node(
            "Split",
            &[&n("qkvb")],
            &[&n("q"), &n("k"), &n("v")],
            vec![a_int("axis", -1), a_int("num_outputs", 3)],
        );
    for h in ["q", "k", "v"] {
        g = g
            .node("Shape", &[&n(h)], &[&n(&format!("{h}_shape"))], vec![])
            .node(
                "Gather",
                &[&n(&format!("{h}_shape")), "i0"],
                &[&n(&format!("{h}_b"))],
                vec![],
            )
            .node(
                "Gather",
                &[&n(&format!("{h}_shape")), "i1"],
                &[&n(&format!("{h}_s"))],
                vec![],
            )
            .node(
                "Unsqueeze",
                &[&n(&format!("{h}_b")), "axes0"],
                &[&n(&format!("{h}_b1"))],
                vec![],
            )
            .node(
                "Unsqueeze",
                &[&n(&format!("{h}_s")), "axes0"],
                &[&n(&format!("{h}_s1"))],
                vec![],
            )
            .node(
                "Concat",
                &[&n(&format!("{h}_b1")), &n(&format!("{h}_s1")), "heads"],
                &[&n(&format!("{h}_target"))],
                vec![a_int("axis", 0)],
            )
            .node(
                "Reshape",
                &[&n(h), &n(&format!("{h}_target"))],
                &[&n(&format!("{h}_r"))],
                vec![],
            )
            .node(
                "Transpose",
                &[&n(&format!("{h}_r"))],
                &[&n(&format!("{h}_t"))],
                vec![a_ints("perm", &[0, 2, 1, 3])],
            );
    }
    g = g
        .node(
            "Transpose",
            &[&n("k_t")],
            &[&n("kT")],
            vec![a_ints("perm", &[0, 1, 3, 2])],
        )
        .node("MatMul", &[&n("q_t"), &n("kT")], &[&n("scores")], vec![])
        .node("Div", &[&n("scores"), "scale"], &[&n("scaled")], vec![])
        .node(
            "Softmax",
            &[&n("scaled")],
            &[&n("attn")],
            vec![a_int("axis", -1)],
        )
        .node("MatMul", &[&n("attn"), &n("v_t")], &[&n("ctx")], vec![])
        .node(
            "Transpose",
            &[&n("ctx")],
            &[&n("ctx_t")],
            vec![a_ints("perm", &[0, 2, 1, 3])],
        )
        .node(
            "Reshape",
            &[&n("ctx_t"), "hidden_shape"],
            &[&n("merged")],
            vec![],
        )
        .node("MatMul", &[&n("merged"), "w_o"], &[&n("proj")], vec![])
        .node("Add", &[x, &n("proj")], &[&n("res1")], vec![]);
    g = ln(g, &n("res1"), &n("ln2"));
    g = g
        .node("MatMul", &[&n("ln2"), "w_up"], &[&n("up")], vec![])
        .node("Gelu", &[&n("up")], &[&n("act")], vec![])
        .node("MatMul", &[&n("act"), "w_down"], &[&n("down")], vec![])
        .node("Add", &[&n("res1"), &n("down")], &[&n("out")], vec![]);
    (g, n("out"))
}

/// A transformer-encoder-shaped model of at least `min_nodes` nodes (layers of attention with
/// the exporter's Shape→Gather→Unsqueeze→Concat→Reshape chains, then an MLP) over a
/// `batch×128×256` input; returns the model, its node count and the output tensor's name.
pub fn encoder_model(min_nodes: usize) -> (ModelProto, usize, String) {
    let mut g = G::default()
        .input("x", FLOAT, &["batch", "128", "256"])
        .input("gamma", FLOAT, &["256"])
        .input("beta", FLOAT, &["256"])
        .input("w_qkv", FLOAT, &["256", "768"])
        .input("b_qkv", FLOAT, &["768"])
        .input("w_o", FLOAT, &["256", "256"])
        .input("w_up", FLOAT, &["256", "1024"])
        .input("w_down", FLOAT, &["1024", "256"])
        .input("scale", FLOAT, &[])
        .ints("i0", &[], &[0])
        .ints("i1", &[], &[1])
        .ints("axes0", &[1], &[0])
        .ints("heads", &[2], &[4, 64])
        .ints("hidden_shape", &[3], &[0, 0, 256]);
    let mut x = "x".to_string();
    let mut l = 0;
    while g.graph.node.len() < min_nodes {
        (g, x) = encoder_layer(g, l, &x);
        l += 1;
    }
    let nodes = g.graph.node.len();
    let proto = g.output(&x).model(18);
    (proto, nodes, x)
}
