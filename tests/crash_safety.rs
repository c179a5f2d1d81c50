//! Crash safety: `plan` killed with SIGKILL at random moments leaves, in its output folder,
//! either the previous complete outputs or the new complete ones, never a partial file, a mix
//! of the two runs, or a stray temporary. The references are two complete runs of the same
//! model with different options (so every output file differs between them).

#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{float_info, model, node, write_model};
use onnx_memplan::onnx::proto::{GraphProto, TensorProto};

/// A chain of `layers` MatMul+Relu blocks over `[1, 64, width]` with `width × width` weights
/// (deterministic bytes), about `4 · layers · width²` bytes of inline weights.
fn weighted_chain(layers: usize, width: i64) -> onnx_memplan::onnx::proto::ModelProto {
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut x = "x".to_string();
    for l in 0..layers {
        let (w, mm, out) = (format!("w{l}"), format!("mm{l}"), format!("h{l}"));
        let raw: Vec<u8> = (0..width * width * 4)
            .map(|i| (i as usize * 31 + l * 7) as u8)
            .collect();
        inits.push(TensorProto {
            name: Some(w.clone()),
            dims: vec![width, width],
            data_type: Some(1),
            raw_data: Some(raw.into()),
            ..Default::default()
        });
        nodes.push(node("MatMul", &[&x, &w], &[&mm]));
        nodes.push(node("Relu", &[&mm], &[&out]));
        x = out;
    }
    model(GraphProto {
        name: Some("weighted_chain".into()),
        node: nodes,
        initializer: inits,
        input: vec![float_info("x", &[1, 64, width])],
        output: vec![float_info(&x, &[1, 64, width])],
        ..Default::default()
    })
}

/// Every file in `dir` by name, with its bytes.
fn folder(dir: &Path) -> Folder {
    std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read an output"),
            )
        })
        .collect()
}

fn plan_command(model: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onnx-memplan"));
    cmd.arg("plan")
        .arg(model)
        .arg("-o")
        .arg(out.join("m.memplan.onnx"))
        .arg("--svg")
        .arg(out.join("m.svg"))
        .args(extra)
        .stderr(std::process::Stdio::null());
    cmd
}

fn reset(dir: &Path, contents: &BTreeMap<String, Vec<u8>>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create the output folder");
    for (name, bytes) in contents {
        std::fs::write(dir.join(name), bytes).expect("restore a previous output");
    }
}

/// A folder's files by name.
type Folder = BTreeMap<String, Vec<u8>>;

/// Two complete runs of `model_path` into folders of their own, with options that make every
/// output file differ: the previous outputs and the new ones of the kill tests.
fn references(tmp: &Path, model_path: &Path) -> (Folder, Folder) {
    let (old_dir, new_dir) = (tmp.join("old"), tmp.join("new"));
    let old_options = ["--no-inplace"];
    for (dir, extra) in [(&old_dir, &old_options[..]), (&new_dir, &[][..])] {
        std::fs::create_dir_all(dir).expect("mkdir");
        let status = plan_command(model_path, dir, extra)
            .status()
            .expect("plan runs");
        assert!(status.success(), "reference run failed");
    }
    let (old, new) = (folder(&old_dir), folder(&new_dir));
    assert_eq!(old.len(), 3, "table, model and diagram: {:?}", old.keys());
    assert_eq!(
        old.keys().collect::<Vec<_>>(),
        new.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &old {
        assert!(
            bytes != &new[name],
            "{name} must differ between the two references"
        );
    }
    (old, new)
}

/// Waits until no commit holds the folder's lock: a commit's detached child, which may still be
/// naming files right after the command was killed, holds it until every name is in place.
fn wait_for_commits(dir: &Path) {
    use std::os::unix::io::AsRawFd;
    let folder = std::fs::File::open(dir).expect("open the output folder");
    // SAFETY: a plain system call on an open descriptor; closing the file releases the lock.
    let locked = unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(locked, 0, "lock the output folder");
}

#[test]
fn kills_leave_previous_or_new_outputs_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model_path = tmp.path().join("m.onnx");
    // 8 layers of 1024×1024 floats: 32 MiB, so reading, hashing, planning and writing each
    // take a visible share of a run.
    write_model(&weighted_chain(8, 1024), &model_path);
    let out = tmp.path().join("out");
    let (old, new) = references(tmp.path(), &model_path);

    // How long a whole run takes here (the fastest of three), to spread the kills over it.
    let mut run = std::time::Duration::MAX;
    for _ in 0..3 {
        reset(&out, &BTreeMap::new());
        let started = Instant::now();
        assert!(
            plan_command(&model_path, &out, &[])
                .status()
                .unwrap()
                .success()
        );
        run = run.min(started.elapsed());
        assert!(folder(&out) == new, "a run is deterministic");
    }

    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut killed_running, mut finished) = (0, 0);
    for i in 0..100 {
        // Start from the previous outputs, or (every fourth time) from an empty folder.
        let previous = if i % 4 == 0 {
            BTreeMap::new()
        } else {
            old.clone()
        };
        reset(&out, &previous);
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let fraction = (seed >> 11) as f64 / (1u64 << 53) as f64;
        let mut child = plan_command(&model_path, &out, &[]).spawn().expect("spawn");
        std::thread::sleep(run.mul_f64(fraction));
        match child.try_wait().expect("poll") {
            Some(_) => finished += 1,
            None => {
                child.kill().expect("SIGKILL");
                killed_running += 1;
            }
        }
        child.wait().expect("reap");
        wait_for_commits(&out);
        let after = folder(&out);
        let stray: Vec<_> = after.keys().filter(|n| !new.contains_key(*n)).collect();
        assert!(
            stray.is_empty(),
            "kill {i} at {fraction:.3} of a run left {stray:?}"
        );
        assert!(
            after == previous || after == new,
            "kill {i} at {fraction:.3} of a run left neither the previous nor the new outputs: {:?}",
            after
                .iter()
                .map(|(n, b)| (
                    n,
                    if Some(b) == previous.get(n) {
                        "previous"
                    } else if b == &new[n] {
                        "new"
                    } else {
                        "partial"
                    }
                ))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        killed_running >= 40,
        "only {killed_running} of 100 kills hit a running pass ({finished} had finished; a run takes {run:?})"
    );
}

/// A kill in the middle of the burst of renames (widened by the test hook that pauses after
/// each name) still leaves every new output: the burst runs in a detached child.
#[test]
fn a_kill_between_two_renames_leaves_the_new_outputs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model_path = tmp.path().join("m.onnx");
    write_model(&weighted_chain(2, 64), &model_path);
    let out = tmp.path().join("out");
    let (old, new) = references(tmp.path(), &model_path);
    reset(&out, &old);
    let mut child = plan_command(&model_path, &out, &[])
        .env("ONNX_MEMPLAN_TEST_COMMIT_PAUSE_MS", "300")
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    let mix = loop {
        let now = folder(&out);
        if now != old {
            break now;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no output was renamed within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    assert!(
        mix != new,
        "the kill must land inside the burst (some outputs still the previous ones)"
    );
    wait_for_commits(&out);
    assert!(
        folder(&out) == new,
        "a kill inside the burst of renames left a mix of the two runs"
    );
}

#[test]
fn a_run_removes_temporaries_left_by_killed_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let model_path = tmp.path().join("m.onnx");
    write_model(&weighted_chain(2, 64), &model_path);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    // Temporaries named as ours, of a process id above Linux's maximum (so not running), and
    // an unrelated file that must stay.
    let stale = [
        ".m.memplan.onnx.99999999.memplan-tmp",
        ".m.memplan.json.99999999.memplan-tmp",
    ];
    for name in stale.iter().chain([&"keep.txt"]) {
        std::fs::write(out.join(name), b"partial").expect("write");
    }
    assert!(
        plan_command(&model_path, &out, &[])
            .status()
            .unwrap()
            .success()
    );
    let names: Vec<String> = folder(&out).into_keys().collect();
    assert_eq!(
        names,
        ["keep.txt", "m.memplan.json", "m.memplan.onnx", "m.svg"]
    );
}

#[test]
fn the_sweep_of_temporaries_waits_for_a_commit_in_progress() {
    use std::os::unix::io::AsRawFd;
    let tmp = tempfile::tempdir().expect("tempdir");
    let model_path = tmp.path().join("m.onnx");
    write_model(&weighted_chain(2, 64), &model_path);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    // The temporary of a killed run whose detached child (here: this test, holding the
    // folder's lock) has not named it yet. Its process is gone, but the file is not stale.
    let pending = out.join(".m.memplan.onnx.99999999.memplan-tmp");
    std::fs::write(&pending, b"being named").expect("write");
    let folder = std::fs::File::open(&out).expect("open the output folder");
    // SAFETY: a plain system call on an open descriptor; dropping the file releases the lock.
    assert_eq!(unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut run = plan_command(&model_path, &out, &[]).spawn().expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        pending.exists(),
        "a run removed a temporary while a commit held the folder"
    );
    assert!(
        run.try_wait().expect("poll").is_none(),
        "the run did not wait"
    );
    drop(folder);
    assert!(run.wait().expect("wait").success());
    assert!(
        !pending.exists(),
        "the stale temporary stays after the commit ended"
    );
}

/// A model whose one weight lives in `weights.bin` beside it.
fn external_model(dir: &Path) -> std::path::PathBuf {
    use onnx_memplan::onnx::proto::StringStringEntryProto;
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let mut m = weighted_chain(1, 64);
    let graph = m.graph.as_mut().expect("graph");
    let w = &mut graph.initializer[0];
    // Finite floats (the chain's byte pattern holds NaNs), so onnxruntime's outputs compare.
    let raw: Vec<u8> = (0..64 * 64)
        .flat_map(|i| ((i % 17) as f32 / 16.0 - 0.5).to_le_bytes())
        .collect();
    w.raw_data = None;
    std::fs::write(dir.join("weights.bin"), &raw).expect("write weights");
    w.data_location = Some(1);
    w.external_data = vec![
        entry("location", "weights.bin"),
        entry("length", &raw.len().to_string()),
    ];
    let path = dir.join("m.onnx");
    write_model(&m, &path);
    path
}

/// `(device, inode, link count)` of a file.
fn identity(path: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).expect("metadata");
    (m.dev(), m.ino(), m.nlink())
}

#[test]
fn external_data_is_copied_once_and_compared_after() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let model_path = external_model(&src);
    let (weights, input_model) = (
        std::fs::read(src.join("weights.bin")).unwrap(),
        std::fs::read(&model_path).unwrap(),
    );
    let input_identity = identity(&src.join("weights.bin"));
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    let mut first = None;
    for _ in 0..2 {
        assert!(
            plan_command(&model_path, &out, &[])
                .status()
                .unwrap()
                .success()
        );
        let written = identity(&out.join("weights.bin"));
        // onnx's loader refuses data files with more than one link ("potential hardlink
        // attack"), so the copy must be a file of its own, and the input must stay one too.
        assert_eq!(written.2, 1, "the written data file has one link");
        assert_ne!(written.1, input_identity.1, "a copy, not the input's file");
        assert_eq!(identity(&src.join("weights.bin")), input_identity);
        assert_eq!(std::fs::read(out.join("weights.bin")).unwrap(), weights);
        // The second run finds identical bytes and keeps the file (same inode).
        assert_eq!(*first.get_or_insert(written), written);
    }
    // A hard link to the input's file (as earlier versions wrote) is replaced by a copy; the
    // input keeps its bytes and is back to one link.
    std::fs::remove_file(out.join("weights.bin")).unwrap();
    std::fs::hard_link(src.join("weights.bin"), out.join("weights.bin")).unwrap();
    assert!(
        plan_command(&model_path, &out, &[])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(identity(&out.join("weights.bin")).2, 1);
    assert_eq!(identity(&src.join("weights.bin")), input_identity);
    assert_eq!(std::fs::read(src.join("weights.bin")).unwrap(), weights);
    assert_eq!(std::fs::read(&model_path).unwrap(), input_model);
    // A copy with the same bytes is kept; one that differs is refused (exit 2), untouched.
    std::fs::remove_file(out.join("weights.bin")).unwrap();
    std::fs::copy(src.join("weights.bin"), out.join("weights.bin")).unwrap();
    assert!(
        plan_command(&model_path, &out, &[])
            .status()
            .unwrap()
            .success()
    );
    let mut changed = std::fs::read(out.join("weights.bin")).unwrap();
    changed[100] ^= 1;
    std::fs::write(out.join("weights.bin"), &changed).unwrap();
    let status = plan_command(&model_path, &out, &[]).status().unwrap();
    assert_eq!(status.code(), Some(2));
    assert_eq!(std::fs::read(out.join("weights.bin")).unwrap(), changed);
    assert_eq!(std::fs::read(src.join("weights.bin")).unwrap(), weights);
}

#[test]
fn model_written_with_external_data_loads_in_onnx() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let model_path = external_model(&src);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    assert!(
        plan_command(&model_path, &out, &[])
            .status()
            .unwrap()
            .success()
    );
    let written = out.join("m.memplan.onnx");
    common::load_in_onnx(&written);
    common::compare_in_onnxruntime(&model_path, &written);
}
