//! The result of the pass: the checked plan, its summaries and its annotated model.

use std::path::Path;

use anyhow::Result;
use sha2::{Digest, Sha256};

use super::IN_MEMORY;
use crate::emit::{self, Table};
use crate::infer::InferReport;
use crate::ir::Model;
use crate::onnx::{ModelFile, hex, proto::ModelProto};

/// A checked plan, ready to be written.
pub struct Planned {
    /// The input model as decoded.
    pub original: ModelProto,
    /// The lowered, typed model.
    pub model: Model,
    /// The allocation table.
    pub table: Table,
    /// What inference noticed (declared types that disagree).
    pub report: InferReport,
    /// How long the pass took (reported, never written to the table).
    pub timings: Timings,
    /// Work units the planner's searches spent (see [`plan::budget`]).
    pub work: u64,
}

/// Wall-clock times of a pass, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    /// Time spent in the planner.
    pub plan_ms: f64,
    /// Time of the whole pass, from reading the file to the verified table (set by the caller
    /// that read the file).
    pub total_ms: f64,
}

impl Planned {
    /// The one-line summary: arena, lower bound, naive bytes and the saving (of [`IN_MEMORY`]
    /// for a model without a file).
    pub fn summary(&self) -> String {
        let s = &self.table.stats;
        let arena: u64 = self.table.arenas.iter().map(|a| a.bytes).sum();
        let saving = if s.naive_bytes > 0 {
            100.0 * (1.0 - arena as f64 / s.naive_bytes as f64)
        } else {
            0.0
        };
        let order = if s.schedule.is_empty() || s.schedule == "stored" {
            String::new()
        } else {
            format!(
                ", schedule {} (stored-order bound {} bytes)",
                s.schedule, s.stored_lower_bound_bytes
            )
        };
        format!(
            "{}: arena {} bytes, lower bound {} bytes ({:.3}x), naive {} bytes, saving {saving:.1}% ({} tensors, planner {}{}{order}, {:.1} ms)",
            if self.table.model.file.is_empty() {
                IN_MEMORY
            } else {
                &self.table.model.file
            },
            arena,
            s.lower_bound_bytes,
            if s.lower_bound_bytes > 0 {
                arena as f64 / s.lower_bound_bytes as f64
            } else {
                1.0
            },
            s.naive_bytes,
            self.table.tensors.len(),
            s.planner,
            if s.proven_optimal { ", optimal" } else { "" },
            self.timings.total_ms,
        ) + &crate::modes::summary(&self.table)
            + &crate::split::summary(&self.table)
            + &crate::units::summary(&self.table, &self.model.graph)
    }

    /// The summary as one JSON object (`plan --json`, the Python API's `Plan.summary_dict`):
    /// the numbers of [`Planned::summary`] under the table's field names, plus the outcome of
    /// an advanced mode (`hierarchy`, `offload` without its transfer list, `partition`).
    pub fn summary_json(&self) -> serde_json::Value {
        let t = &self.table;
        let s = &t.stats;
        let arena: u64 = t.arenas.iter().map(|a| a.bytes).sum();
        let mut out = serde_json::json!({
            "model": t.model.file,
            "arena_bytes": arena,
            "arenas": t.arenas.iter().map(|a| serde_json::json!({"id": a.id, "name": a.name, "bytes": a.bytes})).collect::<Vec<_>>(),
            "lower_bound_bytes": s.lower_bound_bytes,
            "naive_bytes": s.naive_bytes,
            "tensors": t.tensors.len(),
            "planner": s.planner,
            "proven_optimal": s.proven_optimal,
            "schedule": s.schedule,
            "stored_lower_bound_bytes": s.stored_lower_bound_bytes,
            "plan_ms": self.timings.plan_ms,
            "total_ms": self.timings.total_ms,
            "warnings": self.report.disagreements,
        });
        if let Some(h) = &t.hierarchy {
            out["hierarchy"] = serde_json::json!(h);
        }
        if let Some(o) = &t.offload {
            let mut o = serde_json::json!(o);
            o["transfers"] = serde_json::json!(t.offload.as_ref().map_or(0, |o| o.transfers.len()));
            out["offload"] = o;
        }
        if let Some(sp) = &t.splits {
            out["splits"] = serde_json::json!({
                "chains": sp.chains.len(),
                "arena_before": sp.arena_before,
                "arena_after": sp.arena_after,
                "total_macs": sp.total_macs,
                "extra_macs": sp.extra_macs,
            });
        }
        if let Some(qdq) = &t.options.qdq {
            out["qdq"] = serde_json::json!({
                "mode": qdq,
                "units": self.model.graph.units.len(),
                "literal_qdq_nodes": crate::units::literal_qdq_nodes(&self.model.graph),
            });
        }
        if let Some(p) = &t.partition {
            out["partition"] = serde_json::json!({
                "units": p.units.iter().map(|u| &u.name).collect::<Vec<_>>(),
                "shared_buffers": t.tensors.iter().filter(|e| !e.placement.shared_with.is_empty()).count(),
                "stored_quantised": t.tensors.iter().filter(|e| e.placement.stored_dtype.is_some()).count(),
            });
        }
        out
    }

    /// The annotated model recording the plan; `table_file` is the sidecar's name.
    pub fn annotated(&self, table_file: &str) -> ModelProto {
        emit::annotate(&self.original, &self.model.graph, &self.table, table_file)
    }

    /// True when the plan is of a rewritten (split) model rather than of the input file.
    pub fn is_rewritten(&self) -> bool {
        self.table
            .splits
            .as_ref()
            .is_some_and(|s| !s.chains.is_empty())
    }

    /// The annotated model's bytes in memory (for callers that need them as bytes; `plan`
    /// streams them with [`Planned::write_annotated`]), to be written as `model_file` beside
    /// `table_file`. Its SHA-256 goes into the table: as `model.annotated_sha256`, or for a
    /// rewritten model, which the table describes, as its `model` (the file and its digest).
    pub fn annotated_bytes(&mut self, table_file: &str, model_file: &str) -> Vec<u8> {
        use prost::Message;
        let bytes = self.annotated(table_file).encode_to_vec();
        self.record_annotated(model_file, hex(&Sha256::digest(&bytes)));
        bytes
    }

    /// Stages the annotated model as the file `target` (named `model_file`) of `outputs`,
    /// beside the table `table_file`, streamed: payloads that are slices of `source` (the file
    /// the plan was made from) are copied from it. Its SHA-256 (hashed while writing) goes
    /// into the table as in [`Planned::annotated_bytes`].
    pub fn write_annotated(
        &mut self,
        table_file: &str,
        model_file: &str,
        target: &Path,
        source: Option<&ModelFile>,
        outputs: &mut crate::onnx::Outputs,
    ) -> Result<()> {
        let digest = outputs.model(target, &self.annotated(table_file), source, true)?;
        if let Some(digest) = digest {
            self.record_annotated(model_file, hex(&digest));
        }
        Ok(())
    }

    /// Records the SHA-256 of the annotated model `model_file` in the table: as its `model`
    /// for a rewritten model (the table describes it), else as `model.annotated_sha256`.
    fn record_annotated(&mut self, model_file: &str, digest: String) {
        if self.is_rewritten() {
            self.table.model.file = model_file.to_string();
            self.table.model.sha256 = digest;
        } else {
            self.table.model.annotated_sha256 = Some(digest);
        }
    }

    /// Records the SHA-256 of the input file in the table: the model's, or for a split plan
    /// the source's (and the model's too when nothing was rewritten).
    pub fn set_input_digest(&mut self, digest: String) {
        match &mut self.table.splits {
            Some(splits) => {
                if splits.chains.is_empty() {
                    self.table.model.sha256 = digest.clone();
                }
                splits.source.sha256 = digest;
            }
            None => self.table.model.sha256 = digest,
        }
    }
}
