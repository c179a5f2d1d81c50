//! What a shape rule sees of one node: its inputs (types, constants, shape values), its
//! attributes, and the slots where it writes the output types.

use std::borrow::Cow;
use std::fmt::Display;

use anyhow::Result;

use super::driver::{self, Env};
use super::fold::FOLD_LIMIT;
use crate::infer::InferReport;
use crate::ir::{
    Constant, DType, Dim, Graph, Node, NodeId, Shape, Subgraph, TensorType, ValueType,
};
use crate::onnx::proto::AttributeProto;

/// The most dimensions a shape listed by a tensor of unknown values may have (the shape input of
/// `Reshape`, `Expand` and `ConstantOfShape`): real models use a handful, and a corrupt length must not make
/// inference allocate without bound.
const MAX_LISTED_RANK: usize = 1024;

/// A shape rule: reads the node's inputs through the context and sets its output types.
pub type Rule = fn(&mut NodeCtx) -> Result<()>;

/// What a rule found out about one output.
#[derive(Clone, Debug, Default)]
pub(crate) struct Output {
    /// The inferred type.
    pub ty: Option<ValueType>,
    /// The folded value.
    pub constant: Option<Constant>,
    /// The value of a small integer tensor as dimensions (some possibly symbolic).
    pub dims: Option<Vec<Dim>>,
}

/// Per-value shape values of one graph (`None` where nothing is known), indexed by value id.
pub(crate) type DimsValues = Vec<Option<Vec<Dim>>>;

/// One node under inference.
pub struct NodeCtx<'a> {
    node: &'a Node,
    id: NodeId,
    opset: i64,
    pub(super) graph: &'a Graph,
    pub(super) dims: &'a DimsValues,
    subgraphs: &'a mut Vec<Subgraph>,
    pub(super) env: &'a Env<'a>,
    pub(super) report: &'a mut InferReport,
    pub(super) outputs: Vec<Output>,
}

impl<'a> NodeCtx<'a> {
    /// A context for node `id` of `graph`, whose subgraphs were moved to `subgraphs`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        graph: &'a Graph,
        id: NodeId,
        opset: i64,
        dims: &'a DimsValues,
        subgraphs: &'a mut Vec<Subgraph>,
        env: &'a Env<'a>,
        report: &'a mut InferReport,
    ) -> Self {
        let node = &graph.nodes[id];
        NodeCtx {
            node,
            id,
            opset,
            graph,
            dims,
            subgraphs,
            env,
            report,
            outputs: vec![Output::default(); node.outputs.len()],
        }
    }

    /// The node.
    pub fn node(&self) -> &'a Node {
        self.node
    }

    /// The imported opset version of the node's domain.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// `node 'name' (OpType)` for messages.
    pub fn label(&self) -> String {
        self.node.label(self.id)
    }

    /// `node 'name' (OpType, domain 'd')` for messages about the operator itself.
    pub fn label_with_domain(&self) -> String {
        let who = if self.node.name.is_empty() {
            format!("node #{}", self.id)
        } else {
            format!("node '{}'", self.node.name)
        };
        format!(
            "{who} ({}, domain '{}')",
            self.node.op_type, self.node.domain
        )
    }

    /// An input error about this node.
    pub fn error(&self, msg: impl Display) -> anyhow::Error {
        crate::input_error!("{}: {msg}", self.label())
    }

    /// A proven lower bound of a dimension over the symbols' ranges (see
    /// [`crate::symbolic::min_value`]); `None` when unknown or not provable.
    pub fn dim_min(&self, d: &Dim) -> Option<i64> {
        crate::symbolic::min_value(&d.expr()?, &self.env.options.ranges)
    }

    /// True when a dimension is provably non-negative for every value of its symbols.
    pub fn proven_nonneg(&self, d: &Dim) -> bool {
        self.dim_min(d).is_some_and(|v| v >= 0)
    }

    /// True when `a ≤ b` for every value of the symbols (over their ranges).
    pub fn proven_le(&self, a: &Dim, b: &Dim) -> bool {
        self.proven_nonneg(&super::dims::sub(b, a))
    }

    /// The tighter of two proven bounds of this node's count (see
    /// `data_dependent::tighter`).
    pub fn tighter_bound(&self, a: &Dim, b: &Dim) -> Dim {
        super::data_dependent::tighter(
            a,
            b,
            &|x, y| self.proven_le(x, y),
            &self.report.data_dependent,
        )
    }

    /// A proven upper bound of every element of integer input `i`, read from the constants
    /// it is computed from (see `data_dependent::value_upper_bound`).
    pub fn input_upper_bound(&self, i: usize) -> Option<i64> {
        let id = (*self.node.inputs.get(i)?)?;
        super::data_dependent::value_upper_bound(self.graph, id)
    }

    /// The dimension of this node's data-dependent count, proven at most `bound`: a fresh
    /// symbol (registered in the report under the node's first output), or the bound itself
    /// when typing at the bound. `Unknown` when the bound is. A node with no output sizes
    /// nothing: its count is not registered (the bound is returned).
    pub fn data_dependent(&mut self, bound: &Dim) -> Dim {
        let Some(tensor) = self
            .node
            .outputs
            .iter()
            .flatten()
            .next()
            .map(|&v| self.graph.values[v].name.clone())
        else {
            return bound.clone();
        };
        let options = self.env.options;
        let reserved = |s: &str| options.dims.contains_key(s) || options.ranges.contains_key(s);
        super::data_dependent::count_dim(
            &mut self.report.data_dependent,
            &reserved,
            options.data_dependent_at_bound,
            (&self.node.op_type, &tensor),
            bound,
        )
    }

    // ---- inputs ----

    /// Number of input slots (including omitted optional ones).
    pub fn input_count(&self) -> usize {
        self.node.inputs.len()
    }

    /// True when input `i` is given.
    pub fn has_input(&self, i: usize) -> bool {
        matches!(self.node.inputs.get(i), Some(Some(_)))
    }

    pub(super) fn input_value(&self, i: usize) -> Option<&'a crate::ir::Value> {
        let id = (*self.node.inputs.get(i)?)?;
        Some(&self.graph.values[id])
    }

    /// The type of input `i`, if given and known.
    pub fn input_type(&self, i: usize) -> Option<&'a ValueType> {
        self.input_value(i)?.ty.as_ref()
    }

    /// The type of input `i`; an error when it is missing or untyped.
    pub fn input(&self, i: usize) -> Result<&'a ValueType> {
        let Some(value) = self.input_value(i) else {
            return Err(self.error(format!("input {i} is required but missing")));
        };
        value
            .ty
            .as_ref()
            .ok_or_else(|| self.error(format!("input {i} ('{}') has no known type", value.name)))
    }

    /// The dense tensor type of input `i`.
    pub fn tensor(&self, i: usize) -> Result<&'a TensorType> {
        match self.input(i)? {
            ValueType::Tensor(t) | ValueType::SparseTensor(t) => Ok(t),
            other => Err(self.error(format!("input {i} must be a tensor, not {other}"))),
        }
    }

    /// The element type of tensor input `i`.
    pub fn dtype(&self, i: usize) -> Result<DType> {
        Ok(self.tensor(i)?.dtype)
    }

    /// The shape of tensor input `i` (`None` when its rank is unknown).
    pub fn shape(&self, i: usize) -> Result<Option<&'a [Dim]>> {
        Ok(self.tensor(i)?.shape.as_deref())
    }

    /// The shape of tensor input `i` when given and of known rank.
    pub fn opt_shape(&self, i: usize) -> Option<&'a [Dim]> {
        self.input_type(i)?.as_tensor()?.shape.as_deref()
    }

    /// The rank that 1-D input `i`, a list of sizes whose values are unknown, gives its output:
    /// its length when known. An input error when the length is negative or above
    /// `MAX_LISTED_RANK`.
    pub fn listed_rank(&self, i: usize) -> Result<Option<usize>> {
        let Some(len) = self
            .opt_shape(i)
            .and_then(|s| s.first())
            .and_then(Dim::value)
        else {
            return Ok(None);
        };
        match usize::try_from(len) {
            Ok(rank) if rank <= MAX_LISTED_RANK => Ok(Some(rank)),
            _ => Err(self.error(format!(
                "input {i} lists {len} sizes; a shape has 0 to {MAX_LISTED_RANK} dimensions here"
            ))),
        }
    }

    /// The value of input `i`, when known.
    pub fn constant(&self, i: usize) -> Option<&'a Constant> {
        self.input_value(i)?.constant.as_deref()
    }

    /// The integer elements of input `i`, when its value is known.
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        self.constant(i)?.to_i64_vec()
    }

    /// The floating-point elements of input `i`, when its value is known.
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        self.constant(i)?.to_f64_vec()
    }

    /// The elements of a small integer input `i` as dimensions: from its value when known,
    /// else from shape propagation (e.g. `Shape` of a symbolic tensor).
    pub fn dims_value(&self, i: usize) -> Option<Cow<'a, [Dim]>> {
        let value = self.input_value(i)?;
        if let Some(c) = value.constant.as_deref() {
            if c.shape().len() > 1 || !c.dtype.is_integer() {
                return None;
            }
            return Some(Cow::Owned(
                c.to_i64_vec()?.into_iter().map(Dim::Known).collect(),
            ));
        }
        let id = (*self.node.inputs.get(i)?)?;
        self.dims.get(id)?.as_deref().map(Cow::Borrowed)
    }

    // ---- attributes ----

    /// The attribute of that name.
    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attr(name)
    }

    /// An integer attribute, or `default` when absent.
    pub fn attr_i(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.attr_opt_i(name)?.unwrap_or(default))
    }

    /// An integer attribute, if present.
    pub fn attr_opt_i(&self, name: &str) -> Result<Option<i64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.i.map(Some)
                    .ok_or_else(|| self.error(format!("attribute '{name}' must be an integer")))
            }
        }
    }

    /// A float attribute, or `default` when absent.
    pub fn attr_f(&self, name: &str, default: f32) -> Result<f32> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => {
                a.f.ok_or_else(|| self.error(format!("attribute '{name}' must be a float")))
            }
        }
    }

    /// An integer-list attribute, if present.
    pub fn attr_ints(&self, name: &str) -> Option<&'a [i64]> {
        self.node.attr_ints(name)
    }

    /// A float-list attribute, if present.
    pub fn attr_floats(&self, name: &str) -> Option<&'a [f32]> {
        self.node.attr_floats(name)
    }

    /// A string attribute, if present.
    pub fn attr_s(&self, name: &str) -> Option<String> {
        self.node.attr_string(name)
    }

    /// An element-type attribute (such as Cast's `to`), if present.
    pub fn attr_dtype(&self, name: &str) -> Result<Option<DType>> {
        match self.attr_opt_i(name)? {
            None => Ok(None),
            Some(code) => DType::from_onnx(code as i32)
                .map(Some)
                .ok_or_else(|| self.error(format!("attribute '{name}': unknown data type {code}"))),
        }
    }

    /// An axis attribute normalised into `0..rank`.
    pub fn attr_axis(&self, name: &str, default: i64, rank: usize) -> Result<usize> {
        let axis = self.attr_i(name, default)?;
        self.axis(axis, rank)
    }

    /// Normalises a possibly negative axis into `0..rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        super::dims::normalize_axis(axis, rank)
            .ok_or_else(|| self.error(format!("axis {axis} is out of range for rank {rank}")))
    }

    // ---- outputs ----

    /// Number of output slots.
    pub fn output_count(&self) -> usize {
        self.node.outputs.len()
    }

    /// True when output `i` is requested.
    pub fn has_output(&self, i: usize) -> bool {
        matches!(self.node.outputs.get(i), Some(Some(_)))
    }

    /// Sets the type of output `i` (ignored for slots the node does not have).
    pub fn set(&mut self, i: usize, ty: ValueType) {
        if let Some(out) = self.outputs.get_mut(i) {
            out.ty = Some(ty);
        }
    }

    /// Sets output `i` to a tensor type (`shape` `None` for unknown rank).
    pub fn set_tensor(&mut self, i: usize, dtype: DType, shape: Option<Shape>) {
        self.set(i, ValueType::Tensor(TensorType { dtype, shape }));
    }

    /// Sets output `i` to a tensor of the given shape.
    pub fn set_shape(&mut self, i: usize, dtype: DType, shape: Shape) {
        self.set_tensor(i, dtype, Some(shape));
    }

    /// Sets output `i` to a known value (and its type), when small enough to keep.
    pub fn set_constant(&mut self, i: usize, value: Constant) {
        let shape =
            crate::ir::known_shape(&value.shape().iter().map(|&d| d as i64).collect::<Vec<_>>());
        self.set_shape(i, value.dtype, shape);
        if value.len() <= FOLD_LIMIT
            && let Some(out) = self.outputs.get_mut(i)
        {
            out.constant = Some(value);
        }
    }

    /// Records the elements of small integer output `i` as dimensions.
    pub fn set_dims_value(&mut self, i: usize, dims: Vec<Dim>) {
        if let Some(out) = self.outputs.get_mut(i) {
            out.dims = Some(dims);
        }
    }

    /// Sets everything known about output `i` at once.
    pub(crate) fn set_output(&mut self, i: usize, output: Output) {
        if let Some(out) = self.outputs.get_mut(i) {
            *out = output;
        }
    }

    // ---- subgraphs and functions ----

    /// The subgraph held in the attribute of that name.
    pub fn subgraph(&self, attribute: &str) -> Result<&Graph> {
        self.subgraphs
            .iter()
            .find(|s| s.attribute == attribute)
            .map(|s| &s.graph)
            .ok_or_else(|| self.error(format!("missing graph attribute '{attribute}'")))
    }

    /// Infers the subgraph held in `attribute` with the given input types (`None` keeps the
    /// subgraph's own declaration) and returns the types of its outputs.
    pub fn infer_subgraph(
        &mut self,
        attribute: &str,
        inputs: &[Option<ValueType>],
    ) -> Result<Vec<Option<ValueType>>> {
        let outputs = self.infer_subgraph_outputs(attribute, inputs, &[])?;
        Ok(outputs.into_iter().map(|o| o.ty).collect())
    }

    /// Records why the subgraph in `attribute` cannot run (`None`: it may run).
    pub(crate) fn rule_out(&mut self, attribute: &str, reason: Option<String>) {
        if let Some(sub) = self.subgraphs.iter_mut().find(|s| s.attribute == attribute) {
            sub.ruled_out = reason;
        }
    }

    /// Like [`NodeCtx::infer_subgraph`] with shape values for the inputs (e.g. a sequence's
    /// length), returning the outputs' known values too.
    pub(crate) fn infer_subgraph_outputs(
        &mut self,
        attribute: &str,
        inputs: &[Option<ValueType>],
        input_dims: &[Option<Vec<Dim>>],
    ) -> Result<Vec<Output>> {
        let label = self.label();
        let Some(sub) = self.subgraphs.iter_mut().find(|s| s.attribute == attribute) else {
            return Err(self.error(format!("missing graph attribute '{attribute}'")));
        };
        driver::infer_subgraph(
            &mut sub.graph,
            self.graph,
            self.dims,
            inputs,
            input_dims,
            self.env,
            self.report,
        )
        .map_err(|e| e.context(format!("in subgraph '{attribute}' of {label}")))
    }
}
