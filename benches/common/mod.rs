//! What the benches share: the models they run on.

// Each bench uses its own part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

#[path = "../../tests/common/symbolic_dims.rs"]
pub mod symbolic_dims;

/// The `.onnx` files of models/ and of each folder in MEMPLAN_BENCH_MODELS (`:`-separated),
/// sorted per folder, without the `.memplan.` outputs.
pub fn model_files() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models")];
    if let Ok(extra) = std::env::var("MEMPLAN_BENCH_MODELS") {
        dirs.extend(
            extra
                .split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
        );
    }
    let mut files = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipping {}: not a folder", dir.display());
            continue;
        };
        let mut list: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                n.ends_with(".onnx") && !n.contains(".memplan.")
            })
            .collect();
        list.sort();
        files.extend(list);
    }
    files
}
