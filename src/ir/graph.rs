//! The graph the passes work on: values and nodes indexed by id, lowered from `GraphProto`.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use anyhow::Result;

use super::{Constant, DType, Decoded, TensorType, ValueType};
use crate::bail_input;
use crate::onnx::proto::{
    AttributeProto, GraphProto, TensorProto, ValueInfoProto, attribute_proto::AttributeType,
};

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;
/// Index of a node in [`Graph::nodes`] (equal to its position in `GraphProto.node`).
pub type NodeId = usize;

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A graph input fed at run time.
    Input,
    /// A weight stored in the model.
    Initializer,
    /// Produced by a node of this graph.
    NodeOutput,
    /// Defined in an enclosing graph and read here (subgraphs only).
    OuterScope,
}

/// A named value of a graph.
#[derive(Clone, Debug)]
pub struct Value {
    /// The tensor name.
    pub name: String,
    /// Where the value comes from.
    pub kind: ValueKind,
    /// The inferred type (or the given type, for inputs and initializers).
    pub ty: Option<ValueType>,
    /// The type the model itself declares (value_info or graph output), if any.
    pub declared: Option<ValueType>,
    /// The value, when known before run time.
    pub constant: Option<Arc<Constant>>,
    /// The node producing it.
    pub producer: Option<NodeId>,
    /// The nodes reading it (once per reading node, in node order).
    pub consumers: Vec<NodeId>,
    /// True when it is a graph output.
    pub is_output: bool,
    /// Computed by a node whose inputs are all constants, so it is itself a constant: a runtime
    /// computes it once at load time, as onnxruntime's constant folding does (set by inference).
    pub folded: bool,
}

impl Value {
    fn new(name: &str, kind: ValueKind) -> Self {
        Value {
            name: name.to_string(),
            kind,
            ty: None,
            declared: None,
            constant: None,
            producer: None,
            consumers: Vec::new(),
            is_output: false,
            folded: false,
        }
    }

    /// The inferred dense tensor type, if the value is a tensor with a known type.
    pub fn tensor_type(&self) -> Option<&TensorType> {
        self.ty.as_ref()?.as_tensor()
    }

    /// The shape of a tensor value whose every dimension is known.
    pub fn concrete_shape(&self) -> Option<Vec<i64>> {
        self.tensor_type()?.concrete_shape()
    }
}

/// A subgraph held in a graph-valued attribute of a node (If branches, Loop/Scan bodies).
#[derive(Clone, Debug)]
pub struct Subgraph {
    /// The attribute name (`then_branch`, `body`, ...).
    pub attribute: String,
    /// The lowered subgraph.
    pub graph: Graph,
    /// Why this `If` branch cannot run for the planned inputs (set by inference): it is then
    /// neither checked further nor planned.
    pub ruled_out: Option<String>,
}

/// One operator invocation.
#[derive(Clone, Debug)]
pub struct Node {
    /// Node name (may be empty or repeated in real models).
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// Operator domain, with `ai.onnx` normalised to the empty string.
    pub domain: String,
    /// Inputs; `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs; `None` for an omitted optional output.
    pub outputs: Vec<Option<ValueId>>,
    /// Attributes as stored in the model.
    pub attributes: Vec<AttributeProto>,
    /// Lowered graph-valued attributes.
    pub subgraphs: Vec<Subgraph>,
    /// Values of this graph read from inside the subgraphs (the node reads them too).
    pub captures: Vec<ValueId>,
}

impl Node {
    /// A readable label for messages: `'name' (OpType)` or `#index (OpType)`.
    pub fn label(&self, id: NodeId) -> String {
        if self.name.is_empty() {
            format!("node #{id} ({})", self.op_type)
        } else {
            format!("node '{}' ({})", self.name, self.op_type)
        }
    }

    /// The attribute of that name.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attributes.iter().find(|a| a.name() == name)
    }

    /// An integer attribute.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }

    /// A float attribute.
    pub fn attr_float(&self, name: &str) -> Option<f32> {
        self.attr(name).and_then(|a| a.f)
    }

    /// An integer-list attribute.
    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }

    /// A float-list attribute.
    pub fn attr_floats(&self, name: &str) -> Option<&[f32]> {
        self.attr(name).map(|a| a.floats.as_slice())
    }

    /// A string attribute (lossy UTF-8).
    pub fn attr_string(&self, name: &str) -> Option<String> {
        self.attr(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }

    /// A tensor attribute.
    pub fn attr_tensor(&self, name: &str) -> Option<&TensorProto> {
        self.attr(name).and_then(|a| a.t.as_deref())
    }

    /// The subgraph held in the attribute of that name.
    pub fn subgraph(&self, attribute: &str) -> Option<&Graph> {
        self.subgraphs
            .iter()
            .find(|s| s.attribute == attribute)
            .map(|s| &s.graph)
    }
}

/// A computation graph with resolved value references.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Graph name.
    pub name: String,
    /// Every value: inputs, initializers, node outputs, outer-scope references.
    pub values: Vec<Value>,
    /// Nodes in the stored order.
    pub nodes: Vec<Node>,
    /// Graph inputs fed at run time, in declaration order.
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in declaration order.
    pub outputs: Vec<ValueId>,
    /// Values defined by enclosing graphs (subgraphs only).
    pub outer_scope: Vec<ValueId>,
    /// The Split nodes that scatter a graph input (main graph only; see
    /// [`super::scatter_nodes`]): the runtime writes the input into their outputs, which are
    /// live from the first step, and the input itself takes no arena bytes.
    pub scatters: Vec<NodeId>,
    /// The QDQ node units the runtime runs as one integer kernel each (main graph only, set
    /// by the `units` stage; empty when the graph is run literally).
    pub units: Vec<NodeUnit>,
    /// For each node, the units of `units` it belongs to or is a shared DQ of: built on first
    /// use ([`Graph::units_of`]), and cleared by the `units` stage when it sets `units`.
    pub(crate) unit_index: std::sync::OnceLock<Vec<Vec<usize>>>,
    index: FxHashMap<String, ValueId>,
}

/// A QDQ node unit: DequantizeLinear nodes, one operator and its QuantizeLinear nodes, run
/// as one integer kernel. Its float tensors (the DQ outputs, the operator's outputs read by
/// the Qs) live inside the kernel and take no arena bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeUnit {
    /// The unit's name: the operator node's name (or `#index` when it has none).
    pub name: String,
    /// The operator node.
    pub op: NodeId,
    /// Every node of the unit: its DQ nodes, the operator, its Q nodes (they run as one
    /// contiguous span). A DQ whose output several nodes read is in none of them.
    pub nodes: Vec<NodeId>,
    /// The DQ nodes whose output this unit reads along with other nodes (onnxruntime gives
    /// each reader its own copy of such a DQ): the unit reads the DQ's integer input. Each
    /// runs at a step of its own; its output is internal to every unit reading it when only
    /// units read it, and otherwise a planned tensor that the nodes outside units read.
    pub shared: Vec<NodeId>,
    /// The float tensors inside the unit.
    pub internal: Vec<ValueId>,
}

impl Graph {
    /// The units of [`Graph::units`] (their indices, in order) that node `n` belongs to or is
    /// a shared DQ of.
    pub fn units_of(&self, n: NodeId) -> &[usize] {
        let index = self.unit_index.get_or_init(|| {
            let mut index = vec![Vec::new(); self.nodes.len()];
            for (u, unit) in self.units.iter().enumerate() {
                for &m in unit.nodes.iter().chain(&unit.shared) {
                    if index[m].last() != Some(&u) {
                        index[m].push(u);
                    }
                }
            }
            index
        });
        index.get(n).map_or(&[], Vec::as_slice)
    }

    /// The value of that name.
    pub fn value_id(&self, name: &str) -> Option<ValueId> {
        self.index.get(name).copied()
    }

    /// The value of that name.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.value_id(name).map(|id| &self.values[id])
    }

    /// The graph input of that name (`None` when no input has it).
    pub fn input_id(&self, name: &str) -> Option<ValueId> {
        self.inputs
            .iter()
            .copied()
            .find(|&i| self.values[i].name == name)
    }

    /// True for model constants: initializers, outputs of default-domain `Constant` nodes and
    /// values folded by inference (see [`Value::folded`]).
    pub fn is_model_constant(&self, id: ValueId) -> bool {
        let value = &self.values[id];
        value.kind == ValueKind::Initializer
            || value.folded
            || value.producer.is_some_and(|p| {
                let node = &self.nodes[p];
                node.op_type == "Constant" && node.domain.is_empty()
            })
    }

    fn add_value(&mut self, name: &str, kind: ValueKind) -> ValueId {
        let id = self.values.len();
        self.values.push(Value::new(name, kind));
        self.index.insert(name.to_string(), id);
        id
    }

    /// Lowers a top-level `GraphProto`; every name a node reads must be defined.
    pub fn from_proto(proto: &GraphProto) -> Result<Graph> {
        Graph::from_proto_sharing(proto, None)
    }

    /// [`Graph::from_proto`], taking its initializers' decoded values from `decoded` when
    /// given (see [`Decoded`]).
    pub fn from_proto_sharing(proto: &GraphProto, decoded: Option<&Decoded>) -> Result<Graph> {
        let (graph, outer) = Graph::lower(proto, decoded)?;
        if let Some(&id) = outer.first() {
            let name = &graph.values[id].name;
            let reader = graph.values[id]
                .consumers
                .first()
                .map(|&n| graph.nodes[n].label(n))
                .unwrap_or_else(|| "a graph output".to_string());
            bail_input!(
                "{reader} reads tensor '{name}', which no node, input or initializer defines"
            );
        }
        Ok(graph)
    }

    /// Lowers a graph; names not defined in it become outer-scope values, returned too.
    fn lower(proto: &GraphProto, decoded: Option<&Decoded>) -> Result<(Graph, Vec<ValueId>)> {
        let mut g = Graph {
            name: proto.name().to_string(),
            ..Graph::default()
        };
        for init in &proto.initializer {
            if g.index.contains_key(init.name()) {
                bail_input!("initializer '{}' is defined twice", init.name());
            }
            let id = g.add_value(init.name(), ValueKind::Initializer);
            let value = &mut g.values[id];
            value.ty = DType::from_onnx(init.data_type())
                .map(|dtype| ValueType::tensor(dtype, super::known_shape(&init.dims)));
            if worth_decoding(init) {
                let constant = match decoded {
                    Some(decoded) => decoded.decode(init),
                    None => Constant::from_proto(init).map(|c| c.map(Arc::new)),
                };
                value.constant = constant
                    .map_err(|e| crate::input_error!("initializer '{}': {e}", init.name()))?;
            }
        }
        for sparse in &proto.sparse_initializer {
            let Some(values) = sparse.values.as_ref() else {
                continue;
            };
            let id = g.add_value(values.name(), ValueKind::Initializer);
            g.values[id].ty = DType::from_onnx(values.data_type())
                .map(|dtype| ValueType::tensor(dtype, super::known_shape(&sparse.dims)));
        }
        for input in &proto.input {
            match g.value_id(input.name()) {
                // Inputs that repeat an initializer (IR < 4) keep the initializer as default.
                Some(id) => g.values[id].declared = declared_type(input),
                None => {
                    let id = g.add_value(input.name(), ValueKind::Input);
                    g.values[id].ty = declared_type(input);
                    g.values[id].declared = declared_type(input);
                    g.inputs.push(id);
                }
            }
        }
        for (node_id, node) in proto.node.iter().enumerate() {
            for out in node.output.iter().filter(|o| !o.is_empty()) {
                if let Some(&prev) = g.index.get(out) {
                    let what = match g.values[prev].producer {
                        Some(p) => format!("by {}", label(proto, p)),
                        None => "as a graph input or initializer".to_string(),
                    };
                    bail_input!(
                        "{} writes tensor '{out}', already defined {what}",
                        label(proto, node_id)
                    );
                }
                let id = g.add_value(out, ValueKind::NodeOutput);
                g.values[id].producer = Some(node_id);
            }
        }
        for vi in &proto.value_info {
            if let Some(id) = g.value_id(vi.name()) {
                g.values[id].declared = declared_type(vi);
            }
        }
        let mut nodes = Vec::with_capacity(proto.node.len());
        for (node_id, node) in proto.node.iter().enumerate() {
            let domain = super::model::normalise_domain(node.domain());
            let mut lowered = Node {
                name: node.name().to_string(),
                op_type: node.op_type().to_string(),
                domain: domain.to_string(),
                inputs: Vec::with_capacity(node.input.len()),
                outputs: node
                    .output
                    .iter()
                    .map(|o| (!o.is_empty()).then(|| g.index[o]))
                    .collect(),
                attributes: node.attribute.clone(),
                subgraphs: Vec::new(),
                captures: Vec::new(),
            };
            for name in &node.input {
                if name.is_empty() {
                    lowered.inputs.push(None);
                    continue;
                }
                let id = g.resolve(name);
                lowered.inputs.push(Some(id));
            }
            for attr in &node.attribute {
                let graphs: Vec<&GraphProto> = match attr.r#type() {
                    AttributeType::Graph => attr.g.as_deref().into_iter().collect(),
                    AttributeType::Graphs => attr.graphs.iter().collect(),
                    _ => attr.g.as_deref().into_iter().chain(attr.graphs.iter()).collect(),
                };
                for sub in graphs {
                    let (body, outer) = Graph::lower(sub, decoded).map_err(|e| {
                        e.context(format!(
                            "in subgraph '{}' of {}",
                            attr.name(),
                            label(proto, node_id)
                        ))
                    })?;
                    for &o in &outer {
                        let id = g.resolve(&body.values[o].name);
                        if !lowered.captures.contains(&id) {
                            lowered.captures.push(id);
                        }
                    }
                    lowered.subgraphs.push(Subgraph {
                        attribute: attr.name().to_string(),
                        graph: body,
                        ruled_out: None,
                    });
                }
            }
            let mut readers: Vec<ValueId> = lowered.inputs.iter().flatten().copied().collect();
            readers.extend(&lowered.captures);
            readers.sort_unstable();
            readers.dedup();
            for id in readers {
                g.values[id].consumers.push(node_id);
            }
            nodes.push(lowered);
        }
        g.nodes = nodes;
        for out in &proto.output {
            let id = g.resolve(out.name());
            let value = &mut g.values[id];
            value.is_output = true;
            if value.declared.is_none() {
                value.declared = declared_type(out);
            }
            g.outputs.push(id);
        }
        let outer = g.outer_scope.clone();
        Ok((g, outer))
    }

    /// The value of that name, creating an outer-scope reference for unknown names.
    fn resolve(&mut self, name: &str) -> ValueId {
        match self.index.get(name) {
            Some(&id) => id,
            None => {
                let id = self.add_value(name, ValueKind::OuterScope);
                self.outer_scope.push(id);
                id
            }
        }
    }
}

/// Integer initializers up to this many elements are decoded for constant folding (shapes,
/// axes, indices); float ones only when tiny (scales, ranges, clip bounds), so float weights
/// are never decoded. Integer weights of an int8 network up to this size are (the split's
/// trials share them through [`Decoded`]).
const INT_DECODE_LIMIT: i64 = 1 << 16;
/// See [`INT_DECODE_LIMIT`].
const FLOAT_DECODE_LIMIT: i64 = 64;

fn worth_decoding(init: &TensorProto) -> bool {
    let Some(elements) = init.dims.iter().try_fold(1i64, |n, &d| n.checked_mul(d)) else {
        return false;
    };
    match DType::from_onnx(init.data_type()) {
        Some(d) if d.is_float() => elements <= FLOAT_DECODE_LIMIT,
        Some(_) => elements <= INT_DECODE_LIMIT,
        None => false,
    }
}

fn declared_type(vi: &ValueInfoProto) -> Option<ValueType> {
    vi.r#type.as_ref().and_then(ValueType::from_proto)
}

fn label(proto: &GraphProto, id: usize) -> String {
    let node = &proto.node[id];
    if node.name().is_empty() {
        format!("node #{id} ({})", node.op_type())
    } else {
        format!("node '{}' ({})", node.name(), node.op_type())
    }
}
