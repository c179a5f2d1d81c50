//! `--svg` and `--html` on a real model: one hover title per placed tensor, one panel per
//! tier, the summary and the tables in the page. (scripts/render_check.sh screenshots them in
//! headless Chromium.)

mod common;

use common::*;

#[test]
fn diagram_and_report_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/bert_tiny.onnx");
    let (svg, html) = (dir.path().join("b.svg"), dir.path().join("b.html"));
    let out = dir.path().join("b.memplan.onnx");
    let run = plan_to(
        &model,
        &out,
        &[
            "--dim",
            "batch=1",
            "--dim",
            "sequence=16",
            "--tier",
            "sram:32KiB:1:64",
            "--tier",
            "dram:1GiB:200:8",
            "--svg",
            svg.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--colour-by",
            "tier",
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table = read_table(&dir.path().join("b.memplan.json"));
    let placed = table
        .tensors
        .iter()
        .filter(|t| t.offset.is_some() && t.extent() > 0)
        .count();
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // One title per placed tensor plus one per panel's live-bytes line.
    assert_eq!(svg.matches("<title>").count(), placed + 2);
    assert!(svg.contains("arena 0 &#39;sram&#39;") && svg.contains("arena 1 &#39;dram&#39;"));
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("estimated cost E(s)") && html.contains("<svg"));
    assert_eq!(html.matches("<tr><td>").count(), table.tensors.len());
}
