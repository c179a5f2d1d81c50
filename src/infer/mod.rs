//! Shape and dtype inference with constant propagation.
//!
//! The driver (`driver.rs`) visits nodes in topological order and applies one rule per operator, looked up
//! in the table assembled by `ops/` (one file per operator family). Rules see a [`NodeCtx`]:
//! the node, its input types, input constants and known shape values, and set the output types.

mod constant_nodes;
mod context;
mod data_dependent;
mod dims;
mod driver;
mod fold;
mod function;
mod input_values;
mod ops;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use crate::ir::Model;

pub use context::{NodeCtx, Rule};
pub use data_dependent::{DataDependentDim, at_bounds, resolved_bounds};

/// How symbolic sizes are bound and how declared types are used.
#[derive(Clone, Debug, Default)]
pub struct InferOptions {
    /// Symbolic dimension bindings (`--dim batch=1`).
    pub dims: BTreeMap<String, i64>,
    /// Integer ranges of symbols left symbolic (`--dim sequence=1..512`): they let rules
    /// prove facts such as `sequence ≤ 128` that decide a Slice's clamping.
    pub ranges: crate::symbolic::Ranges,
    /// Full input shapes by input name (`--input-shape x=1x3x224x224`).
    pub input_shapes: BTreeMap<String, Vec<i64>>,
    /// Input values by input name, as written (`--input-value sr=16000`, `ids=1,2,3`).
    pub input_values: BTreeMap<String, String>,
    /// Use the model's declared output types for operators without a rule.
    pub trust_value_info: bool,
    /// Type data-dependent counts (`NonZero`, ...) at their proven bound instead of as fresh
    /// symbols: the sizes the model is planned at.
    pub data_dependent_at_bound: bool,
    /// With `data_dependent_at_bound`: the values whose contents the typing with the counts
    /// as symbols did not know ([`InferReport::contents_unknown`]). Their contents depend on
    /// a count's actual value, so they are not folded at the bounds either: the model typed
    /// there knows no more than the symbolic one with each count replaced by its bound (an
    /// `If(count == 0)` stays undecided).
    pub count_dependent: BTreeSet<String>,
    /// Initializers decoded already, shared by every model typed with these options (the
    /// split search's trials: rewrites of one model, which share its initializers' bytes).
    pub decoded: Option<std::sync::Arc<crate::ir::Decoded>>,
}

impl InferOptions {
    /// True when the options bind inputs (`--dim`, `--input-shape`, `--input-value`), so that
    /// a model written with the inferred input and output types is specialised to them.
    pub fn binds_shapes(&self) -> bool {
        !self.dims.is_empty() || !self.input_shapes.is_empty() || !self.input_values.is_empty()
    }
}

/// What inference noticed besides the types it set.
#[derive(Clone, Debug, Default)]
pub struct InferReport {
    /// Places where the model's declared value_info disagrees with the inferred type.
    pub disagreements: Vec<String>,
    /// Nodes whose output types were taken from the model's declarations (no rule known).
    pub trusted: Vec<String>,
    /// The data-dependent counts, each a fresh symbol with its bound (empty when typed at the
    /// bound).
    pub data_dependent: Vec<DataDependentDim>,
    /// Node outputs whose contents (a folded value, or a shape value with every element an
    /// expression) inference did not know somewhere it typed them (not kept when typed at the
    /// bounds).
    pub contents_unknown: BTreeSet<String>,
}

/// Infers the type of every value of the model's graphs, in place.
pub fn infer_model(model: &mut Model, options: &InferOptions) -> Result<InferReport> {
    driver::infer_model(model, options)
}
