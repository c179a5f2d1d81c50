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
