//! The nodes a rewrite adds around the copies of a chain (Slices of the tensors made before
//! it, the Concat assembling its output, their int64 constants), with fresh names.

use rustc_hash::{FxHashMap, FxHashSet};

use bytes::Bytes;

use crate::ir::{DType, Graph, NodeId};
use crate::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto, attribute_proto::AttributeType, tensor_shape_proto::Dimension,
    tensor_shape_proto::dimension, type_proto,
};

/// Accumulates the nodes and constants of one rewrite.
pub struct Glue {
    /// Names taken so far.
    pub names: Names,
    /// The new nodes, in execution order.
    pub nodes: Vec<NodeProto>,
    /// The new initializers.
    pub initializers: Vec<TensorProto>,
    /// The names of the Slice and Concat nodes added.
    pub glue: Vec<String>,
    /// The tag of this rewrite's new names (e.g. `split1`).
    pub label: String,
    /// The model's default-domain opset (which form Slice and Split take).
    pub opset: i64,
    constants: FxHashMap<Vec<i64>, String>,
}

impl Glue {
    /// An empty rewrite of `proto` (typed as `graph`) tagged `label`.
    pub fn new(proto: &ModelProto, graph: &Graph, label: &str) -> Glue {
        let opset = crate::ir::Opsets::from_proto(&proto.opset_import)
            .version("")
            .unwrap_or(1);
        Glue {
            names: Names::of(proto, graph),
            nodes: Vec::new(),
            initializers: Vec::new(),
            glue: Vec::new(),
            label: label.to_string(),
            opset,
            constants: FxHashMap::default(),
        }
    }

    /// Moves the nodes from position `from` on into a rewrite of their own, which `splice`
    /// inserts at another step; their names, initializers and glue entries stay with this one.
    pub fn detach(&mut self, from: usize) -> Glue {
        Glue {
            names: Names(FxHashSet::default()),
            nodes: self.nodes.split_off(from),
            initializers: Vec::new(),
            glue: Vec::new(),
            label: self.label.clone(),
            opset: self.opset,
            constants: FxHashMap::default(),
        }
    }

    /// A fresh name `{base}/{label}/{tag}`.
    pub fn fresh(&mut self, base: &str, tag: &str) -> String {
        let name = format!("{base}/{}/{tag}", self.label);
        self.names.fresh(&name)
    }

    /// Adds a glue node `op_type` reading `inputs` with `attribute`, its output named
    /// [`Glue::fresh`]`(base, tag)` and the node after its output; returns the output.
    pub fn add(
        &mut self,
        (base, tag): (&str, &str),
        op_type: &str,
        inputs: Vec<String>,
        attribute: Vec<AttributeProto>,
    ) -> String {
        let out = self.fresh(base, tag);
        let name = self.names.fresh(&format!("{out}/node"));
        self.nodes.push(op(op_type, inputs, &out, &name, attribute));
        self.glue.push(name);
        out
    }

    /// A Slice of `source` from `starts` to `ends` along `axes` (unit steps); returns the new
    /// tensor's name.
    pub fn slice(
        &mut self,
        source: &str,
        [starts, ends, axes]: [Vec<i64>; 3],
        tag: &str,
    ) -> String {
        let out = self.fresh(source, &format!("{tag}/slice"));
        let name = self.names.fresh(&format!("{out}/Slice"));
        // Slice takes its bounds as inputs from opset 10 on.
        let node = if self.opset >= 10 {
            let inputs = vec![
                source.to_string(),
                self.constant(starts),
                self.constant(ends),
                self.constant(axes),
            ];
            op("Slice", inputs, &out, &name, Vec::new())
        } else {
            let attributes = vec![
                ints_attribute("starts", starts),
                ints_attribute("ends", ends),
                ints_attribute("axes", axes),
            ];
            op("Slice", vec![source.to_string()], &out, &name, attributes)
        };
        self.nodes.push(node);
        self.glue.push(name);
        out
    }

    /// A Split of `source` along `axis` into parts of `sizes`, making `parts` (one name
    /// each), by the node `name`.
    pub fn split(
        &mut self,
        source: &str,
        (axis, sizes): (i64, Vec<i64>),
        parts: &[String],
        name: &str,
    ) {
        let mut attributes = vec![int_attribute("axis", axis)];
        let mut inputs = vec![source.to_string()];
        // Split takes its sizes as an input from opset 13 on.
        if self.opset >= 13 {
            inputs.push(self.constant(sizes));
        } else {
            attributes.push(ints_attribute("split", sizes));
        }
        let mut node = op("Split", inputs, &parts[0], name, attributes);
        node.output = parts.to_vec();
        self.nodes.push(node);
        self.glue.push(name.to_string());
    }

    /// A Concat of `parts` along `axis` making `out`.
    pub fn concat(&mut self, parts: Vec<String>, axis: i64, out: &str) {
        let name = self.names.fresh(&format!("{out}/{}/Concat", self.label));
        let axis = int_attribute("axis", axis);
        self.nodes.push(op("Concat", parts, out, &name, vec![axis]));
        self.glue.push(name);
    }

    /// An int64 initializer holding `values` (shared between nodes asking the same).
    pub fn constant(&mut self, values: Vec<i64>) -> String {
        if let Some(name) = self.constants.get(&values) {
            return name.clone();
        }
        let text: Vec<String> = values.iter().map(i64::to_string).collect();
        let name = self
            .names
            .fresh(&format!("{}/const_{}", self.label, text.join("_")));
        self.initializers
            .push(int64_tensor(&name, vec![values.len() as i64], &values));
        self.constants.insert(values, name.clone());
        name
    }

    /// Replaces the `Shape` nodes `shapes` (whose values inference knows) by initializers
    /// holding those values, for tensors a rewrite no longer makes; the caller drops the nodes.
    pub fn fold_shapes(&mut self, graph: &Graph, shapes: &[NodeId]) {
        for &n in shapes {
            let v = graph.nodes[n].outputs[0].expect("a Shape node has an output");
            let value = graph.values[v]
                .constant
                .as_ref()
                .expect("folded Shape nodes have a known value");
            let dims = value.shape().iter().map(|&d| d as i64).collect();
            let ints = value.to_i64_vec().expect("a shape is integers");
            self.initializers
                .push(int64_tensor(&graph.values[v].name, dims, &ints));
        }
    }
}

/// The model with the nodes of `order` that `replaced` does not reject and each rewrite's nodes
/// inserted after its step (exclusive; the steps distinct), their initializers added and the
/// value infos of `internal` tensors dropped; with, per new node, the old node it is, and each
/// rewrite's Slice and Concat nodes.
pub fn splice(
    proto: &ModelProto,
    order: &[NodeId],
    mut rewrites: Vec<(usize, Glue)>,
    replaced: &dyn Fn(NodeId) -> bool,
    internal: &FxHashSet<&str>,
) -> (ModelProto, Vec<Option<usize>>, Vec<Vec<String>>) {
    let old = &proto.graph.as_ref().expect("a loaded model has a graph").node;
    let added: usize = rewrites.iter().map(|(_, r)| r.nodes.len()).sum();
    let mut nodes = Vec::with_capacity(order.len() + added);
    let mut kept = Vec::with_capacity(nodes.capacity());
    let mut at: Vec<usize> = (0..rewrites.len()).collect();
    at.sort_by_key(|&r| rewrites[r].0);
    let mut next = at.iter().peekable();
    for step in 0..=order.len() {
        while let Some(&&r) = next.peek().filter(|&&&r| rewrites[r].0 == step) {
            let glue = &mut rewrites[r].1;
            kept.extend(std::iter::repeat_n(None, glue.nodes.len()));
            nodes.append(&mut glue.nodes);
            next.next();
        }
        if let Some(&n) = order.get(step).filter(|&&n| !replaced(n)) {
            nodes.push(old[n].clone());
            kept.push(Some(n));
        }
    }
    let mut model = crate::onnx::with_nodes(proto, nodes);
    let g = model.graph.as_mut().expect("a loaded model has a graph");
    let mut glue = Vec::with_capacity(rewrites.len());
    // Before IR version 4 every initializer must also be a graph input.
    let listed_as_inputs = proto.ir_version() < 4;
    for (_, mut r) in rewrites {
        if listed_as_inputs {
            g.input.extend(r.initializers.iter().map(input_of));
        }
        g.initializer.append(&mut r.initializers);
        glue.push(r.glue);
    }
    g.value_info.retain(|vi| !internal.contains(vi.name()));
    // An initializer only the replaced nodes read goes with them (onnxruntime warns of an
    // initializer no node reads); one the model already left unread stays, as does one that
    // is a graph input or output.
    let orphans: FxHashSet<&str> = order
        .iter()
        .filter(|&&n| replaced(n))
        .flat_map(|&n| old[n].input.iter().map(String::as_str))
        .collect();
    if !orphans.is_empty() {
        let mut read: FxHashSet<String> = FxHashSet::default();
        names_read(g, &mut read);
        let declared = g.input.iter().chain(&g.output).map(|v| v.name());
        read.extend(declared.map(str::to_string));
        g.initializer
            .retain(|t| !orphans.contains(t.name()) || read.contains(t.name()));
    }
    (model, kept, glue)
}

/// Adds to `into` every tensor name the nodes of `graph` (and of their subgraphs) read.
pub fn names_read(graph: &GraphProto, into: &mut impl Extend<String>) {
    for n in &graph.node {
        into.extend(n.input.iter().cloned());
        for a in &n.attribute {
            for g in a.g.as_deref().into_iter().chain(&a.graphs) {
                names_read(g, into);
            }
        }
    }
}

/// The graph input declaring an initializer (its element type and dims).
fn input_of(tensor: &TensorProto) -> ValueInfoProto {
    let dim = tensor
        .dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d)),
            denotation: None,
        })
        .collect();
    let tensor_type = type_proto::Tensor {
        elem_type: tensor.data_type,
        shape: Some(TensorShapeProto { dim }),
    };
    ValueInfoProto {
        name: tensor.name.clone(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(tensor_type)),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// A 1-D or scalar int64 initializer.
pub fn int64_tensor(name: &str, dims: Vec<i64>, values: &[i64]) -> TensorProto {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    TensorProto {
        dims,
        data_type: Some(DType::Int64.to_onnx()),
        name: Some(name.to_string()),
        raw_data: Some(Bytes::from(raw)),
        ..Default::default()
    }
}

/// A node of the default domain with one output.
pub fn op(
    op_type: &str,
    input: Vec<String>,
    out: &str,
    name: &str,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input,
        output: vec![out.to_string()],
        name: Some(name.to_string()),
        op_type: Some(op_type.to_string()),
        attribute,
        ..Default::default()
    }
}

/// An integer attribute.
pub fn int_attribute(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(i),
        ..Default::default()
    }
}

/// An integer-list attribute.
pub fn ints_attribute(name: &str, ints: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints,
        ..Default::default()
    }
}

/// Names already taken in the model, and fresh ones.
pub struct Names(FxHashSet<String>);

impl Names {
    /// The names `proto` (typed as `graph`) already uses.
    pub fn of(proto: &ModelProto, graph: &Graph) -> Names {
        let mut used: FxHashSet<String> = graph.values.iter().map(|v| v.name.clone()).collect();
        if let Some(g) = &proto.graph {
            used.extend(g.node.iter().map(|n| n.name().to_string()));
            used.extend(g.initializer.iter().map(|t| t.name().to_string()));
        }
        Names(used)
    }

    /// `base`, or `base_2`, `base_3`... whichever is free; taken from now on.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 2;
        while self.0.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.0.insert(name.clone());
        name
    }
}
