//! `--split auto` keeps a rewrite only when it lowers the arena: on every model in models/,
//! the split plan's arena is at most the plan without splitting (same options otherwise), and
//! a plan that is not smaller records no chains.

mod common;

use common::{plan_to, read_table, root};

#[test]
fn split_auto_is_never_larger_than_split_off() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "bert_tiny",
        "mobilenet_v2",
        "resnet_small",
        "unet_small",
        "vit_tiny",
    ] {
        let model = root().join(format!("models/{name}.onnx"));
        let arena_and_chains = |split: &str| {
            let out = dir.path().join(format!("{name}-{split}.memplan.onnx"));
            let run = plan_to(
                &model,
                &out,
                &[
                    "--schedule",
                    "memory",
                    "--split",
                    split,
                    "--dim",
                    "batch=1",
                    "--dim",
                    "sequence=128",
                ],
            );
            assert!(
                run.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            let table = read_table(&out.with_extension("json"));
            let arena: u64 = table.arenas.iter().map(|a| a.bytes).sum();
            let chains = table.splits.map_or(0, |s| s.chains.len());
            (arena, chains)
        };
        let (off, _) = arena_and_chains("off");
        let (auto, chains) = arena_and_chains("auto");
        assert!(
            auto <= off,
            "{name}: --split auto {auto} B > --split off {off} B"
        );
        if auto == off {
            assert_eq!(chains, 0, "{name}: a split that saves nothing is recorded");
        }
    }
}

/// The split search's allowance (`--split-time`): with none, no trial runs, the plan is the
/// unsplit one, and the table says the search ended on its work budget; with the default, the
/// search on resnet_small runs to the end and splits (its table says `complete`).
#[test]
fn the_split_search_stops_on_its_allowance_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let model = root().join("models/resnet_small.onnx");
    let plan = |name: &str, extra: &[&str]| {
        let out = dir.path().join(format!("{name}.memplan.onnx"));
        let mut args = vec!["--schedule", "memory", "--dim", "batch=1"];
        args.extend(extra);
        let run = plan_to(&model, &out, &args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        read_table(&out.with_extension("json"))
    };
    let arena = |t: &onnx_memplan::emit::Table| t.arenas.iter().map(|a| a.bytes).sum::<u64>();
    let split_end = |t: &onnx_memplan::emit::Table| {
        let ends: Vec<_> = t
            .stats
            .searches
            .iter()
            .filter(|s| s.planner == "split")
            .map(|s| s.ended_by.clone())
            .collect();
        ends
    };
    let off = plan("off", &["--split", "off"]);
    let none = plan("none", &["--split", "auto", "--split-time", "0"]);
    assert_eq!(arena(&none), arena(&off));
    assert_eq!(none.splits.as_ref().map(|s| s.chains.len()), Some(0));
    assert_eq!(split_end(&none), ["work-budget"]);
    let auto = plan("auto", &["--split", "auto"]);
    assert!(arena(&auto) < arena(&off));
    assert_eq!(split_end(&auto), ["complete"]);
    assert!(split_end(&off).is_empty());
}

/// The estimates that rank the candidates draw on the split search's allowance, not only the
/// trial plans: on mobilenet_v2 they are charged before the first trial, and with half of
/// what they cost the search ends without planning any trial (so an allowance bounds the
/// whole search, however many chains and grids a model offers).
#[test]
fn the_candidates_estimates_are_charged_to_the_split_allowance() {
    use onnx_memplan::split::{SplitOptions, search};
    use std::cell::Cell;

    let (original, first) = first_plan("mobilenet_v2");
    let split = SplitOptions::default();
    // Unlimited: count what is spent until the first trial, which ends the search.
    let spent = Cell::new(0u64);
    let before_trial = Cell::new(None);
    let spend = |units: u64| {
        spent.set(spent.get() + units);
        true
    };
    let stop_at_trial = |_model: &mut onnx_memplan::onnx::proto::ModelProto, _| {
        before_trial.set(Some(spent.get()));
        Ok(None)
    };
    let outcome = search(
        &original,
        &first,
        &split,
        &stop_at_trial,
        (&spend, &Default::default(), &|_| {}),
    )
    .unwrap();
    assert!(outcome.info.chains.is_empty());
    let estimates = before_trial
        .get()
        .expect("mobilenet_v2 has a candidate to try");
    assert!(estimates > 0, "the estimates were not charged");
    // Half of that: no trial starts.
    let left = Cell::new(estimates / 2);
    let trials = Cell::new(0);
    let limited = |units: u64| spend_within(&left, units);
    let count_trial = |_model: &mut onnx_memplan::onnx::proto::ModelProto, _| {
        trials.set(trials.get() + 1);
        Ok(None)
    };
    let outcome = search(
        &original,
        &first,
        &split,
        &count_trial,
        (&limited, &Default::default(), &|_| {}),
    )
    .unwrap();
    assert_eq!(trials.get(), 0, "a trial ran after the allowance was spent");
    assert!(outcome.info.chains.is_empty());
    assert_eq!(outcome.info.arena_after, outcome.info.arena_before);
}

/// A search that meets a round another search ranked takes the ranking from the shared memo
/// (`split::Memos`), and its course is the same as ranking afresh: the same work charged
/// before its first trial, the same first trial; and, on half that work, no trial. Grading
/// chains ahead, side by side, changes neither.
#[test]
fn a_round_ranked_before_is_charged_and_tried_as_ranked_afresh() {
    use onnx_memplan::split::{Memos, SplitOptions, search};
    use prost::Message;
    use std::cell::{Cell, RefCell};

    let (original, first) = first_plan("resnet_small");
    let split = SplitOptions::default();
    let memos = Memos::default();
    // Runs the search up to its first trial: the work charged before it, and its model.
    let until_first_trial = |split: &SplitOptions, memos: &Memos| {
        let spent = Cell::new(0u64);
        let tried = RefCell::new(None);
        let spend = |units: u64| {
            spent.set(spent.get() + units);
            true
        };
        let stop = |model: &mut onnx_memplan::onnx::proto::ModelProto, _| {
            tried.replace(Some((spent.get(), model.encode_to_vec())));
            Ok(None)
        };
        search(&original, &first, split, &stop, (&spend, memos, &|_| {})).unwrap();
        tried
            .into_inner()
            .expect("resnet_small has a candidate to try")
    };
    let (fresh_work, fresh_trial) = until_first_trial(&split, &memos);
    let (memo_work, memo_trial) = until_first_trial(&split, &memos);
    assert!(fresh_work > 0);
    assert_eq!(
        memo_work, fresh_work,
        "a remembered round is charged its work"
    );
    assert!(
        memo_trial == fresh_trial,
        "a remembered round tries another cut"
    );
    // Chains graded side by side ahead of the walk: the same work, the same first trial.
    let ahead = SplitOptions {
        first: true,
        ..SplitOptions::default()
    };
    let (ahead_work, ahead_trial) = until_first_trial(&ahead, &Memos::default());
    assert_eq!(ahead_work, fresh_work, "grading ahead charged other work");
    assert!(
        ahead_trial == fresh_trial,
        "grading ahead tried another cut"
    );
    // On half the work, with the round remembered: no trial starts.
    let left = Cell::new(fresh_work / 2);
    let limited = |units: u64| spend_within(&left, units);
    let trials = Cell::new(0);
    let count = |_model: &mut onnx_memplan::onnx::proto::ModelProto, _| {
        trials.set(trials.get() + 1);
        Ok(None)
    };
    search(
        &original,
        &first,
        &split,
        &count,
        (&limited, &memos, &|_| {}),
    )
    .unwrap();
    assert_eq!(trials.get(), 0, "a remembered round ran past the allowance");
}

/// A tile trial is planned in the order its rewrite wrote, a row trial with the memory-aware
/// order search (`split::TrialOrder`): the first trial of mobilenet_v2 cuts a chain of
/// convolutions into tiles, that of bert_tiny at 128 tokens an encoder layer into row blocks.
#[test]
fn a_tile_trial_keeps_the_rewrites_order_and_a_row_trial_searches() {
    use onnx_memplan::split::{SplitOptions, TrialOrder, search};
    use std::cell::Cell;

    for (name, wanted) in [
        ("mobilenet_v2", TrialOrder::Written),
        ("bert_tiny", TrialOrder::Searched),
    ] {
        let (original, first) = first_plan(name);
        let asked = Cell::new(None);
        let stop = |_model: &mut onnx_memplan::onnx::proto::ModelProto, order| {
            asked.set(Some(order));
            Ok(None)
        };
        let spend = |_: u64| true;
        search(
            &original,
            &first,
            &SplitOptions::default(),
            &stop,
            (&spend, &Default::default(), &|_| {}),
        )
        .unwrap();
        assert_eq!(asked.get(), Some(wanted), "{name}'s first trial");
    }
}

/// A model of models/ planned with `--schedule memory` (batch 1, 128 tokens), as the split
/// search starts from: the input model and its plan.
fn first_plan(
    name: &str,
) -> (
    onnx_memplan::onnx::proto::ModelProto,
    onnx_memplan::split::TrialPlan,
) {
    use onnx_memplan::pipeline::{Options, ScheduleChoice, plan_model};
    let mut options = Options {
        schedule: ScheduleChoice::Memory,
        ..Options::default()
    };
    options.infer.dims.insert("batch".into(), 1);
    options.infer.dims.insert("sequence".into(), 128);
    let path = root().join(format!("models/{name}.onnx"));
    let planned = plan_model(&path, &options).unwrap();
    let first = onnx_memplan::split::TrialPlan {
        model: planned.model.into(),
        table: planned.table.into(),
    };
    (planned.original, first)
}

/// Spends `units` from the allowance `left`, as the search's meter does: false once they
/// exceed it, and then nothing is left.
fn spend_within(left: &std::cell::Cell<u64>, units: u64) -> bool {
    let ok = units <= left.get();
    left.set(left.get().saturating_sub(units));
    ok
}
