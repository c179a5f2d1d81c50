//! Grouping tensors into buffers: in-place overwrite, alias and slice alias, decided by walking
//! the execution order and consulting the rule table.

use anyhow::Result;

use super::lifetimes::{TensorKind, TensorLife, lifetimes};
use super::rules::{ReuseRule, node_rule, slice_offsets, view_offset};
use super::strided::{footprint, index_of, offset_of, row_major};
use crate::ir::{Graph, NodeId, ValueId, concrete};

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
    /// Members: tensor index and its byte offset inside the buffer.
    pub members: Vec<(usize, u64)>,
}

/// The result of the analysis.
#[derive(Clone, Debug)]
pub struct Liveness {
    /// The execution order (node ids).
    pub order: Vec<NodeId>,
    /// Every tensor of the graph.
    pub tensors: Vec<TensorLife>,
    /// For each tensor, what it shares.
    pub sharing: Vec<Option<Sharing>>,
    /// For each tensor, its buffer (index into `buffers`) when it is in the arena.
    pub buffer_of: Vec<Option<usize>>,
    /// Arena buffers (groups of tensors). Empty groups left by merging are removed.
    pub buffers: Vec<Buffer>,
    /// For each tensor laid out as a strided view (see [`LivenessOptions::strided`]), its
    /// byte strides per axis; `None` for row-major tensors.
    pub strides: Vec<Option<Vec<u64>>>,
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
    tensors: Vec<TensorLife>,
    tensor_of: Vec<Option<usize>>,
    rules: Vec<ReuseRule>,
}

impl<'g> Analyser<'g> {
    /// Computes the lifetimes under `order` and each node's sharing rule.
    pub fn new(graph: &'g Graph, order: Vec<NodeId>, options: LivenessOptions) -> Result<Self> {
        let tensors = lifetimes(graph, &order)?;
        let mut tensor_of: Vec<Option<usize>> = vec![None; graph.values.len()];
        for (i, t) in tensors.iter().enumerate() {
            tensor_of[t.value] = Some(i);
        }
        let rules = graph.nodes.iter().map(|n| node_rule(graph, n)).collect();
        Ok(Analyser {
            graph,
            order,
            options,
            tensors,
            tensor_of,
            rules,
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
        let graph = self.graph;
        let Some(out) = graph.nodes[node_id].outputs.first().copied().flatten() else {
            return false;
        };
        let value = &graph.values[out];
        let [concat] = value.consumers.as_slice() else {
            return false;
        };
        let node = &graph.nodes[*concat];
        // Under `blockwise` the blocks write over their input's slices instead, and the Concat
        // takes the bytes they leave (see `try_assembled`).
        if value.is_output
            || self.options.blockwise
            || !self.options.alias
            || !matches!(self.rules[*concat], ReuseRule::ConcatSlices)
            || !slices(*concat)
            || node.inputs.iter().filter(|&&v| v == Some(out)).count() != 1
        {
            return false;
        }
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
                    members: vec![(i, 0)],
                });
            }
        }
        let mut grouping = Grouping {
            graph,
            tensors,
            tensor_of: &self.tensor_of,
            buffer_of,
            buffers,
            sharing: vec![None; tensors.len()],
            strides: vec![None; tensors.len()],
            part_of: vec![None; tensors.len()],
            alignment: options.alignment.max(1),
            strided: options.strided,
            blockwise: options.blockwise,
        };
        // A unit's nodes run as one kernel: none of them shares bytes.
        let mut in_unit = vec![false; graph.nodes.len()];
        for u in &graph.units {
            u.nodes
                .iter()
                .chain(&u.shared)
                .for_each(|&n| in_unit[n] = true);
        }
        for (step, &node_id) in self.order.iter().enumerate() {
            if in_unit[node_id] {
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
            tensors: self.tensors.clone(),
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

/// Mutable state of the grouping walk.
struct Grouping<'a> {
    graph: &'a Graph,
    tensors: &'a [TensorLife],
    tensor_of: &'a [Option<usize>],
    buffer_of: Vec<Option<usize>>,
    buffers: Vec<Buffer>,
    sharing: Vec<Option<Sharing>>,
    strides: Vec<Option<Vec<u64>>>,
    part_of: Vec<Option<(usize, u64)>>,
    alignment: u64,
    strided: bool,
    blockwise: bool,
}

impl Grouping<'_> {
    fn tensor(&self, value: Option<ValueId>) -> Option<usize> {
        self.tensor_of[value?]
    }

    /// The arena tensor behind a node input or output, if it is alone in its buffer.
    fn single(&self, tensor: usize) -> Option<usize> {
        let b = self.buffer_of[tensor]?;
        (self.buffers[b].members.len() == 1).then_some(b)
    }

    fn offset_of(&self, tensor: usize) -> u64 {
        let b = self.buffer_of[tensor].expect("tensor is in the arena");
        self.buffers[b]
            .members
            .iter()
            .find(|m| m.0 == tensor)
            .expect("member of its buffer")
            .1
    }

    /// Moves the single-member buffer of `tensor` into buffer `into` at byte `offset`.
    fn join(&mut self, tensor: usize, into: usize, offset: u64) {
        let own = self.buffer_of[tensor].expect("tensor is in the arena");
        let Buffer { first, last, .. } = self.buffers[own];
        self.buffers[own].members.clear();
        let bytes = self.tensors[tensor].bytes.unwrap_or(0);
        let target = &mut self.buffers[into];
        target.members.push((tensor, offset));
        target.bytes = target.bytes.max(offset + bytes);
        target.first = target.first.min(first);
        target.last = target.last.max(last);
        self.buffer_of[tensor] = Some(into);
    }

    /// Whether `out` can take the bytes of `input` element for element: always for a
    /// row-major input, and for a strided view only with the same shape (so the same strides).
    fn keeps_layout(&self, input: usize, out: usize) -> bool {
        self.strides[input].is_none()
            || self
                .shape_and_elem(input)
                .is_some_and(|a| Some(a) == self.shape_and_elem(out))
    }

    fn elem_bits(&self, tensor: usize) -> Option<u32> {
        self.graph.values[self.tensors[tensor].value]
            .tensor_type()?
            .dtype
            .bits()
    }

    fn try_inplace(&mut self, node_id: NodeId, step: usize, candidates: &[usize]) {
        let node = &self.graph.nodes[node_id];
        let Some(out) = self.tensor(node.outputs.first().copied().flatten()) else {
            return;
        };
        if self.single(out).is_none() {
            return;
        }
        // Under `blockwise`, a slice of a buffer that lives on is overwritten first: the
        // output then lies where a Concat of such outputs can take it (see `try_assembled`).
        let mut slots = candidates.to_vec();
        if self.blockwise {
            let lives_on = |slot: &usize| {
                self.tensor(node.inputs.get(*slot).copied().flatten())
                    .and_then(|t| self.buffer_of[t])
                    .is_some_and(|b| self.buffers[b].last > step)
            };
            slots.sort_by_key(|s| !lives_on(s));
        }
        for slot in slots {
            let Some(input) = self.tensor(node.inputs.get(slot).copied().flatten()) else {
                continue;
            };
            let Some(b) = self.buffer_of[input] else {
                continue;
            };
            let group = &self.buffers[b];
            let sizes_match = self.tensors[input].bytes == self.tensors[out].bytes
                && self.elem_bits(input) == self.elem_bits(out);
            let protected = group
                .members
                .iter()
                .any(|&(m, _)| self.tensors[m].kind != TensorKind::Intermediate);
            // No other input of the node may share bytes with the overwritten group.
            let other_reader = node.inputs.iter().flatten().any(|&v| {
                self.tensor_of[v].is_some_and(|t| t != input && self.buffer_of[t] == Some(b))
            });
            let freed = || {
                self.extent(input, self.offset_of(input))
                    .is_some_and(|bytes| self.unread_from(b, bytes, step + 1, &[]))
            };
            let dies = group.last == step || (self.blockwise && freed());
            if sizes_match && dies && !protected && !other_reader && self.keeps_layout(input, out) {
                let offset = self.offset_of(input);
                self.join(out, b, offset);
                self.strides[out] = self.strides[input].clone();
                self.sharing[out] = Some(Sharing::InPlace { of: input });
                return;
            }
        }
    }

    /// Input 0 and output 0 of a node as tensors, with input 0's buffer, when both are in
    /// the arena.
    fn first_input_and_output(&self, node_id: NodeId) -> Option<(usize, usize, usize)> {
        let node = &self.graph.nodes[node_id];
        let input = self.tensor(node.inputs.first().copied().flatten())?;
        let out = self.tensor(node.outputs.first().copied().flatten())?;
        Some((input, out, self.buffer_of[input]?))
    }

    fn try_alias(&mut self, node_id: NodeId) {
        let Some((input, out, b)) = self.first_input_and_output(node_id) else {
            return;
        };
        if self.single(out).is_none()
            || self.tensors[input].bytes != self.tensors[out].bytes
            || !self.keeps_layout(input, out)
        {
            return;
        }
        let offset = self.offset_of(input);
        self.join(out, b, offset);
        self.strides[out] = self.strides[input].clone();
        self.sharing[out] = Some(Sharing::Alias {
            of: input,
            offset: None,
        });
    }

    /// The byte range of member `m` placed `at` bytes into its buffer: its bytes, or its
    /// footprint when strided (`None` when its shape is unknown).
    fn extent(&self, m: usize, at: u64) -> Option<(u64, u64)> {
        let span = match &self.strides[m] {
            None => self.tensors[m].bytes?,
            Some(strides) => {
                let (shape, elem) = self.shape_and_elem(m)?;
                footprint(&shape, strides, elem)
            }
        };
        Some((at, at + span))
    }

    /// Whether no member of buffer `b` that shares a byte with `lo..hi`, other than those of
    /// `except`, is read at step `from` or later: those bytes are then free from `from` on,
    /// whatever else the buffer still holds (the other slices of a split tensor).
    fn unread_from(&self, b: usize, (lo, hi): (u64, u64), from: usize, except: &[usize]) -> bool {
        self.buffers[b].members.iter().all(|&(m, at)| {
            except.contains(&m)
                || self
                    .extent(m, at)
                    .is_some_and(|(l, h)| h <= lo || l >= hi || self.tensors[m].last < from)
        })
    }

    fn try_concat(&mut self, node_id: NodeId, step: usize) {
        let node = &self.graph.nodes[node_id];
        let Some(out) = self.tensor(node.outputs.first().copied().flatten()) else {
            return;
        };
        let Some(into) = self.single(out) else { return };
        let Some((offsets, bits)) = self.slice_layout(out, &node.inputs, node) else {
            if self.strided {
                self.try_strided_concat(node_id, out, into);
            }
            return;
        };
        if !bits.is_multiple_of(8) {
            return;
        }
        if self.blockwise && self.try_assembled(node_id, step, out, &offsets) {
            return;
        }
        let inputs: Vec<Option<usize>> = node.inputs.iter().map(|&v| self.tensor(v)).collect();
        for (k, (&input, &offset)) in inputs.iter().zip(&offsets).enumerate() {
            let Some(input) = input else { continue };
            let repeated = inputs
                .iter()
                .enumerate()
                .any(|(j, &o)| j != k && o == Some(input));
            let eligible = self.tensors[input].kind == TensorKind::Intermediate
                && self.single(input).is_some()
                && self.tensors[input].bytes.is_some_and(|b| b > 0)
                && offset.is_multiple_of(self.alignment)
                && !repeated;
            if eligible {
                self.join(input, into, offset);
                self.sharing[input] = Some(Sharing::Alias {
                    of: out,
                    offset: Some(offset),
                });
            }
        }
    }

    /// A Concat whose parts already lie in one buffer as its output's slices would (part `k`
    /// at `base + offsets[k]`, one `base`, as a row chain's blocks written over the rows of
    /// their input leave them): the output `out` takes those bytes, each part becoming its
    /// slice, when no other member sharing them is read at `step` or later. A part that is
    /// itself an alias (a Reshape of a block's result) is not taken: an entry names one
    /// tensor it is a view of. Returns whether it did.
    fn try_assembled(&mut self, node_id: NodeId, step: usize, out: usize, offsets: &[u64]) -> bool {
        let node = &self.graph.nodes[node_id];
        let Some(parts) = node
            .inputs
            .iter()
            .map(|&v| self.tensor(v))
            .collect::<Option<Vec<usize>>>()
        else {
            return false;
        };
        let (Some(&first), Some(bytes)) = (parts.first(), self.tensors[out].bytes) else {
            return false;
        };
        let Some(b) = self.buffer_of[first] else {
            return false;
        };
        let Some(base) = self.offset_of(first).checked_sub(offsets[0]) else {
            return false;
        };
        let laid_out = parts.iter().zip(offsets).all(|(&p, &offset)| {
            self.buffer_of[p] == Some(b)
                && self.offset_of(p) == base + offset
                && self.strides[p].is_none()
                && self.part_of[p].is_none()
                && !matches!(self.sharing[p], Some(Sharing::Alias { .. }))
                && self.tensors[p].kind == TensorKind::Intermediate
        });
        let others_done = self.unread_from(b, (base, base + bytes), step, &parts);
        if !laid_out
            || !others_done
            || self.tensors[out].kind != TensorKind::Intermediate
            || !base.is_multiple_of(self.alignment)
        {
            return false;
        }
        self.join(out, b, base);
        for (&p, &offset) in parts.iter().zip(offsets) {
            self.part_of[p] = Some((out, offset));
        }
        true
    }

    /// A Concat whose parts are strided in its output (`out`, alone in buffer `into`): each
    /// part's group (the part, tensors written in place with it, views of it) moves into the
    /// output as strided views, when every member has the part's shape or is a view of it.
    fn try_strided_concat(&mut self, node_id: NodeId, out: usize, into: usize) {
        let node = &self.graph.nodes[node_id];
        let Some((whole, elem)) = self.shape_and_elem(out) else {
            return;
        };
        let rank = whole.len() as i64;
        let axis = node.attr_int("axis").unwrap_or(0);
        let Ok(axis) = usize::try_from(if axis < 0 { axis + rank } else { axis }) else {
            return;
        };
        if axis >= whole.len() {
            return;
        }
        let mut starts = Vec::with_capacity(node.inputs.len());
        let mut at = 0i64;
        for &v in &node.inputs {
            let Some(part) =
                v.and_then(|v| concrete(self.graph.values[v].tensor_type()?.shape.as_ref()?))
            else {
                return;
            };
            if part.len() != whole.len() {
                return;
            }
            starts.push(at);
            at += part[axis];
        }
        if at != whole[axis] {
            return;
        }
        let strides = row_major(&whole, elem);
        let inputs: Vec<Option<usize>> = node.inputs.iter().map(|&v| self.tensor(v)).collect();
        for (k, &input) in inputs.iter().enumerate() {
            let Some(part) = input else { continue };
            let repeated = inputs
                .iter()
                .enumerate()
                .any(|(j, &o)| j != k && o == Some(part));
            let eligible = self.tensors[part].kind == TensorKind::Intermediate
                && self.tensors[part].bytes.is_some_and(|b| b > 0)
                && self.buffer_of[part].is_some_and(|b| b != into)
                && !repeated;
            if eligible {
                let base = starts[k] as u64 * strides[axis];
                self.relocate(part, into, base, &strides, out);
            }
        }
    }

    /// The concrete shape of a tensor and its bytes per element (whole bytes only).
    fn shape_and_elem(&self, tensor: usize) -> Option<(Vec<i64>, u64)> {
        let ty = self.graph.values[self.tensors[tensor].value].tensor_type()?;
        let bits = ty.dtype.bits()?;
        if bits == 0 || !bits.is_multiple_of(8) {
            return None;
        }
        Some((concrete(ty.shape.as_ref()?)?, u64::from(bits / 8)))
    }

    /// Moves the group of `part` into buffer `into` as strided views starting `base` bytes in
    /// with byte `strides`, `part` becoming a view of `out`. Members of the part's shape at
    /// its start are laid out as the part; members that are row-major views of it keep their
    /// index inside it. Any other member leaves the group where it is.
    fn relocate(&mut self, part: usize, into: usize, base: u64, strides: &[u64], out: usize) {
        let Some(b) = self.buffer_of[part] else {
            return;
        };
        let Some((shape, elem)) = self.shape_and_elem(part) else {
            return;
        };
        let inner = row_major(&shape, elem);
        let part_offset = self.offset_of(part);
        let mut moved = Vec::with_capacity(self.buffers[b].members.len());
        for &(m, at) in &self.buffers[b].members {
            let Some((m_shape, m_elem)) = self.shape_and_elem(m) else {
                return;
            };
            if m_elem != elem
                || m_shape.len() != shape.len()
                || self.tensors[m].kind != TensorKind::Intermediate
                || at < part_offset
            {
                return;
            }
            let full_alias = matches!(self.sharing[m], Some(Sharing::Alias { .. }));
            let index = match &self.strides[m] {
                None if at == part_offset && m_shape == shape && !full_alias => {
                    vec![0; shape.len()]
                }
                Some(t) if *t == inner => {
                    match index_of(at - part_offset, &inner, &shape, &m_shape) {
                        Some(index) => index,
                        None => return,
                    }
                }
                _ => return,
            };
            moved.push((m, base + offset_of(&index, strides), m_shape));
        }
        let Buffer { first, last, .. } = self.buffers[b];
        self.buffers[b].members.clear();
        let target = &mut self.buffers[into];
        target.first = target.first.min(first);
        target.last = target.last.max(last);
        for (m, at, m_shape) in &moved {
            target.members.push((*m, *at));
            target.bytes = target.bytes.max(at + footprint(m_shape, strides, elem));
            self.buffer_of[*m] = Some(into);
            self.strides[*m] = Some(strides.to_vec());
        }
        let new_offset = |t: usize| moved.iter().find(|m| m.0 == t).map(|m| m.1);
        for &(m, at, _) in &moved {
            if let Some((of, _)) = self.part_of[m]
                && let Some(parent) = new_offset(of)
            {
                self.part_of[m] = Some((of, at - parent));
            }
        }
        self.part_of[part] = Some((out, base));
    }

    fn try_split(&mut self, node_id: NodeId) {
        let node = &self.graph.nodes[node_id];
        let Some(input) = self.tensor(node.inputs.first().copied().flatten()) else {
            return;
        };
        let Some(b) = self.buffer_of[input] else {
            return;
        };
        if self.tensors[input].kind == TensorKind::Constant || self.strides[input].is_some() {
            return;
        }
        let Some((offsets, _)) = self.slice_layout(input, &node.outputs, node) else {
            return;
        };
        let base = self.offset_of(input);
        for (&value, &offset) in node.outputs.iter().zip(&offsets) {
            let Some(out) = self.tensor(value) else {
                continue;
            };
            if self.single(out).is_some() && offset.is_multiple_of(self.alignment) {
                self.join(out, b, base + offset);
                self.sharing[out] = Some(Sharing::Alias {
                    of: input,
                    offset: Some(offset),
                });
            }
        }
    }

    fn try_view(&mut self, node_id: NodeId) {
        let Some((input, out, b)) = self.first_input_and_output(node_id) else {
            return;
        };
        let Some(offset) = view_offset(self.graph, &self.graph.nodes[node_id]) else {
            return;
        };
        if self.strides[input].is_some() {
            return;
        }
        if self.single(out).is_some()
            && self.tensors[out].bytes.is_some_and(|n| n > 0)
            && offset.is_multiple_of(self.alignment)
        {
            let base = self.offset_of(input);
            self.join(out, b, base + offset);
            self.sharing[out] = Some(Sharing::Alias {
                of: input,
                offset: Some(offset),
            });
        }
    }

    /// Offsets of `parts` as contiguous slices of `whole` along the node's `axis` attribute.
    fn slice_layout(
        &self,
        whole: usize,
        parts: &[Option<ValueId>],
        node: &crate::ir::Node,
    ) -> Option<(Vec<u64>, u32)> {
        let ty = self.graph.values[self.tensors[whole].value].tensor_type()?;
        let shape = concrete(ty.shape.as_ref()?)?;
        let rank = i64::try_from(shape.len()).ok()?;
        let axis = node.attr_int("axis").unwrap_or(0);
        let axis = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
        let extents = parts
            .iter()
            .map(|&v| {
                let t = self.graph.values[v?].tensor_type()?;
                (t.dtype == ty.dtype).then_some(())?;
                concrete(t.shape.as_ref()?)?.get(axis).copied()
            })
            .collect::<Option<Vec<i64>>>()?;
        let bits = ty.dtype.bits()?;
        Some((slice_offsets(&shape, axis, &extents, bits)?, bits))
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
        let axis = |mut n: NodeProto| {
            n.attribute.push(crate::onnx::proto::AttributeProto {
                name: Some("axis".into()),
                r#type: Some(2),
                i: Some(1),
                ..Default::default()
            });
            n
        };
        let mut g = typed(
            vec![
                node("Relu", &["x_in"], &["x"]),
                axis(node("Split", &["x"], &["x0", "x1"])),
                node("Neg", &["x0"], &["h0"]),
                node("Add", &["h0", "x0"], &["y0"]),
                node("Neg", &["x1"], &["h1"]),
                node("Add", &["h1", "x1"], &["y1"]),
                axis(node("Concat", &["y0", "y1"], &["y"])),
                node("Relu", &["y"], &["out"]),
            ],
            "x_in",
            "out",
        );
        for name in ["x0", "x1", "h0", "h1", "y0", "y1"] {
            let v = g.value_id(name).unwrap();
            g.values[v].ty = Some(ValueType::tensor(DType::Float, known_shape(&[1, 4])));
        }
        let order: Vec<usize> = (0..8).collect();
        let options = LivenessOptions {
            alignment: 1,
            ..LivenessOptions::default()
        };
        let index = |l: &Liveness, n: &str| {
            l.tensors
                .iter()
                .position(|t| g.values[t.value].name == n)
                .unwrap()
        };
        let plain = analyse(&g, order.clone(), options).unwrap();
        assert_eq!(sharing_of(&g, &plain, "x0"), Some(("x".into(), "alias")));
        assert_eq!(sharing_of(&g, &plain, "y0"), Some(("y".into(), "alias")));
        assert_eq!(sharing_of(&g, &plain, "y1"), Some(("y".into(), "alias")));
        assert_eq!(plain.part_of[index(&plain, "y1")], None);
        assert_eq!(plain.offset_in_buffer(index(&plain, "y1")), Some(16));
        assert_ne!(
            plain.buffer_of[index(&plain, "y")],
            plain.buffer_of[index(&plain, "x")]
        );

        let blockwise = LivenessOptions {
            blockwise: true,
            ..options
        };
        let l = analyse(&g, order, blockwise).unwrap();
        assert_eq!(sharing_of(&g, &l, "y0"), Some(("x0".into(), "inplace")));
        assert_eq!(sharing_of(&g, &l, "y1"), Some(("x1".into(), "inplace")));
        let (x, y) = (index(&l, "x"), index(&l, "y"));
        assert_eq!(l.buffer_of[y], l.buffer_of[x]);
        assert_eq!(l.offset_in_buffer(y), Some(0));
        assert_eq!(l.offset_in_buffer(index(&l, "y1")), Some(16));
        assert_eq!(l.part_of[index(&l, "y0")], Some((y, 0)));
        assert_eq!(l.part_of[index(&l, "y1")], Some((y, 16)));
        let b = &l.buffers[l.buffer_of[x].unwrap()];
        assert_eq!((b.first, b.bytes), (0, 32));
    }
}
