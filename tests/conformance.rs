//! Runs the conformance harness on `../shared/conformance/onnx-node` (skipped when absent) and
//! checks that at least as many tests pass as `conformance-floor.txt` says.

use onnx_memplan::cli::conformance;
use std::path::PathBuf;

#[test]
fn node_tests_meet_the_floor() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("../shared/conformance/onnx-node");
    if !dir.join("expected.jsonl").is_file() {
        println!("conformance data not found at {}: skipped", dir.display());
        return;
    }
    let failures = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance-failures.txt");
    let args = conformance::ConformanceArgs {
        dir,
        failures: Some(failures.clone()),
        floor: Some(root.join("conformance-floor.txt")),
    };
    let code = conformance::run(&args).expect("harness runs");
    println!("failures written to {}", failures.display());
    assert_eq!(
        code, 0,
        "fewer conformance tests pass than conformance-floor.txt says"
    );
}
