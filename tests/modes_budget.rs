//! Device-budget mode (S4) on the real models, unsplit (`--split off`; budget mode otherwise
//! splits operators, see tests/split_tiles.rs). At 50% and 75% of the lower bound every one of
//! them is infeasible for whole-tensor offload (one operator's operands alone exceed the
//! budget): the tool says so in one line and names the least feasible budget. Between that
//! floor and the lower bound, the plan verifies (resident bytes within budget at every step,
//! every tensor resident when used) and migrates less than farthest-next-use eviction.

mod common;

use common::*;
use onnx_memplan::emit::Table;

const DIMS: [&str; 4] = ["--dim", "batch=1", "--dim", "sequence=16"];

/// Runs `plan` on a model with extra flags into `dir`; returns the process output.
fn plan(
    dir: &std::path::Path,
    model: &std::path::Path,
    stem: &str,
    extra: &[&str],
) -> std::process::Output {
    let out = dir.join(format!("{stem}.memplan.onnx"));
    let mut args = vec!["plan", model.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(DIMS);
    args.extend(["--split", "off"]);
    args.extend(extra);
    run_cli(&args)
}

#[test]
fn budgets_below_the_operand_floor_are_refused_and_above_it_beat_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let mut collisions = 0;
    for name in [
        "mobilenet_v2",
        "resnet_small",
        "bert_tiny",
        "unet_small",
        "vit_tiny",
    ] {
        let model = root().join(format!("models/{name}.onnx"));
        assert!(plan(dir.path(), &model, name, &[]).status.success());
        let bound = read_table(&dir.path().join(format!("{name}.memplan.json")))
            .stats
            .lower_bound_bytes;
        let mut floor = 0u64;
        for percent in [50, 75] {
            let budget = (bound * percent / 100).to_string();
            let run = plan(
                dir.path(),
                &model,
                &format!("{name}.b{percent}"),
                &["--budget", &budget],
            );
            let err = String::from_utf8_lossy(&run.stderr).into_owned();
            assert_eq!(run.status.code(), Some(2), "{name} at {percent}%: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            let tail = err
                .split("no budget below ")
                .nth(1)
                .expect("names the floor");
            floor = tail.split_whitespace().next().unwrap().parse().unwrap();
            assert!(floor > bound * percent / 100 && floor <= bound, "{err}");
        }
        eprintln!(
            "{name}: lower bound {bound}, operand floor {floor} ({:.1}%)",
            100.0 * floor as f64 / bound as f64
        );
        for share in [50, 75] {
            let budget = floor + (bound - floor) * share / 100;
            if budget >= bound {
                continue;
            }
            let stem = format!("{name}.f{share}");
            let run = plan(
                dir.path(),
                &model,
                &stem,
                &["--budget", &budget.to_string()],
            );
            assert!(
                run.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            let table_path = dir.path().join(format!("{stem}.memplan.json"));
            let table = read_table(&table_path);
            let o = table.offload.as_ref().unwrap();
            assert!(table.arenas[0].bytes <= budget);
            let baseline = o.baseline_migrated_bytes.unwrap();
            assert!(o.migrated_bytes < baseline, "{name}: {o:?}");
            eprintln!(
                "  budget {budget} ({:.1}% of the bound): migrated {} bytes ({}, {} transfers), baseline {baseline}",
                100.0 * budget as f64 / bound as f64,
                o.migrated_bytes,
                o.method,
                o.transfers.len()
            );
            assert_verifies(&model, &table_path);
            // Without its transfers the same placement overlaps or overspends: verify refuses.
            if !o.transfers.is_empty() {
                let mut tampered = table.clone();
                tampered.offload.as_mut().unwrap().transfers.clear();
                let path = dir.path().join(format!("{stem}.tampered.json"));
                std::fs::write(&path, serde_json::to_string(&tampered).unwrap()).unwrap();
                assert_verify_refuses(&model, &path, "");
            }
            // Bringing a buffer back onto the bytes of a tensor resident then is refused.
            if let Some(tampered) = collide_on_return(&table) {
                collisions += 1;
                let path = dir.path().join(format!("{stem}.collide.json"));
                std::fs::write(&path, serde_json::to_string(&tampered).unwrap()).unwrap();
                assert_verify_refuses(&model, &path, "share bytes");
            }
        }
    }
    assert!(collisions > 0, "no transfer could be tampered with");
}

#[test]
fn a_budget_above_the_plan_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table) = plan_written(dir.path(), "chain", &chain_model(), &["--budget", "1MiB"]);
    let table = read_table(&table);
    let o = table.offload.unwrap();
    assert_eq!(
        (o.migrated_bytes, o.transfers.len(), o.method.as_str()),
        (0, 0, "none needed")
    );
    let run = run_cli(&["plan", path.to_str().unwrap(), "--budget", "lots"]);
    assert_eq!(run.status.code(), Some(2));
}

/// A tampered budget table whose arenas add up past the largest byte count (the verify_table
/// fuzz target's finding: the sum overflowed) is refused for its arenas, their total given
/// as the largest count.
#[test]
fn arenas_adding_up_past_any_count_are_over_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (path, table_path) =
        plan_written(dir.path(), "chain", &chain_model(), &["--budget", "1MiB"]);
    let mut table = read_table(&table_path);
    table.arenas[0].bytes = u64::MAX;
    table.arenas.push(table.arenas[0].clone());
    std::fs::write(&table_path, serde_json::to_string(&table).unwrap()).unwrap();
    assert_verify_refuses(
        &path,
        &table_path,
        &format!("the arenas take {} bytes, over the budget", u64::MAX),
    );
}

/// The table with one transfer's `in_offset` set to the offset of another tensor that is
/// resident (and made earlier) at the step the buffer is back for; `None` if there is none.
fn collide_on_return(table: &Table) -> Option<Table> {
    let runs = table.runs();
    let index = |name: &str| table.tensors.iter().position(|t| t.name == name);
    for (k, t) in table.offload.as_ref()?.transfers.iter().enumerate() {
        let moved: Vec<usize> = std::iter::once(&t.tensor)
            .chain(&t.aliases)
            .filter_map(|n| index(n))
            .collect();
        let Some(other) = table.tensors.iter().enumerate().find_map(|(i, e)| {
            let resident = runs[i]
                .iter()
                .find(|r| r.first <= t.in_before && t.in_before <= r.last)?
                .offset?;
            let fits = resident + t.bytes <= table.arenas[0].bytes;
            (!moved.contains(&i) && e.first < t.in_before && e.extent() > 0 && fits)
                .then_some(resident)
        }) else {
            continue;
        };
        let mut tampered = table.clone();
        tampered.offload.as_mut()?.transfers[k].in_offset = Some(other);
        return Some(tampered);
    }
    None
}
