//! The sidecar allocation table (`<stem>.memplan.json`), format `onnx-memplan/1`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format tag written in tables and model metadata.
pub const FORMAT: &str = "onnx-memplan/1";

/// The whole allocation table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Table {
    /// Always [`FORMAT`].
    pub format: String,
    /// The planned model.
    pub model: ModelInfo,
    /// The options the plan was made with.
    pub options: TableOptions,
    /// Indices of the input model's `graph.node` entries in execution order.
    pub schedule: Vec<usize>,
    /// The arenas (one per memory tier; `main` for a flat plan).
    pub arenas: Vec<Arena>,
    /// Plan quality and timing.
    pub stats: Stats,
    /// Every tensor of the top-level graph the runtime holds, once each.
    pub tensors: Vec<TensorEntry>,
}

/// Identity of the planned model file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// File name (no folder).
    pub file: String,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// The model's IR version.
    pub ir_version: i64,
    /// Imported operator sets (the default domain is `""`).
    pub opsets: BTreeMap<String, i64>,
}

/// Planning options as recorded in the table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TableOptions {
    /// Arena alignment in bytes.
    pub alignment: u64,
    /// In-place overwrite enabled.
    pub inplace: bool,
    /// Aliasing enabled.
    pub alias: bool,
    /// Graph inputs and outputs placed in the arena.
    pub include_io: bool,
    /// Symbolic dimension bindings.
    pub dims: BTreeMap<String, i64>,
    /// Input shape overrides.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_shapes: BTreeMap<String, Vec<i64>>,
}

/// One arena.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Arena {
    /// Arena id, referenced by tensors.
    pub id: usize,
    /// Arena name.
    pub name: String,
    /// Arena size in bytes.
    pub bytes: u64,
}

/// Plan quality and timing.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    /// Max over steps of live buffer bytes (after sharing, with alignment padding).
    pub lower_bound_bytes: u64,
    /// Bytes without any reuse (every planned tensor in its own padded buffer).
    pub naive_bytes: u64,
    /// The planner that produced the offsets.
    pub planner: String,
    /// How the execution order was chosen (`stored`, or the memory-aware method that won).
    #[serde(default)]
    pub schedule: String,
    /// The lower bound under the stored order (differs when another order was chosen).
    #[serde(default)]
    pub stored_lower_bound_bytes: u64,
    /// True when the arena is proven minimal for this order and these buffers.
    #[serde(default)]
    pub proven_optimal: bool,
    /// Planning time in milliseconds.
    pub plan_ms: f64,
    /// Whole-pass time in milliseconds.
    pub total_ms: f64,
}

/// One tensor's entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TensorEntry {
    /// Tensor name.
    pub name: String,
    /// Element type (`float32`, ...), when the value is a tensor.
    pub dtype: Option<String>,
    /// Concrete shape, when known.
    pub shape: Option<Vec<i64>>,
    /// Exact size in bytes, when fixed.
    pub bytes: Option<u64>,
    /// `input`, `output`, `intermediate` or `constant`.
    pub kind: String,
    /// Step producing it.
    pub first: usize,
    /// Last step reading it.
    pub last: usize,
    /// Arena id, when planned.
    pub arena: Option<usize>,
    /// Absolute byte offset in the arena, when planned.
    pub offset: Option<u64>,
    /// The tensor whose bytes it overwrites.
    pub inplace_of: Option<String>,
    /// The tensor whose bytes it is.
    pub alias_of: Option<String>,
    /// Bytes from the start of `alias_of` (slice aliases only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_offset: Option<u64>,
}
