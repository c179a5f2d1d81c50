//! S5's memory marks on a graph: the unit of every node, and for every value the unit that
//! produces it (or the host, for graph inputs), the other sides that read it (the host reads
//! graph outputs), the alignment all of them need, and the quantised dtype it is stored in
//! when its producer's unit quantises outputs that feed only quantisation nodes.

use super::spec::Partition;
use crate::ir::{DType, Graph, ValueKind};

/// A side of a buffer exchange: the host or a compute unit (index into the partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    /// The host (feeds graph inputs, reads graph outputs).
    Host,
    /// A compute unit.
    Unit(usize),
}

/// The mark of one value.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Who writes it.
    pub producer: Side,
    /// Other sides that read it (the buffer is shared with them).
    pub shared_with: Vec<Side>,
    /// Offset alignment every side touching it needs (their least common multiple).
    pub alignment: u64,
    /// Stored dtype and bytes, when stored quantised.
    pub stored: Option<(DType, u64)>,
}

/// The marks of a graph.
#[derive(Clone, Debug)]
pub struct Marks {
    /// Unit of each node.
    pub node_unit: Vec<usize>,
    /// Mark of each value (`None` for constants and outer-scope values).
    pub values: Vec<Option<Mark>>,
    /// Nodes per unit.
    pub nodes_per_unit: Vec<usize>,
}

/// Op types that quantise their first input.
const QUANTIZERS: [&str; 4] = [
    "QuantizeLinear",
    "DynamicQuantizeLinear",
    "FakeQuantize",
    "FakeQuant",
];

/// Marks every value of the graph; `host_alignment` is the plan's base alignment.
pub fn mark(graph: &Graph, partition: &Partition, host_alignment: u64) -> Result<Marks, String> {
    for name in partition.nodes.keys() {
        if !graph.nodes.iter().any(|n| &n.name == name) {
            return Err(format!(
                "the partition names node '{name}', which the model does not have"
            ));
        }
    }
    let node_unit: Vec<usize> = graph.nodes.iter().map(|n| partition.unit_of(n)).collect();
    let mut nodes_per_unit = vec![0; partition.units.len()];
    for &u in &node_unit {
        nodes_per_unit[u] += 1;
    }
    let align_of = |side: Side| match side {
        Side::Host => host_alignment.max(1),
        Side::Unit(u) => partition.units[u].alignment,
    };
    let values = graph
        .values
        .iter()
        .map(|v| {
            let constant_node = v.producer.is_some_and(|p| {
                graph.nodes[p].op_type == "Constant" && graph.nodes[p].domain.is_empty()
            });
            if matches!(v.kind, ValueKind::Initializer | ValueKind::OuterScope)
                || constant_node
                || v.folded
            {
                return None;
            }
            let producer = v.producer.map_or(Side::Host, |p| Side::Unit(node_unit[p]));
            let mut readers: Vec<Side> = v
                .consumers
                .iter()
                .map(|&c| Side::Unit(node_unit[c]))
                .collect();
            if v.is_output {
                readers.push(Side::Host);
            }
            readers.sort_unstable();
            readers.dedup();
            let alignment = readers
                .iter()
                .fold(align_of(producer), |a, &s| lcm(a, align_of(s)));
            let shared_with: Vec<Side> = readers.into_iter().filter(|&s| s != producer).collect();
            let quantises =
                matches!(producer, Side::Unit(u) if partition.units[u].quantize_outputs);
            let stored = quantises
                .then(|| quantised(graph, v))
                .flatten()
                .filter(|&(_, bytes)| Some(bytes) < v.tensor_type().and_then(|t| t.bytes()));
            Some(Mark {
                producer,
                shared_with,
                alignment,
                stored,
            })
        })
        .collect();
    Ok(Marks {
        node_unit,
        values,
        nodes_per_unit,
    })
}

/// The dtype and bytes of a value read only (as first input) by quantisation nodes that all
/// produce the same dtype.
fn quantised(graph: &Graph, v: &crate::ir::Value) -> Option<(DType, u64)> {
    if v.is_output || v.consumers.is_empty() {
        return None;
    }
    let id = graph.value_id(&v.name)?;
    let mut dtype = None;
    for &c in &v.consumers {
        let node = &graph.nodes[c];
        let reads_only_first = node.inputs.iter().skip(1).all(|&i| i != Some(id));
        if !QUANTIZERS.contains(&node.op_type.as_str())
            || node.inputs.first() != Some(&Some(id))
            || !reads_only_first
        {
            return None;
        }
        let out = graph.values[(*node.outputs.first()?)?].tensor_type()?.dtype;
        if dtype.is_some_and(|d| d != out) {
            return None;
        }
        dtype = Some(out);
    }
    let dtype = dtype?;
    Some((dtype, dtype.bytes_for(v.tensor_type()?.elements()?)?))
}

/// Least common multiple (both at least 1).
pub fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}
