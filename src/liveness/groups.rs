//! Grouping tensors into buffers: in-place overwrite, alias and slice alias, decided by walking
//! the execution order and consulting the rule table.

use anyhow::Result;
use smallvec::{SmallVec, smallvec};

use super::grouping::Grouping;
use super::known::Known;
use super::lifetimes::{TensorKind, TensorLife, lifetimes};
use super::rules::{ReuseRule, node_rule};
use crate::ir::{Graph, NodeId, ValueId};
use std::sync::Arc;

/// Which sharing mechanisms are enabled.
#[derive(Clone, Copy, Debug)]
pub struct LivenessOptions {
    /// Let elementwise outputs overwrite an input that dies at the node.
    pub inplace: bool,
    /// Let Reshape-like outputs and Concat/Split slices share their input's bytes.
    pub alias: bool,
    /// Place graph inputs and outputs in the arena.
    pub include_io: bool,
    /// Arena alignment in bytes: slice aliases start only at multiples of it.
    pub alignment: u64,
    /// Let the parts of a Concat that are strided in its output (H and W tiles of an NCHW
    /// tensor) be strided views into it, so the Concat moves nothing (the split stage turns
    /// this on; a runtime must then honour each tensor's `strides`).
    pub strided: bool,
    /// Let an elementwise output overwrite a slice of a tensor that dies at its node while
    /// the tensor's other slices live on (no live tensor sharing those bytes), and a Concat
    /// take the bytes its parts already share in one buffer: a row chain's blocks then write
    /// their output over the rows of their input, block by block (the split stage turns this
    /// on).
    pub blockwise: bool,
}

impl Default for LivenessOptions {
    fn default() -> Self {
        LivenessOptions {
            inplace: true,
            alias: true,
            include_io: true,
            alignment: 64,
            strided: false,
            blockwise: false,
        }
    }
}

/// How a tensor shares another tensor's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Written over `of`, an input of its producer that dies there.
    InPlace {
        /// The overwritten tensor (index into [`Liveness::tensors`]).
        of: usize,
    },
    /// The bytes of `of` (a full alias), or a slice of them starting `offset` bytes in.
    Alias {
        /// The tensor whose bytes it is (index into [`Liveness::tensors`]).
        of: usize,
        /// Bytes from the start of `of` for a slice alias; `None` for a full alias.
        offset: Option<u64>,
    },
}

/// One arena allocation shared by a group of tensors.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// Exact bytes the group needs (largest member end).
    pub bytes: u64,
    /// First step any member is live.
    pub first: usize,
    /// Last step any member is live.
    pub last: usize,
    /// Members: tensor index and its byte offset inside the buffer (most buffers hold one
    /// tensor, kept inline: an analysis makes one buffer per tensor, many times per plan).
    pub members: SmallVec<[(usize, u64); 1]>,
}

/// The result of the analysis.
#[derive(Clone, Debug)]
pub struct Liveness {
    /// The execution order (node ids).
    pub order: Vec<NodeId>,
    /// Every tensor of the graph (shared by every analysis of one order).
    pub tensors: Arc<[TensorLife]>,
    /// For each tensor, what it shares.
    pub sharing: Vec<Option<Sharing>>,
    /// For each tensor, its buffer (index into `buffers`) when it is in the arena.
    pub buffer_of: Vec<Option<usize>>,
    /// Arena buffers (groups of tensors). Empty groups left by merging are removed.
    pub buffers: Vec<Buffer>,
    /// For each tensor laid out as a strided view (see [`LivenessOptions::strided`]), its
    /// byte strides per axis; `None` for row-major tensors.
    pub strides: Vec<Option<Arc<[u64]>>>,
    /// For each Concat part that is a view of the Concat's output without being its alias
    /// (a strided view, or a part the output took in place, see
    /// [`LivenessOptions::blockwise`]): that output and the bytes from its first element to
    /// the part's (its `sharing` is kept: a part may also be written in place over its
    /// producer's input).
    pub part_of: Vec<Option<(usize, u64)>>,
}

impl Liveness {
    /// Byte offset of a tensor inside its buffer.
    pub fn offset_in_buffer(&self, tensor: usize) -> Option<u64> {
        let b = self.buffer_of[tensor]?;
        self.buffers[b]
            .members
            .iter()
            .find(|m| m.0 == tensor)
            .map(|m| m.1)
    }
}

/// Computes lifetimes under `order` and groups tensors into buffers.
pub fn analyse(graph: &Graph, order: Vec<NodeId>, options: LivenessOptions) -> Result<Liveness> {
    analyse_with(graph, order, options, &|_| true)
}

/// Like [`analyse`], but slice aliases (Concat/Split/Slice/Gather) are formed only at nodes
/// `slices` accepts.
pub fn analyse_with(
    graph: &Graph,
    order: Vec<NodeId>,
    options: LivenessOptions,
    slices: &dyn Fn(NodeId) -> bool,
) -> Result<Liveness> {
    Ok(Analyser::new(graph, order, options)?.run(slices))
}

/// What every grouping of one order shares: lifetimes, tensor lookup and node rules, so that
/// trying many sets of slice-alias sites (see `choose`) computes them once.
pub struct Analyser<'g> {
    graph: &'g Graph,
    order: Vec<NodeId>,
    options: LivenessOptions,
    tensors: Arc<[TensorLife]>,
    tensor_of: Vec<Option<usize>>,
    rules: Vec<ReuseRule>,
    /// For each node whose first output is read once, by a Concat alone, and is no graph
    /// output: that output and the Concat (where `sliced_part` may keep it out of place).
    concat_part: Vec<Option<(ValueId, NodeId)>>,
    known: Known<'g>,
}

impl<'g> Analyser<'g> {
    /// Computes the lifetimes under `order` and each node's sharing rule.
    pub fn new(graph: &'g Graph, order: Vec<NodeId>, options: LivenessOptions) -> Result<Self> {
        let tensors: Arc<[TensorLife]> = lifetimes(graph, &order)?.into();
        let mut tensor_of: Vec<Option<usize>> = vec![None; graph.values.len()];
        for (i, t) in tensors.iter().enumerate() {
            tensor_of[t.value] = Some(i);
        }
        let rules: Vec<ReuseRule> = graph.nodes.iter().map(|n| node_rule(graph, n)).collect();
        let concat_part = graph
            .nodes
            .iter()
            .map(|n| {
                let out = n.outputs.first().copied().flatten()?;
                let value = &graph.values[out];
                let [concat] = value.consumers.as_slice() else {
                    return None;
                };
                let reads = graph.nodes[*concat].inputs.iter();
                let once = reads.filter(|&&v| v == Some(out)).count() == 1;
                (!value.is_output && matches!(rules[*concat], ReuseRule::ConcatSlices) && once)
                    .then_some((out, *concat))
            })
            .collect();
        Ok(Analyser {
            graph,
            order,
            options,
            tensors,
            tensor_of,
            rules,
            concat_part,
            known: Known::new(graph),
        })
    }

    /// Whether the output of `node_id` is read only by a Concat that `slices` lets take its
    /// parts as slices, laid out so that it can take this one (its offset aligned): the output
    /// is then kept out of any in-place group, since the Concat takes only a part alone in its
    /// buffer (the blocks of a row chain ending in an elementwise operator: writing each block
    /// in place of its input saves one block, leaving it out lets the Concat copy nothing).
    fn sliced_part(
        &self,
        grouping: &Grouping,
        node_id: NodeId,
        slices: &dyn Fn(NodeId) -> bool,
    ) -> bool {
        // Under `blockwise` the blocks write over their input's slices instead, and the Concat
        // takes the bytes they leave (see `try_assembled`).
        if self.options.blockwise || !self.options.alias {
            return false;
        }
        let graph = self.graph;
        let Some((out, concat)) = self.concat_part[node_id] else {
            return false;
        };
        if !slices(concat) {
            return false;
        }
        let node = &graph.nodes[concat];
        let Some(whole) = grouping.tensor(node.outputs.first().copied().flatten()) else {
            return false;
        };
        let Some((offsets, bits)) = grouping.slice_layout(whole, &node.inputs, node) else {
            return false;
        };
        let k = node.inputs.iter().position(|&v| v == Some(out));
        bits.is_multiple_of(8)
            && k.is_some_and(|k| offsets[k].is_multiple_of(grouping.alignment))
    }

    /// Groups the tensors into buffers, forming slice aliases only at nodes `slices` accepts.
    pub fn run(&self, slices: &dyn Fn(NodeId) -> bool) -> Liveness {
        let (graph, options) = (self.graph, self.options);
        let tensors = &self.tensors;
        let in_arena = |t: &TensorLife| {
            t.bytes.is_some()
                && match t.kind {
                    TensorKind::Constant | TensorKind::Fused => false,
                    TensorKind::Input => {
                        options.include_io && graph.scatter_reading(t.value).is_none()
                    }
                    TensorKind::Output => options.include_io,
                    TensorKind::Intermediate => true,
                }
        };
        let mut buffer_of = vec![None; tensors.len()];
        let mut buffers = Vec::new();
        for (i, t) in tensors.iter().enumerate() {
            if in_arena(t) {
                buffer_of[i] = Some(buffers.len());
                buffers.push(Buffer {
                    bytes: t.bytes.unwrap_or(0),
                    first: t.first,
                    last: t.last,
                    members: smallvec![(i, 0)],
                });
            }
        }
        let mut grouping = Grouping {
            graph,
            tensors,
            tensor_of: &self.tensor_of,
            known: &self.known,
            buffer_of,
            buffers,
            sharing: vec![None; tensors.len()],
            strides: vec![None; tensors.len()],
            part_of: vec![None; tensors.len()],
            offsets: vec![0; tensors.len()],
            alignment: options.alignment.max(1),
            strided: options.strided,
            blockwise: options.blockwise,
        };
        for (step, &node_id) in self.order.iter().enumerate() {
            // A unit's nodes run as one kernel: none of them shares bytes, but a unit whose
            // operator is an alias may give its integer output its integer input's bytes.
            let units = graph.units_of(node_id);
            if !units.is_empty() {
                let unit = units.iter().map(|&u| &graph.units[u]).find(|u| u.op == node_id);
                if let (ReuseRule::Alias, true, Some(unit)) =
                    (self.rules[node_id], options.alias, unit)
                {
                    grouping.try_unit_alias(unit);
                }
                continue;
            }
            match self.rules[node_id] {
                ReuseRule::InPlace(candidates)
                    if options.inplace && !self.sliced_part(&grouping, node_id, slices) =>
                {
                    grouping.try_inplace(node_id, step, candidates)
                }
                ReuseRule::Alias if options.alias => grouping.try_alias(node_id),
                ReuseRule::ConcatSlices if options.alias && slices(node_id) => {
                    grouping.try_concat(node_id, step)
                }
                ReuseRule::SplitSlices if options.alias && slices(node_id) => {
                    grouping.try_split(node_id)
                }
                ReuseRule::SliceView if options.alias && slices(node_id) => {
                    grouping.try_view(node_id)
                }
                _ => {}
            }
        }
        let Grouping {
            mut buffer_of,
            buffers,
            sharing,
            strides,
            part_of,
            ..
        } = grouping;
        // Drop emptied groups and renumber.
        let mut renumber = vec![None; buffers.len()];
        let mut kept = Vec::new();
        for (i, b) in buffers.into_iter().enumerate() {
            if !b.members.is_empty() {
                renumber[i] = Some(kept.len());
                kept.push(b);
            }
        }
        for b in buffer_of.iter_mut() {
            *b = b.and_then(|old| renumber[old]);
        }
        Liveness {
            order: self.order.clone(),
            tensors: Arc::clone(&self.tensors),
            sharing,
            buffer_of,
            buffers: kept,
            strides,
            part_of,
        }
    }

    /// The sharing rule of a node.
    pub fn rule(&self, node: NodeId) -> ReuseRule {
        self.rules[node]
    }

    /// The tensor (index into [`Liveness::tensors`]) of a value, if it has one.
    pub fn tensor(&self, value: ValueId) -> Option<usize> {
        self.tensor_of[value]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, ValueType, known_shape};
    use crate::onnx::proto::{GraphProto, NodeProto, ValueInfoProto};

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Lowers a graph and gives every value the same 1×8 float32 type.
    fn typed(nodes: Vec<NodeProto>, input: &str, output: &str) -> Graph {
        let info = |n: &str| ValueInfoProto {
            name: Some(n.into()),
            ..Default::default()
        };
        let mut g = Graph::from_proto(&GraphProto {
            node: nodes,
            input: vec![info(input)],
            output: vec![info(output)],
            ..Default::default()
        })
        .unwrap();
        for v in &mut g.values {
            v.ty = Some(ValueType::tensor(DType::Float, known_shape(&[1, 8])));
        }
        g
    }

    /// The graph of a blockwise test, from `x_in` to `out`: every value 1×8 float32 but the
    /// blocks' (x0, x1, h0, h1, y0, y1), 1×4.
    fn blocks(nodes: Vec<NodeProto>) -> Graph {
        let mut g = typed(nodes, "x_in", "out");
        for name in ["x0", "x1", "h0", "h1", "y0", "y1"] {
            let v = g.value_id(name).unwrap();
            g.values[v].ty = Some(ValueType::tensor(DType::Float, known_shape(&[1, 4])));
        }
        g
    }

    /// `n` with `axis = 1` (a Split or Concat of the blockwise tests).
    fn along_axis_1(mut n: NodeProto) -> NodeProto {
        n.attribute.push(crate::onnx::proto::AttributeProto {
            name: Some("axis".into()),
            r#type: Some(2),
            i: Some(1),
            ..Default::default()
        });
        n
    }

    /// The index of the tensor of value `tensor`.
    fn index(g: &Graph, l: &Liveness, tensor: &str) -> usize {
        l.tensors
            .iter()
            .position(|t| g.values[t.value].name == tensor)
            .unwrap()
    }

    fn name(g: &Graph, l: &Liveness, t: usize) -> String {
        g.values[l.tensors[t].value].name.clone()
    }

    fn sharing_of(g: &Graph, l: &Liveness, tensor: &str) -> Option<(String, &'static str)> {
        let t = l
            .tensors
            .iter()
            .position(|t| g.values[t.value].name == tensor)?;
        match l.sharing[t]? {
            Sharing::InPlace { of } => Some((name(g, l, of), "inplace")),
            Sharing::Alias { of, .. } => Some((name(g, l, of), "alias")),
        }
    }

    /// x → Relu a → Sigmoid b; x → Relu c; Add(b, c) → y. Worked by hand (the worked example
    /// of docs/format.md): b overwrites a (a dies at step 1); c cannot overwrite x (a graph input); y overwrites b
    /// (b's group dies at step 3). Buffers: {a, b, y}, {x}, {c}.
    #[test]
    fn chain_inplace_by_hand() {
        let g = typed(
            vec![
                node("Relu", &["x"], &["a"]),
                node("Sigmoid", &["a"], &["b"]),
                node("Relu", &["x"], &["c"]),
                node("Add", &["b", "c"], &["y"]),
            ],
            "x",
            "y",
        );
        let l = analyse(&g, vec![0, 1, 2, 3], LivenessOptions::default()).unwrap();
        assert_eq!(sharing_of(&g, &l, "b"), Some(("a".into(), "inplace")));
        assert_eq!(sharing_of(&g, &l, "c"), None);
        assert_eq!(sharing_of(&g, &l, "y"), Some(("b".into(), "inplace")));
        assert_eq!(l.buffers.len(), 3);
        let abc = l.buffers.iter().find(|b| b.members.len() == 3).unwrap();
        assert_eq!((abc.first, abc.last, abc.bytes), (0, 3, 32));

        let none = LivenessOptions {
            inplace: false,
            ..LivenessOptions::default()
        };
        let l = analyse(&g, vec![0, 1, 2, 3], none).unwrap();
        assert_eq!(l.buffers.len(), 5);
    }

    /// A tensor read again later cannot be overwritten; a Reshape aliases its input.
    #[test]
    fn no_inplace_over_a_tensor_read_later() {
        let g = typed(
            vec![
                node("Relu", &["x"], &["a"]),
                node("Reshape", &["a", "x"], &["r"]),
                node("Sigmoid", &["a"], &["b"]),
                node("Add", &["b", "r"], &["y"]),
            ],
            "x",
            "y",
        );
        let l = analyse(&g, vec![0, 1, 2, 3], LivenessOptions::default()).unwrap();
        assert_eq!(sharing_of(&g, &l, "r"), Some(("a".into(), "alias")));
        // a's group (a, r) lives until step 3, so Sigmoid at step 2 may not overwrite a.
        assert_eq!(sharing_of(&g, &l, "b"), None);
        // At step 3 Add reads b and r; b dies there, so y may overwrite b.
        assert_eq!(sharing_of(&g, &l, "y"), Some(("b".into(), "inplace")));
    }

    /// A Transpose that only moves size-1 axes keeps the bytes in order (an alias); one that
    /// swaps two longer axes does not. A same-size Cast runs in place.
    #[test]
    fn layout_keeping_transpose_aliases_and_cast_runs_in_place() {
        let transpose = |perm: &[i64]| {
            let mut t = node("Transpose", &["a"], &["t"]);
            t.attribute.push(crate::onnx::proto::AttributeProto {
                name: Some("perm".into()),
                ints: perm.to_vec(),
                ..Default::default()
            });
            let mut g = typed(
                vec![
                    node("Relu", &["x"], &["a"]),
                    t,
                    node("Cast", &["t"], &["c"]),
                    node("Relu", &["c"], &["y"]),
                ],
                "x",
                "y",
            );
            // a is 1×4×1×2: moving the size-1 axes keeps the order of 4 and 2.
            let a = g.value_id("a").unwrap();
            g.values[a].ty = Some(ValueType::tensor(DType::Float, known_shape(&[1, 4, 1, 2])));
            let l = analyse(&g, vec![0, 1, 2, 3], LivenessOptions::default()).unwrap();
            (sharing_of(&g, &l, "t"), sharing_of(&g, &l, "c"))
        };
        assert_eq!(transpose(&[2, 1, 0, 3]).0, Some(("a".into(), "alias")));
        assert_eq!(transpose(&[0, 3, 2, 1]).0, None);
        assert_eq!(transpose(&[2, 1, 0, 3]).1, Some(("t".into(), "inplace")));
    }

    /// x = Relu(x_in) [1,8] f32 (32 B) → Split along axis 1 → x0, x1 [1,4] (16 B each, views
    /// of x at 0 and 16); block b: h_b = Neg(x_b), y_b = Add(h_b, x_b); y = Concat(y0, y1)
    /// [1,8]; out = Relu(y). Worked by hand, in order 0 Relu, 1 Split, 2 Neg, 3 Add, 4 Neg,
    /// 5 Add, 6 Concat, 7 Relu. Without `blockwise`, x0 cannot be overwritten at step 3 (x's
    /// buffer lives until x1 dies at step 5), and y0 and y1, read only by the Concat, are
    /// written as its slices (at 0 and 16 of y, a buffer of its own), not over h0 and h1 (in
    /// place, they could not be its slices and the Concat would copy). With it, the bytes of x0 are free
    /// after step 3 (x itself was last read at step 1, x1 holds other bytes), so y0 overwrites
    /// x0 at offset 0 and y1 x1 at 16; at step 6 nothing else in that buffer is read any more,
    /// so y takes the same bytes at offset 0, its parts at 0 and 16.
    #[test]
    fn blockwise_blocks_overwrite_their_slices_and_the_concat_takes_them() {
        let g = blocks(
            vec![
                node("Relu", &["x_in"], &["x"]),
                along_axis_1(node("Split", &["x"], &["x0", "x1"])),
                node("Neg", &["x0"], &["h0"]),
                node("Add", &["h0", "x0"], &["y0"]),
                node("Neg", &["x1"], &["h1"]),
                node("Add", &["h1", "x1"], &["y1"]),
                along_axis_1(node("Concat", &["y0", "y1"], &["y"])),
                node("Relu", &["y"], &["out"]),
            ],
        );
        let order: Vec<usize> = (0..8).collect();
        let options = LivenessOptions {
            alignment: 1,
            ..LivenessOptions::default()
        };
        let plain = analyse(&g, order.clone(), options).unwrap();
        assert_eq!(sharing_of(&g, &plain, "x0"), Some(("x".into(), "alias")));
        assert_eq!(sharing_of(&g, &plain, "y0"), Some(("y".into(), "alias")));
        assert_eq!(sharing_of(&g, &plain, "y1"), Some(("y".into(), "alias")));
        assert_eq!(plain.part_of[index(&g, &plain, "y1")], None);
        assert_eq!(plain.offset_in_buffer(index(&g, &plain, "y1")), Some(16));
        assert_ne!(
            plain.buffer_of[index(&g, &plain, "y")],
            plain.buffer_of[index(&g, &plain, "x")]
        );

        let blockwise = LivenessOptions {
            blockwise: true,
            ..options
        };
        let l = analyse(&g, order, blockwise).unwrap();
        assert_eq!(sharing_of(&g, &l, "y0"), Some(("x0".into(), "inplace")));
        assert_eq!(sharing_of(&g, &l, "y1"), Some(("x1".into(), "inplace")));
        let (x, y) = (index(&g, &l, "x"), index(&g, &l, "y"));
        assert_eq!(l.buffer_of[y], l.buffer_of[x]);
        assert_eq!(l.offset_in_buffer(y), Some(0));
        assert_eq!(l.offset_in_buffer(index(&g, &l, "y1")), Some(16));
        assert_eq!(l.part_of[index(&g, &l, "y0")], Some((y, 0)));
        assert_eq!(l.part_of[index(&g, &l, "y1")], Some((y, 16)));
        let b = &l.buffers[l.buffer_of[x].unwrap()];
        assert_eq!((b.first, b.bytes), (0, 32));
    }

    /// x = Relu(x_in) [1,8] f32 → Split along axis 1 → x0, x1 [1,4]; block b: h_b = Neg(x_b),
    /// y_b = Relu(h_b); y = Concat(y0, y1); out = Add(y, x). Worked by hand, in order 0 Relu,
    /// 1 Split, 2 Neg, 3 Relu, 4 Neg, 5 Relu, 6 Concat, 7 Add, with `blockwise` and `strided`:
    /// x is read at step 7, so no block overwrites its slice; y_b overwrites h_b (h_b dies at
    /// y_b's step), so y_b shares its buffer and the Concat cannot take it as a lone part.
    /// Each block's group {h_b, y_b} then moves into y's buffer as y's rows: h0 and y0 at
    /// offset 0, h1 and y1 at 16, so the Concat copies nothing.
    #[test]
    fn blocks_written_in_place_move_into_their_concat() {
        let g = blocks(
            vec![
                node("Relu", &["x_in"], &["x"]),
                along_axis_1(node("Split", &["x"], &["x0", "x1"])),
                node("Neg", &["x0"], &["h0"]),
                node("Relu", &["h0"], &["y0"]),
                node("Neg", &["x1"], &["h1"]),
                node("Relu", &["h1"], &["y1"]),
                along_axis_1(node("Concat", &["y0", "y1"], &["y"])),
                node("Add", &["y", "x"], &["out"]),
            ],
        );
        let options = LivenessOptions {
            alignment: 1,
            blockwise: true,
            strided: true,
            ..LivenessOptions::default()
        };
        let l = analyse(&g, (0..8).collect(), options).unwrap();
        assert_eq!(sharing_of(&g, &l, "y0"), Some(("h0".into(), "inplace")));
        assert_eq!(sharing_of(&g, &l, "y1"), Some(("h1".into(), "inplace")));
        let y = index(&g, &l, "y");
        for (name, offset) in [("h0", 0), ("y0", 0), ("h1", 16), ("y1", 16)] {
            let t = index(&g, &l, name);
            assert_eq!(l.buffer_of[t], l.buffer_of[y], "{name}");
            assert_eq!(l.offset_in_buffer(t), Some(offset), "{name}");
        }
        assert_ne!(l.buffer_of[y], l.buffer_of[index(&g, &l, "x")]);
    }
}
