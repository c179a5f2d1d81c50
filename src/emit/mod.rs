//! Outputs of a plan: the allocation table, the annotated model, the space-time diagram.

mod annotate;
mod build;
pub mod header;
pub mod html;
pub mod svg;
pub mod table;

pub use annotate::{annotate, with_inferred_types};
pub use build::{branch_choices, main_arena, member_offsets, naive_bytes, tensor_entries};
pub use header::{HeaderTensors, render_header};
pub use html::render_html;
pub use svg::{ColourBy, render_svg};
pub use table::{
    Arena, BodyEntry, BodyTensor, BranchChoice, DataDependentEntry, FORMAT, HierarchyInfo,
    ModelInfo, OffloadInfo, ParametricInfo, PartitionInfo, Run, SearchEnd, SourceInfo, SplitChain,
    SplitNode, SplitPool, SplitsInfo, Stats, SymbolicEntry, Table, TableOptions, TensorEntry,
    TierInfo, Transfer, UnitInfo, UnitPlacement, WorkspaceEntry, offset_at,
};
