//! Plans a serialized model held in memory, once as given and once with `--split auto`, and
//! compares the arenas: `cargo run --release --example plan_bytes [MODEL]`.

use onnx_memplan::{PlanOptions, plan};

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or("models/resnet_small.onnx".into());
    let bytes = std::fs::read(&path)?;

    let options = PlanOptions::new().dim("batch", 1);
    let flat = plan(bytes.as_slice(), &options)?;
    let split = plan(bytes, &options.split_auto().schedule_memory())?;
    println!("{path}");
    println!("  arena as given:     {:>10} bytes", flat.arena_bytes());
    println!("  arena, split auto:  {:>10} bytes", split.arena_bytes());
    let chains = split.table().splits.as_ref().map_or(0, |s| s.chains.len());
    println!("  chains split:       {chains:>10}");
    Ok(())
}
