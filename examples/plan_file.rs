//! Plans a model file, prints the arena and the first offsets, and writes the annotated model
//! and its table: `cargo run --release --example plan_file [MODEL] [OUT.onnx]`.

use std::path::PathBuf;

use onnx_memplan::{PlanOptions, plan};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or("models/mobilenet_v2.onnx".into());
    let out = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("plan_file_example.memplan.onnx"));

    let mut plan = plan(model.as_str(), &PlanOptions::new().dim("batch", 1))?;
    println!("{}", plan.summary());
    println!("arena: {} bytes", plan.arena_bytes());
    for tensor in plan
        .table()
        .tensors
        .iter()
        .filter(|t| t.offset.is_some())
        .take(5)
    {
        println!(
            "  {:<40} offset {:>9}",
            tensor.name,
            tensor.offset.unwrap_or(0)
        );
    }
    let table = plan.write(&out)?;
    println!("wrote {} and {}", out.display(), table.display());
    Ok(())
}
