//! onnx-memplan: static memory planning for ONNX models.
//!
//! The pipeline (see ARCHITECTURE.md): load → lower to [`ir`] → infer types → schedule →
//! liveness → [`plan::Problem`] → solve → verify → emit. What it writes is specified in
//! docs/format.md.
//!
//! The main entry points are in [`pipeline`]: [`pipeline::plan_model`] runs the whole pass and
//! returns a verified [`pipeline::Planned`]; [`pipeline::verify_table`] checks a table against a
//! model; [`pipeline::load_typed`] gives the typed model.
//!
//! ```
//! use onnx_memplan::pipeline::{Options, plan_model};
//!
//! let model = std::path::Path::new("models/resnet_small.onnx");
//! let mut options = Options::default();
//! options.infer.dims.insert("batch".into(), 1); // the model's input is batch×3×160×160
//! let planned = plan_model(model, &options)?;
//! let table_json = serde_json::to_string_pretty(&planned.table)?;
//! assert!(table_json.contains("\"format\": \"onnx-memplan/1\""));
//! let annotated = planned.annotated("resnet_small.memplan.json");
//! assert_eq!(annotated.graph.unwrap().node.len(), planned.table.schedule.len());
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod cli;
pub mod emit;
pub mod error;
pub mod infer;
pub mod ir;
pub mod liveness;
pub mod modes;
pub mod onnx;
pub mod pipeline;
pub mod plan;
pub mod ranges;
pub mod schedule;
pub mod split;
pub mod symbolic;
pub mod units;
pub mod verify;
