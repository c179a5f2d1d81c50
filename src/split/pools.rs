//! Global pools of a tensor read as bands: a squeeze-and-excitation block pools the whole
//! tensor (GlobalAveragePool, or a ReduceMean over H and W) before the chain scaling it by the
//! result reads it, so the pool alone would keep the tensor whole. Each such pool instead
//! reduces every band on its own and combines the bands' results (a Sum, then a Div by
//! H × W for a mean; a Max or Min), at the pool's own step.

use super::glue::{Glue, int_attribute, ints_attribute, op};
use super::rows::rules::reduction_axes;
use super::rules::shape_of;
use crate::ir::{DType, Graph, Node, NodeId, ValueId};

/// How a global pool reduces H and W.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The sum (ReduceSum).
    Sum,
    /// The mean (GlobalAveragePool, ReduceMean): the sum divided by H × W.
    Mean,
    /// The largest element (GlobalMaxPool, ReduceMax).
    Max,
    /// The smallest element (ReduceMin).
    Min,
}

/// A default-domain node reducing all of H and W of a rank-4 float tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalPool {
    /// What it computes.
    pub reduction: Reduction,
    /// Whether its output keeps H and W as axes of size 1.
    pub keepdims: bool,
    /// The element type it reduces (float32 or float64).
    pub dtype: DType,
}

/// The global pool `node` is when it reads `value` (its only data input), a rank-4 float32 or
/// float64 tensor, and reduces exactly its H and W; `None` otherwise.
pub fn global_pool_of(graph: &Graph, node: &Node, value: ValueId) -> Option<GlobalPool> {
    if !node.domain.is_empty() || node.inputs.first().copied().flatten() != Some(value) {
        return None;
    }
    let dtype = graph.values[value].tensor_type()?.dtype;
    if !matches!(dtype, DType::Float | DType::Double) || shape_of(graph, value)?.len() != 4 {
        return None;
    }
    let reduction = match node.op_type.as_str() {
        "GlobalAveragePool" => Reduction::Mean,
        "GlobalMaxPool" => Reduction::Max,
        "ReduceMean" => Reduction::Mean,
        "ReduceSum" => Reduction::Sum,
        "ReduceMax" => Reduction::Max,
        "ReduceMin" => Reduction::Min,
        _ => return None,
    };
    if node.op_type.starts_with("Global") {
        return Some(GlobalPool {
            reduction,
            keepdims: true,
            dtype,
        });
    }
    let mut spatial: Vec<i64> = reduction_axes(graph, node)?
        .iter()
        .map(|&a| a.rem_euclid(4))
        .collect();
    spatial.sort_unstable();
    (spatial == [2, 3]).then_some(GlobalPool {
        reduction,
        keepdims: node.attr_int("keepdims").unwrap_or(1) != 0,
        dtype,
    })
}

impl GlobalPool {
    /// Adds to `b` the node `pool` (reading a tensor of `[h, w]` positions, made of `bands`)
    /// as one reduction per band and their combination, which makes the pool's own output;
    /// returns the names of the nodes added.
    pub fn over_bands(
        self,
        b: &mut Glue,
        graph: &Graph,
        pool: NodeId,
        bands: &[String],
        [h, w]: [i64; 2],
    ) -> Vec<String> {
        let node = &graph.nodes[pool];
        let out = &graph.values[node.outputs[0].expect("a pool has an output")].name;
        let base = match node.name.is_empty() {
            true => format!("{}_{pool}", node.op_type),
            false => node.name.clone(),
        };
        let (per_band, combine) = match self.reduction {
            Reduction::Sum | Reduction::Mean => ("ReduceSum", "Sum"),
            Reduction::Max => ("ReduceMax", "Max"),
            Reduction::Min => ("ReduceMin", "Min"),
        };
        // ReduceSum takes its axes as an input from opset 13, the others from opset 18.
        let axes_as_input = b.opset >= if per_band == "ReduceSum" { 13 } else { 18 };
        let mean = self.reduction == Reduction::Mean;
        let mut added = Vec::new();
        let mut partials = Vec::with_capacity(bands.len());
        for (j, band) in bands.iter().enumerate() {
            let partial = match (bands.len(), mean) {
                (1, false) => out.clone(),
                _ => b.fresh(out, &format!("b{j}")),
            };
            let name = b.names.fresh(&format!("{base}/{}/b{j}", b.label));
            let mut attributes = vec![int_attribute("keepdims", i64::from(self.keepdims))];
            let mut inputs = vec![band.clone()];
            match axes_as_input {
                true => inputs.push(b.constant(vec![2, 3])),
                false => attributes.push(ints_attribute("axes", vec![2, 3])),
            }
            b.nodes
                .push(op(per_band, inputs, &partial, &name, attributes));
            added.push(name);
            partials.push(partial);
        }
        let mut add = |b: &mut Glue, op_type: &str, inputs: Vec<String>, made: &str, attrs| {
            let name = b.names.fresh(&format!("{base}/{}/{op_type}", b.label));
            b.nodes.push(op(op_type, inputs, made, &name, attrs));
            added.push(name);
        };
        let total = match (partials.len(), mean) {
            // The one band's reduction made the output.
            (1, false) => return added,
            (1, true) => partials.pop().expect("one band"),
            (_, false) => {
                add(b, combine, partials, out, Vec::new());
                return added;
            }
            (_, true) => {
                let total = b.fresh(out, "sum");
                add(b, combine, partials, &total, Vec::new());
                total
            }
        };
        // The mean: the sum divided by the number of positions, cast to the pool's type.
        let count = b.constant(vec![h * w]);
        let cast = b.fresh(out, "count");
        let to = int_attribute("to", i64::from(self.dtype.to_onnx()));
        add(b, "Cast", vec![count], &cast, vec![to]);
        add(b, "Div", vec![total, cast], out, Vec::new());
        added
    }
}
