//! onnx-memplan: static memory planning for ONNX models.
//!
//! The pipeline (see DESIGN.md): load → lower to [`ir`] → infer types → schedule → liveness →
//! [`plan::Problem`] → solve → verify → emit.

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
pub mod schedule;
pub mod split;
pub mod symbolic;
pub mod verify;
