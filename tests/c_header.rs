//! `plan --header`: the C header compiles with `cc -std=c99 -pedantic -Wall -Wextra -Werror`
//! and a program built against it prints exactly the table's values (flat, tiered and split
//! plans of models/); the header joins the output checks of `plan`. Skips the compile checks,
//! saying so, when no `cc` is installed.

mod common;

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{root, run_cli};
use serde_json::Value;

/// The C compiler, when one is installed.
fn cc() -> Option<PathBuf> {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from("cc"))
}

/// The identifier part docs/format.md ("C header") defines for a name, written here from the
/// documented rule: letters upper-cased, digits kept, other runs one `_`, none at the ends,
/// `T_` before a leading digit, `T` for an empty result, `_2`, `_3`, ... on a collision.
fn documented_ids(names: &[String]) -> Vec<String> {
    let mut taken: Vec<String> = Vec::new();
    names
        .iter()
        .map(|name| {
            let mut id = String::new();
            for c in name.chars() {
                if c.is_ascii_alphanumeric() {
                    id.push(c.to_ascii_uppercase());
                } else if !id.is_empty() && !id.ends_with('_') {
                    id.push('_');
                }
            }
            let id = id.trim_end_matches('_').to_string();
            let base = match id.chars().next() {
                None => "T".to_string(),
                Some(c) if c.is_ascii_digit() => format!("T_{id}"),
                Some(_) => id,
            };
            let (mut id, mut k) = (base.clone(), 2);
            while taken.contains(&id) {
                id = format!("{base}_{k}");
                k += 1;
            }
            taken.push(id.clone());
            id
        })
        .collect()
}

/// Plans `model` with `extra` and `--header` (`--header-all` when `all`), compiles a program
/// printing every macro and array of the header, runs it, and compares its output with the
/// lines expected from the JSON table.
fn header_matches_table(dir: &Path, model: &str, stem: &str, extra: &[&str], all: bool) {
    let Some(cc) = cc() else {
        eprintln!("c_header: SKIPPED the C compile check: no `cc` on PATH (install gcc)");
        return;
    };
    let out = dir.join(format!("{stem}.memplan.onnx"));
    let header = dir.join(format!("{stem}.h"));
    let model_path = root().join("models").join(model);
    let mut args = vec![
        "plan",
        model_path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--header",
        header.to_str().unwrap(),
        "-q",
    ];
    if all {
        args.push("--header-all");
    }
    args.extend(extra);
    let run = run_cli(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let table: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{stem}.memplan.json"))).unwrap(),
    )
    .unwrap();
    let prefix = model.trim_end_matches(".onnx").to_uppercase();

    // The tensors the header must list, in schedule order (the step writing them, then the
    // table's order), from the JSON alone.
    let mut listed: Vec<&Value> = table["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["arena"].is_u64() && t["offset"].is_u64())
        .filter(|t| all || t["kind"] == "input" || t["kind"] == "output")
        .collect();
    listed.sort_by_key(|t| t["first"].as_u64().unwrap());
    assert!(!listed.is_empty());
    let names: Vec<String> = listed
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let ids = documented_ids(&names);

    let mut program = format!(
        "#include <stdio.h>\n#include \"{}\"\n#include \"{}\"\n",
        header.display(),
        header.display() // included twice: the include guard must hold
    );
    program.push_str("int main(void) {\n");
    let mut expected = String::new();
    let p = &prefix;
    let _ = writeln!(program, "  printf(\"sha %s\\n\", {p}_MODEL_SHA256);");
    let _ = writeln!(
        expected,
        "sha {}",
        table["model"]["sha256"].as_str().unwrap()
    );
    if let Some(source) = table.get("splits") {
        let _ = writeln!(program, "  printf(\"source %s\\n\", {p}_SOURCE_SHA256);");
        let _ = writeln!(
            expected,
            "source {}",
            source["source"]["sha256"].as_str().unwrap()
        );
    }
    let _ = writeln!(
        program,
        "  printf(\"alignment %llu\\n\", (unsigned long long){p}_ALIGNMENT);"
    );
    let _ = writeln!(expected, "alignment {}", table["options"]["alignment"]);
    let arenas = table["arenas"].as_array().unwrap();
    let _ = writeln!(program, "  printf(\"arenas %d\\n\", (int){p}_ARENA_COUNT);");
    let _ = writeln!(expected, "arenas {}", arenas.len());
    let _ = writeln!(
        program,
        "  {{ static const unsigned long long s[] = {p}_ARENA_SIZES; int i;\n    for (i = 0; i < {p}_ARENA_COUNT; i++) printf(\"arena[%d] %llu\\n\", i, s[i]); }}"
    );
    for (i, a) in arenas.iter().enumerate() {
        assert_eq!(a["id"], i, "arena ids are 0..n");
        let _ = writeln!(
            program,
            "  printf(\"arena{i} %llu\\n\", (unsigned long long){p}_ARENA{i}_SIZE);"
        );
        let _ = writeln!(expected, "arena[{i}] {}", a["bytes"]);
    }
    for (i, a) in arenas.iter().enumerate() {
        let _ = writeln!(expected, "arena{i} {}", a["bytes"]);
    }
    let _ = writeln!(program, "  printf(\"count %d\\n\", (int){p}_TENSOR_COUNT);");
    let _ = writeln!(expected, "count {}", listed.len());
    for (i, (t, id)) in listed.iter().zip(&ids).enumerate() {
        let m = format!("{p}_TENSOR_{id}");
        let _ = writeln!(
            program,
            "  printf(\"{id} %d %d %llu %llu\\n\", (int){m}_INDEX, (int){m}_ARENA, (unsigned long long){m}_OFFSET, (unsigned long long){m}_SIZE);"
        );
        let size = t
            .get("stored_bytes")
            .unwrap_or(&t["bytes"])
            .as_u64()
            .unwrap();
        let _ = writeln!(expected, "{id} {i} {} {} {size}", t["arena"], t["offset"]);
    }
    let _ = writeln!(
        program,
        "  {{ static const char *n[] = {p}_TENSOR_NAMES; static const unsigned a[] = {p}_TENSOR_ARENAS;\n    static const unsigned long long o[] = {p}_TENSOR_OFFSETS, s[] = {p}_TENSOR_SIZES; int i;\n    for (i = 0; i < {p}_TENSOR_COUNT; i++) printf(\"[%d] %s %u %llu %llu\\n\", i, n[i], a[i], o[i], s[i]); }}"
    );
    for (i, t) in listed.iter().enumerate() {
        let size = t
            .get("stored_bytes")
            .unwrap_or(&t["bytes"])
            .as_u64()
            .unwrap();
        let _ = writeln!(
            expected,
            "[{i}] {} {} {} {size}",
            t["name"].as_str().unwrap(),
            t["arena"],
            t["offset"]
        );
    }
    program.push_str("  return 0;\n}\n");

    let source = dir.join(format!("{stem}_main.c"));
    std::fs::write(&source, &program).unwrap();
    let exe = dir.join(format!("{stem}_main"));
    let compile = Command::new(&cc)
        .args(["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        compile.status.success(),
        "{}\n{program}",
        String::from_utf8_lossy(&compile.stderr)
    );
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success());
    let mut got: Vec<String> = String::from_utf8_lossy(&ran.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let mut want: Vec<String> = expected.lines().map(str::to_string).collect();
    // The program prints the loops and the macros in its own order: compare sorted lines.
    got.sort();
    want.sort();
    assert_eq!(got, want, "{}", header.display());
}

#[test]
fn header_of_a_flat_plan_lists_the_inputs_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    header_matches_table(dir.path(), "mobilenet_v2.onnx", "io", &[], false);
}

#[test]
fn header_all_lists_every_placed_tensor() {
    let dir = tempfile::tempdir().unwrap();
    header_matches_table(dir.path(), "mobilenet_v2.onnx", "all", &[], true);
}

#[test]
fn header_of_a_tiered_plan_has_one_size_per_arena() {
    let dir = tempfile::tempdir().unwrap();
    let tiers = ["--tier", "sram:1MiB:1:64", "--tier", "dram:1GiB:200:8"];
    header_matches_table(dir.path(), "mobilenet_v2.onnx", "tiers", &tiers, true);
}

#[test]
fn header_of_a_split_plan_names_the_rewritten_model_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let split = ["--split", "auto", "--split-time", "3"];
    header_matches_table(dir.path(), "unet_small.onnx", "split", &split, true);
    let table: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("split.memplan.json")).unwrap(),
    )
    .unwrap();
    assert!(
        !table["splits"]["chains"].as_array().unwrap().is_empty(),
        "the split plan must rewrite the model for this test to mean anything"
    );
}

#[test]
fn header_joins_the_output_checks() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/mobilenet_v2.onnx");
    let table = dir.path().join("t.json");
    // --header naming the table's file is refused before anything is written.
    let run = run_cli(&[
        "plan",
        model.to_str().unwrap(),
        "-o",
        dir.path().join("m.onnx").to_str().unwrap(),
        "--table",
        table.to_str().unwrap(),
        "--header",
        table.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("--table and --header name the same file"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A plan that fails writes no header.
    let header = dir.path().join("h.h");
    let run = run_cli(&[
        "plan",
        root().join("models/resnet_small.onnx").to_str().unwrap(),
        "-o",
        dir.path().join("r.onnx").to_str().unwrap(),
        "--header",
        header.to_str().unwrap(),
    ]);
    assert_eq!(
        run.status.code(),
        Some(2),
        "resnet_small has an unbound batch"
    );
    assert!(!header.exists());
    // --header-all without --header is a usage error.
    let run = run_cli(&["plan", model.to_str().unwrap(), "--header-all"]);
    assert_eq!(run.status.code(), Some(2));
}
