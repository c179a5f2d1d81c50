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
    /// Plan quality (no timings: the same input and options give the same table).
    pub stats: Stats,
    /// Every tensor of the top-level graph the runtime holds, once each.
    pub tensors: Vec<TensorEntry>,
    /// Each `If` (at any depth) of which only one branch can run for the planned inputs: the
    /// taken branch is the one planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<BranchChoice>,
    /// Memory-hierarchy mode (`--tier`): the estimated cost before and after the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<HierarchyInfo>,
    /// Device-budget mode (`--budget`): the host transfers that keep the plan within budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadInfo>,
    /// Heterogeneous-units mode (`--partition`): the compute units and their rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionInfo>,
    /// Split mode (`--split auto`): the chains of operators cut into tiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splits: Option<SplitsInfo>,
    /// A plan over ranges of sizes (`--dim NAME=LO..HI`): the parametric plan's arena.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parametric: Option<ParametricInfo>,
    /// The counts known only at run time (`NonZero`, `NonMaxSuppression`, ...), each a
    /// symbol with its proven bound; the tensors they size are planned at the bounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_dependent: Vec<DataDependentEntry>,
}

/// A count known only at run time: the symbol standing for it and its proven bound.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DataDependentEntry {
    /// The symbol (`nonzero_0`), as it appears in the tensors' `shape_expr`.
    pub symbol: String,
    /// The operator deciding it (`NonZero`, `NonMaxSuppression`, `Unique`, `Compress`,
    /// `TopK`, `Loop`).
    pub op: String,
    /// The first output of the node deciding it.
    pub tensor: String,
    /// The proven bound (an expression in the range symbols and earlier counts): the count
    /// lies in `0..=bound`.
    pub bound: String,
}

/// The parametric plan of a table planned over ranges: its arena as an expression in the
/// symbols (grammar in docs/format.md), and at the upper corner of the ranges.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ParametricInfo {
    /// The arena: the max of the ends of the topmost tensors (`max($3, $7)`).
    pub arena_expr: String,
    /// `arena_expr` with every symbol at the upper end of its range.
    pub arena_at_max: u64,
    /// How the verifier proved the plan for every point: `exhaustive` (every point of the
    /// ranges, at most 4096) or `symbolic` (monotone sizes and placement chains).
    pub proof: String,
}

/// An `If` of which one branch is ruled out for the planned inputs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BranchChoice {
    /// The node, as a path from the top-level graph: the names (or `#index`) of the enclosing
    /// nodes and branch attributes, e.g. `If_0/else_branch/If_3`.
    pub node: String,
    /// The branch that runs (`then_branch` or `else_branch`).
    pub taken: String,
    /// Why the other cannot: its condition folded, or it fails for these inputs.
    pub reason: String,
}

/// Identity of the planned model file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// File name (no folder).
    pub file: String,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// SHA-256 of the annotated model written with the table, which `verify` accepts as well
    /// as the file (absent for a split plan, whose `sha256` is the annotated model's, and for
    /// a table written without a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotated_sha256: Option<String>,
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
    /// Input values bound with `--input-value` (as written, e.g. `"16000"` or `"1,2,3"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_values: BTreeMap<String, String>,
    /// The annotated model's graph inputs and outputs carry the bound (inferred) shapes instead
    /// of the declared ones: set whenever `dims`, `input_shapes` or `input_values` bind something.
    #[serde(default)]
    pub specialised_io: bool,
    /// Symbols planned over an inclusive integer range (`--dim NAME=LO..HI`): name →
    /// `[LO, HI]`. The table's `shape`, `bytes`, `offset` and `arenas` are then the
    /// upper-bound plan at every symbol's `HI`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ranges: BTreeMap<String, [i64; 2]>,
    /// For a model with QuantizeLinear or DequantizeLinear nodes, how they run (`--qdq`):
    /// `units` (each QDQ node unit as one integer kernel) or `literal` (node by node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdq: Option<String>,
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
    /// The memory tier this arena lives in (hierarchy mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<TierInfo>,
}

/// What `--split auto` did. When `chains` is not empty, the table's `model` is the rewritten
/// model (the annotated model written beside the table, whose schedule is its node order) and
/// `source` is the model the pass was given.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SplitsInfo {
    /// The model the pass was given.
    pub source: SourceInfo,
    /// Extra multiply-accumulates allowed, percent of the source model's total.
    pub overhead_pct: f64,
    /// Arena bytes of the plan before splitting.
    pub arena_before: u64,
    /// Arena bytes of the plan after splitting.
    pub arena_after: u64,
    /// Multiply-accumulates of the source model (Conv, ConvTranspose, MatMul, Gemm).
    pub total_macs: u64,
    /// Multiply-accumulates the tiles recompute (halos), all chains together.
    pub extra_macs: u64,
    /// The chains split, in the order they were chosen.
    pub chains: Vec<SplitChain>,
}

/// The input model of a split plan.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SourceInfo {
    /// File name (no folder).
    pub file: String,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
}

/// One chain cut into a grid of tiles of its output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SplitChain {
    /// The chain's output tensor (assembled under its original name).
    pub output: String,
    /// Tiles along H and along W.
    pub grid: [usize; 2],
    /// Each tile's part of the output, `[[row_start, row_end], [col_start, col_end]]`
    /// (half-open), row by row.
    pub tiles: Vec<[[i64; 2]; 2]>,
    /// Multiply-accumulates the tiles recompute.
    pub extra_macs: u64,
    /// Row blocks: the axis of the output the blocks cut (`grid` is then `[blocks, 1]` and
    /// each tile is `[[start, end], [0, 0]]`, rows along that axis). Absent for H/W tiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
    /// H/W tiles of a token-major output: the axis holding its positions row by row (token
    /// `h·W + w`); `tiles` are then rows and columns of that H × W grid. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_axis: Option<usize>,
    /// H/W tiles of an output whose H and W are on other axes than NCHW's (channels-last
    /// NHWC: `[1, 2]`): those axes. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_axes: Option<[usize; 2]>,
    /// Arena bytes once this chain (and the ones before it) are split.
    pub arena_after: u64,
    /// The source model's nodes the chain replaces, in execution order.
    pub nodes: Vec<SplitNode>,
    /// The Slice and Concat nodes the split added.
    pub glue: Vec<String>,
    /// Another chain (its index in the chains, before or after this one) whose tiles read
    /// this chain's parts of its output directly, as bands: `output` is not assembled, and no
    /// tensor of the rewritten model has that name. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_as_bands_by: Option<usize>,
    /// A nested chain: the earlier chains (their indices) whose tiles or glue it cuts again.
    /// Its `nodes` name those nodes, which its own tiles replace, so they are no longer in the
    /// rewritten model. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub within: Vec<usize>,
    /// Global pools (GlobalAveragePool, ReduceMean over H and W...) of a tensor this chain's
    /// tiles read as bands, each replaced by a reduction of every band and their
    /// combination. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<SplitPool>,
}

/// A source model's global pool that reads bands: the nodes replacing it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SplitPool {
    /// The node's name in the source model (`#INDEX` when it has none).
    pub node: String,
    /// Its operator.
    pub op_type: String,
    /// The nodes replacing it, in execution order: one reduction per band, then the
    /// combination (Sum, Max or Min; for a mean, a Cast of the count and a Div).
    pub by: Vec<String>,
}

/// A source node and the tile nodes replacing it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SplitNode {
    /// The node's name in the source model (`#INDEX` when it has none).
    pub node: String,
    /// Its operator.
    pub op_type: String,
    /// The nodes replacing it, one per tile, in the order of `tiles`.
    pub tiles: Vec<String>,
    /// The part of its output each tile computes, like `SplitChain::tiles`.
    pub regions: Vec<[[i64; 2]; 2]>,
    /// Output positions (rows × columns) computed more than once, summed over the tiles.
    pub halo: i64,
    /// Multiply-accumulates recomputed in the halo.
    pub extra_macs: u64,
    /// Row blocks: the axis of this node's output the blocks cut (regions as in
    /// `SplitChain::axis`). Absent for H/W tiles and for a node every block recomputes whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
    /// H/W tiles of a token-major node: the axis of its output holding the positions row by
    /// row (regions as in `SplitChain::token_axis`). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_axis: Option<usize>,
    /// H/W tiles of a node whose output has H and W on other axes than NCHW's: those axes.
    /// Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_axes: Option<[usize; 2]>,
    /// Row blocks quantized in passes: the node's copies in the passes before the last, pass
    /// by pass, one per block in order, when it makes a quantizer's input. Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_pass: Vec<String>,
}

/// A memory tier's capacity and speed, as given by `--tier`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TierInfo {
    /// Bytes the tier holds.
    pub capacity: u64,
    /// Cycles to start a transfer into or out of the tier.
    pub latency: f64,
    /// Bytes moved per cycle.
    pub bandwidth: f64,
}

/// The hierarchy search's outcome, scored by S1's estimated time E(s) in cycles.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HierarchyInfo {
    /// Steps per search segment.
    pub segment: usize,
    /// E(s) of the initial placement.
    pub cost_initial: f64,
    /// E(s) after the improvement search.
    pub cost_final: f64,
    /// Actions the search kept (moves, reuses, swaps).
    pub actions: usize,
    /// Per tier, the mean over steps of the fraction of its capacity in use.
    pub fill: Vec<f64>,
}

/// The offload schedule under a device budget.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OffloadInfo {
    /// Device bytes allowed.
    pub budget: u64,
    /// The planner whose plan is used (`segments`, `spill`, or `none needed`).
    pub method: String,
    /// Bytes moved between host and device by `transfers`.
    pub migrated_bytes: u64,
    /// Bytes S4's segment planner migrates (`None`: it found no plan within the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments_migrated_bytes: Option<u64>,
    /// Bytes the spill planner migrates (`None`: it found no plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_migrated_bytes: Option<u64>,
    /// The baseline policy measured in the same run.
    pub baseline: String,
    /// Bytes the baseline policy moves (`None` when it cannot fit some step).
    pub baseline_migrated_bytes: Option<u64>,
    /// Every move to host and back.
    pub transfers: Vec<Transfer>,
}

/// A buffer waits in host memory between two uses: it leaves the device after step
/// `out_after` and is back before step `in_before`, at `in_offset` (its old offset when
/// absent; the aliases move with it and keep their distance); the tensors it holds are not
/// resident on the steps strictly between.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Transfer {
    /// The tensor whose bytes move.
    pub tensor: String,
    /// Other tensors holding the same bytes over the gap (aliases); they are away too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Step after which it leaves the device.
    pub out_after: usize,
    /// Step before which it is back.
    pub in_before: usize,
    /// Where `tensor` comes back (arena byte offset); absent: where it left from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_offset: Option<u64>,
    /// Bytes of the buffer.
    pub bytes: u64,
    /// False when the host already holds these contents (only the copy back in is made).
    pub copy_out: bool,
}

impl Transfer {
    /// Bytes this transfer moves, both ways.
    pub fn migrated(&self) -> u64 {
        self.bytes * (1 + u64::from(self.copy_out))
    }
}

/// The compute units of a partition, and the subgraphs planned level by level.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PartitionInfo {
    /// The units, by name.
    pub units: Vec<UnitInfo>,
    /// Workspaces of the nodes holding subgraphs (If, Loop, Scan), in the arena.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspaces: Vec<WorkspaceEntry>,
    /// Nodes whose subgraphs could not be planned, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unplanned: Vec<String>,
}

/// The bytes a node holding subgraphs needs while it runs, and the plans of its subgraphs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WorkspaceEntry {
    /// Index of the node in its graph's `node` list.
    pub node: usize,
    /// The node's step in its graph.
    pub step: usize,
    /// Offset: absolute in arena 0 at the top level, else from the enclosing body's start.
    pub offset: u64,
    /// Bytes reserved.
    pub bytes: u64,
    /// One plan per subgraph attribute; each starts at `offset`.
    pub bodies: Vec<BodyEntry>,
}

/// The plan of one subgraph (no in-place or alias sharing inside it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BodyEntry {
    /// The attribute holding it (`then_branch`, `body`, ...).
    pub attribute: String,
    /// Bytes its plan needs.
    pub bytes: u64,
    /// Its tensors, offsets from the workspace start, steps in the body's own order.
    pub tensors: Vec<BodyTensor>,
    /// Workspaces of its own nodes holding subgraphs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspaces: Vec<WorkspaceEntry>,
}

/// One tensor of a subgraph.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BodyTensor {
    /// Tensor name.
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// First step live (in the body).
    pub first: usize,
    /// Last step live.
    pub last: usize,
    /// Offset from the workspace start.
    pub offset: u64,
}

/// One compute unit's rules.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct UnitInfo {
    /// Unit name.
    pub name: String,
    /// Offsets of its buffers are multiples of this.
    pub alignment: u64,
    /// Outputs feeding quantisation nodes are stored in the quantised dtype.
    pub quantize_outputs: bool,
    /// Nodes assigned to it.
    pub nodes: usize,
}

/// Plan quality (no timings: the same input and options give the same table).
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
    /// Every planner search that ran and what ended it (see [`SearchEnd`]).
    #[serde(default)]
    pub searches: Vec<SearchEnd>,
}

/// One planner search and what ended it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SearchEnd {
    /// The planner's name.
    pub planner: String,
    /// `complete` (it finished on its own), `work-budget` (it spent its deterministic work
    /// allowance), `time-limit` (the wall-clock safety stop fired: only then may a re-run give
    /// other offsets) or `cancelled`.
    pub ended_by: String,
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
    /// Byte strides per axis of a tensor laid out as a strided view (absent: row-major).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<u64>>,
    /// For a scattered graph input: the Split node whose outputs the runtime writes it into
    /// (the input itself takes no arena bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scattered_by: Option<String>,
    /// A `fused` tensor: the QDQ node unit (its operator's name, or `#index`) it lives in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_unit: Option<String>,
    /// Placement extras of the advanced modes (partition units, stored dtype).
    #[serde(flatten)]
    pub placement: UnitPlacement,
    /// Sizes and offsets as expressions in the symbols of a range plan (empty otherwise).
    #[serde(flatten)]
    pub symbolic: SymbolicEntry,
}

/// A tensor's sizes and offset as expressions (grammar in docs/format.md), in a table
/// planned over ranges, or for a tensor sized by a data-dependent count; every field is absent
/// otherwise.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SymbolicEntry {
    /// Each dimension's expression; absent when one cannot be formed (see `upper_bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape_expr: Option<Vec<String>>,
    /// Bytes as an expression; a constant when the tensor is planned at its upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_expr: Option<String>,
    /// The parametric plan's offset (arena tensors only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_expr: Option<String>,
    /// True when `bytes_expr` is a bound of the tensor's size rather than its exact size: its
    /// size at the upper corner (no expression could be formed), or its size with every
    /// data-dependent count at its bound (`shape_expr` then names the counts).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upper_bound: bool,
    /// Why the tensor is planned at its upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound_reason: Option<String>,
}

/// Where a tensor sits among compute units (partition mode; empty otherwise).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnitPlacement {
    /// The unit producing it (or, for a graph input, its first reader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Other units reading it: the buffer is shared across a unit boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// The dtype it is stored in when it differs from `dtype` (quantised outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_dtype: Option<String>,
    /// Bytes stored when they differ from `bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_bytes: Option<u64>,
    /// Offset alignment required by its units, when stricter than the table's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment: Option<u64>,
}

/// A stretch of a tensor's lifetime, steps `first..=last`: resident at `offset`, or waiting
/// in host memory (`offset: None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// First step of the stretch.
    pub first: usize,
    /// Last step of the stretch.
    pub last: usize,
    /// Arena byte offset while resident; `None` while in host memory.
    pub offset: Option<u64>,
}

impl Table {
    /// Each tensor's lifetime (indexed like `tensors`) cut into runs by the host transfers.
    /// A tensor that never leaves has one run at its offset; unplaced tensors have none.
    /// Transfers apply in the order they come back: `in_offset` moves the named tensor there
    /// and its aliases by the same distance (an offset that would fall below 0 becomes
    /// `u64::MAX`, which no arena holds).
    pub fn runs(&self) -> Vec<Vec<Run>> {
        let index: std::collections::HashMap<&str, usize> = self
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), i))
            .collect();
        let mut current: Vec<Option<u64>> = self.tensors.iter().map(|t| t.offset).collect();
        let mut moves: Vec<Vec<(usize, usize, u64)>> = vec![Vec::new(); self.tensors.len()];
        let mut transfers: Vec<&Transfer> =
            self.offload.iter().flat_map(|o| &o.transfers).collect();
        transfers.sort_by_key(|t| (t.in_before, t.out_after));
        for t in transfers {
            let Some(main) = index.get(t.tensor.as_str()).and_then(|&i| current[i]) else {
                continue;
            };
            let shift = i128::from(t.in_offset.unwrap_or(main)) - i128::from(main);
            for name in std::iter::once(&t.tensor).chain(&t.aliases) {
                if let Some(&i) = index.get(name.as_str())
                    && let Some(at) = current[i]
                {
                    let moved = u64::try_from(i128::from(at) + shift).unwrap_or(u64::MAX);
                    current[i] = Some(moved);
                    moves[i].push((t.out_after, t.in_before, moved));
                }
            }
        }
        self.tensors
            .iter()
            .zip(moves)
            .map(|(entry, mut moves)| {
                let Some(mut offset) = entry.offset else {
                    return Vec::new();
                };
                moves.sort_unstable();
                let mut runs = Vec::new();
                let mut at = entry.first;
                for (out_after, in_before, moved) in moves {
                    if out_after >= at {
                        runs.push(Run {
                            first: at,
                            last: out_after,
                            offset: Some(offset),
                        });
                    }
                    if in_before > out_after + 1 {
                        runs.push(Run {
                            first: out_after + 1,
                            last: in_before - 1,
                            offset: None,
                        });
                    }
                    at = in_before;
                    offset = moved;
                }
                if at <= entry.last {
                    runs.push(Run {
                        first: at,
                        last: entry.last,
                        offset: Some(offset),
                    });
                }
                runs
            })
            .collect()
    }
}

/// The offset a tensor has at `step` per its runs: that of the latest resident run starting
/// at or before `step` (the first resident run before its life begins).
pub fn offset_at(runs: &[Run], step: usize) -> Option<u64> {
    let mut resident = runs.iter().filter_map(|r| Some((r.first, r.offset?)));
    let first = resident.next()?;
    Some(
        resident
            .take_while(|&(from, _)| from <= step)
            .last()
            .unwrap_or(first)
            .1,
    )
}

impl TensorEntry {
    /// Bytes the tensor occupies in its arena: a strided view's footprint, else
    /// `stored_bytes` when set, else `bytes`.
    pub fn extent(&self) -> u64 {
        if let (Some(strides), Some(shape), Some(bytes)) = (&self.strides, &self.shape, self.bytes)
        {
            // A strided view spans from its first element to the end of its last (past the
            // address space, for a shape or strides no memory holds: it fits no arena).
            let Some(count) = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d)) else {
                return u64::MAX;
            };
            if count <= 0 {
                return 0;
            }
            let elem = bytes / count as u64;
            let reach = shape
                .iter()
                .zip(strides)
                .map(|(&d, &s)| (d.max(1) as u64 - 1).saturating_mul(s))
                .fold(0, u64::saturating_add);
            return reach.saturating_add(elem);
        }
        self.placement.stored_bytes.or(self.bytes).unwrap_or(0)
    }
}
