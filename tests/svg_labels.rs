//! `--svg` on models/mobilenet_v2.onnx: no two tensor labels overlap (boxes by the renderer's
//! own estimate: `LABEL_CHAR_W` a character, `LABEL_ASCENT` above and `LABEL_DESCENT` below
//! the baseline), each label is the tensor's name or a shortening of it whose full name is in
//! a hover title, and the title's tensor count is the summary's.

mod common;

use common::{root, run_cli};
use onnx_memplan::emit::svg::{LABEL_ASCENT, LABEL_CHAR_W, LABEL_DESCENT};

/// The text of `xml` between `open` and the next `close`, from `from` on.
fn between<'a>(xml: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    xml.split(open)
        .skip(1)
        .filter_map(|rest| rest.split(close).next())
        .collect()
}

/// The value of attribute `name` in a start tag's text.
fn attr(tag: &str, name: &str) -> f64 {
    let key = format!("{name}=\"");
    let start = tag.find(&key).unwrap() + key.len();
    tag[start..].split('"').next().unwrap().parse().unwrap()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn labels_never_overlap_and_the_title_counts_what_the_summary_counts() {
    let dir = tempfile::tempdir().unwrap();
    let svg_path = dir.path().join("m.svg");
    let model = root().join("models/mobilenet_v2.onnx");
    let out = dir.path().join("m.memplan.onnx");
    let run = run_cli(&[
        "plan",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--svg",
        svg_path.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();

    // The title: "<file>: N tensors (...), S steps", N the summary's count.
    let title = between(&svg, r#"font-size="15" font-weight="bold">"#, "</text>")[0];
    let count: u64 = title
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(" tensors").next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(count, summary["tensors"].as_u64().unwrap(), "{title}");

    // The labels (the last group, drawn over the rectangles), as boxes.
    let group = svg.rsplit(r#"<g pointer-events="none">"#).next().unwrap();
    let group = group.split("</g>").next().unwrap();
    let titles: Vec<String> = between(&svg, "<title>", "</title>")
        .into_iter()
        .map(|t| unescape(t.split('\n').next().unwrap()))
        .collect();
    let mut boxes = Vec::new();
    for text in group.split("<text ").skip(1) {
        let (tag, rest) = text.split_once('>').unwrap();
        let label = unescape(rest.split("</text>").next().unwrap());
        let (x, y) = (attr(tag, "x"), attr(tag, "y"));
        let width = label.chars().count() as f64 * LABEL_CHAR_W;
        boxes.push((x, x + width, y - LABEL_ASCENT, y + LABEL_DESCENT, label));
    }
    assert!(
        boxes.len() >= 2,
        "mobilenet_v2's diagram has room for labels: {}",
        boxes.len()
    );
    for (x0, x1, y0, y1, label) in &boxes {
        // The full name is in a hover title ("name (kind) ..."); the label is the name, its
        // `_output_0`-less form, or "…" and its tail.
        let tail = label.trim_start_matches('…');
        assert!(
            titles
                .iter()
                .any(|t| t.split(" (").next().is_some_and(|name| name.contains(tail))),
            "label {label:?} names no tensor"
        );
        for (a0, a1, b0, b1, other) in &boxes {
            if std::ptr::eq(label, other) {
                continue;
            }
            let overlap = x0 < a1 && a0 < x1 && y0 < b1 && b0 < y1;
            assert!(!overlap, "labels {label:?} and {other:?} overlap");
        }
    }
}
