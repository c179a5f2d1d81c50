//! The grouping walk's state and its moves: each node's in-place overwrite, alias or slice
//! alias (Concat parts, Split parts, Slice views, strided parts of split tiles, row blocks written
//! in place), tried in execution order by [`super::groups::Analyser::run`].

use super::groups::{Buffer, Sharing};
use super::lifetimes::{TensorKind, TensorLife};
use super::known::Known;
use super::rules::slice_offsets;
use super::strided::{footprint, is_row_major, restrided, row_major};
use crate::ir::{Graph, NodeId, NodeUnit, ValueId};
use std::sync::Arc;

/// Mutable state of the grouping walk.
pub(super) struct Grouping<'a> {
    pub(super) graph: &'a Graph,
    pub(super) tensors: &'a [TensorLife],
    pub(super) tensor_of: &'a [Option<usize>],
    pub(super) known: &'a Known<'a>,
    pub(super) buffer_of: Vec<Option<usize>>,
    pub(super) buffers: Vec<Buffer>,
    pub(super) sharing: Vec<Option<Sharing>>,
    pub(super) strides: Vec<Option<Arc<[u64]>>>,
    pub(super) part_of: Vec<Option<(usize, u64)>>,
    /// Each arena tensor's byte offset inside its buffer (the offset its buffer's `members`
    /// records, kept here so that finding it costs no scan of a large group).
    pub(super) offsets: Vec<u64>,
    pub(super) alignment: u64,
    pub(super) strided: bool,
    pub(super) blockwise: bool,
}

impl<'a> Grouping<'a> {
    pub(super) fn tensor(&self, value: Option<ValueId>) -> Option<usize> {
        self.tensor_of[value?]
    }

    /// The arena tensor behind a node input or output, if it is alone in its buffer.
    fn single(&self, tensor: usize) -> Option<usize> {
        let b = self.buffer_of[tensor]?;
        (self.buffers[b].members.len() == 1).then_some(b)
    }

    fn offset_of(&self, tensor: usize) -> u64 {
        debug_assert!(self.buffer_of[tensor].is_some(), "tensor is in the arena");
        self.offsets[tensor]
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
        self.offsets[tensor] = offset;
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

    pub(super) fn try_inplace(&mut self, node_id: NodeId, step: usize, candidates: &[usize]) {
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
            let sizes_match = || {
                self.tensors[input].bytes == self.tensors[out].bytes
                    && self.elem_bits(input) == self.elem_bits(out)
            };
            let protected = || {
                group
                    .members
                    .iter()
                    .any(|&(m, _)| self.tensors[m].kind != TensorKind::Intermediate)
            };
            // No other input of the node may share bytes with the overwritten group.
            let other_reader = || {
                node.inputs.iter().flatten().any(|&v| {
                    self.tensor_of[v].is_some_and(|t| t != input && self.buffer_of[t] == Some(b))
                })
            };
            let freed = || {
                self.extent(input, self.offset_of(input))
                    .is_some_and(|bytes| self.unread_from(b, bytes, step + 1, &[]))
            };
            let dies = || group.last == step || (self.blockwise && freed());
            // The cheap tests first: a group's members are scanned only for a candidate that
            // passes them.
            if sizes_match()
                && !other_reader()
                && self.keeps_layout(input, out)
                && !protected()
                && dies()
            {
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

    pub(super) fn try_alias(&mut self, node_id: NodeId) {
        let Some((input, out, b)) = self.first_input_and_output(node_id) else {
            return;
        };
        self.alias_whole(input, out, b);
    }

    /// A QDQ node unit whose operator only reinterprets its input's bytes (a Reshape-like
    /// operator whose Q and DQ share scale and zero point: onnxruntime drops the pair and
    /// reshapes the integers): the unit's integer output takes the bytes of the integer input
    /// its DQ reads, as the operator's output would take its input's.
    pub(super) fn try_unit_alias(&mut self, unit: &NodeUnit) {
        let graph = self.graph;
        let op = &graph.nodes[unit.op];
        let same_params = crate::units::table::rule_for(op)
            .is_some_and(|r| r.types == crate::units::table::Types::SameParams);
        let data = op.inputs.first().copied().flatten();
        let made = op.outputs.first().copied().flatten();
        let (true, Some(data), Some(made)) = (same_params, data, made) else {
            return;
        };
        let dq = graph.values[data].producer;
        let dq_input = dq
            .filter(|dq| unit.nodes.contains(dq) || unit.shared.contains(dq))
            .and_then(|dq| graph.nodes[dq].inputs.first().copied().flatten());
        let q_output = match graph.values[made].consumers.as_slice() {
            [q] if unit.nodes.contains(q) => graph.nodes[*q].outputs.first().copied().flatten(),
            _ => None,
        };
        let (Some(input), Some(out)) = (self.tensor(dq_input), self.tensor(q_output)) else {
            return;
        };
        if let Some(b) = self.buffer_of[input] {
            self.alias_whole(input, out, b);
        }
    }

    /// Makes `out` an alias of the whole of `input` (in buffer `b`) when `out` is alone in its
    /// buffer, as large, and can take `input`'s layout.
    fn alias_whole(&mut self, input: usize, out: usize, b: usize) {
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
                footprint(shape, strides, elem)
            }
        };
        Some((at, at + span))
    }

    /// Whether no member of buffer `b` that shares a byte with `lo..hi`, other than those of
    /// `except`, is read at step `from` or later: those bytes are then free from `from` on,
    /// whatever else the buffer still holds (the other slices of a split tensor).
    fn unread_from(&self, b: usize, (lo, hi): (u64, u64), from: usize, except: &[usize]) -> bool {
        self.buffers[b].members.iter().all(|&(m, at)| {
            let read = self.tensors[m].last >= from;
            // A row-major member read no more needs no extent (it has one: its bytes).
            let unread_row_major = !read && self.strides[m].is_none();
            except.contains(&m)
                || (unread_row_major && self.tensors[m].bytes.is_some())
                || self
                    .extent(m, at)
                    .is_some_and(|(l, h)| h <= lo || l >= hi || !read)
        })
    }

    pub(super) fn try_concat(&mut self, node_id: NodeId, step: usize) {
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
            let repeated = read_twice(&inputs, k);
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
            } else if self.strided && self.blockwise && !repeated {
                // A block written in place over its own intermediate (blocks reading their
                // input's rows may write in place, see `try_inplace`): its whole group moves
                // into the output, as a strided part does.
                self.try_relocated_part(input, into, offset, out);
            }
        }
    }

    /// Moves the group of `part` (not alone in its buffer) into the output `out` (buffer
    /// `into`) as views at `offset` bytes, with the output's row-major strides.
    fn try_relocated_part(&mut self, part: usize, into: usize, offset: u64, out: usize) {
        let Some((whole, elem)) = self.shape_and_elem(out) else {
            return;
        };
        if self.movable(part, into) {
            let strides: Arc<[u64]> = row_major(whole, elem).into();
            self.relocate(part, into, offset, &strides, out);
        }
    }

    /// Whether `part`'s group may move into buffer `into`: an intermediate of some bytes,
    /// held in another buffer.
    fn movable(&self, part: usize, into: usize) -> bool {
        self.tensors[part].kind == TensorKind::Intermediate
            && self.tensors[part].bytes.is_some_and(|b| b > 0)
            && self.buffer_of[part].is_some_and(|b| b != into)
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
            let Some(part) = v.and_then(|v| self.known.shape(v)) else {
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
        // Shared by every view the parts' members become.
        let strides: Arc<[u64]> = row_major(whole, elem).into();
        let inputs: Vec<Option<usize>> = node.inputs.iter().map(|&v| self.tensor(v)).collect();
        for (k, &input) in inputs.iter().enumerate() {
            let Some(part) = input else { continue };
            let repeated = read_twice(&inputs, k);
            let eligible = self.movable(part, into) && !repeated;
            if eligible {
                let base = starts[k] as u64 * strides[axis];
                self.relocate(part, into, base, &strides, out);
            }
        }
    }

    /// The concrete shape of a tensor and its bytes per element (whole bytes only).
    fn shape_and_elem(&self, tensor: usize) -> Option<(&'a [i64], u64)> {
        let value = self.tensors[tensor].value;
        let bits = self.graph.values[value].tensor_type()?.dtype.bits()?;
        if bits == 0 || !bits.is_multiple_of(8) {
            return None;
        }
        let known: &'a Known<'a> = self.known;
        Some((known.shape(value)?, u64::from(bits / 8)))
    }

    /// Moves the group of `part` into buffer `into` as strided views starting `base` bytes in
    /// with byte `strides`, `part` becoming a view of `out`. Members of the part's shape at
    /// its start are laid out as the part; members that are row-major views of it keep their
    /// index inside it. Any other member leaves the group where it is.
    fn relocate(&mut self, part: usize, into: usize, base: u64, strides: &Arc<[u64]>, out: usize) {
        let Some(b) = self.buffer_of[part] else {
            return;
        };
        let Some((shape, elem)) = self.shape_and_elem(part) else {
            return;
        };
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
            let offset = match &self.strides[m] {
                None if at == part_offset && m_shape == shape && !full_alias => 0,
                Some(t) if is_row_major(t, shape, elem) => {
                    match restrided(at - part_offset, t, shape, m_shape, strides) {
                        Some(offset) => offset,
                        None => return,
                    }
                }
                _ => return,
            };
            moved.push((m, base + offset, m_shape));
        }
        let Buffer { first, last, .. } = self.buffers[b];
        self.buffers[b].members.clear();
        let target = &mut self.buffers[into];
        target.first = target.first.min(first);
        target.last = target.last.max(last);
        for (m, at, m_shape) in &moved {
            target.members.push((*m, *at));
            target.bytes = target.bytes.max(at + footprint(m_shape, strides, elem));
            self.offsets[*m] = *at;
            self.buffer_of[*m] = Some(into);
            self.strides[*m] = Some(Arc::clone(strides));
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

    pub(super) fn try_split(&mut self, node_id: NodeId) {
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

    pub(super) fn try_view(&mut self, node_id: NodeId) {
        let Some((input, out, b)) = self.first_input_and_output(node_id) else {
            return;
        };
        let Some(offset) = self.known.view_offset(node_id) else {
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
    pub(super) fn slice_layout(
        &self,
        whole: usize,
        parts: &[Option<ValueId>],
        node: &crate::ir::Node,
    ) -> Option<(Vec<u64>, u32)> {
        let ty = self.graph.values[self.tensors[whole].value].tensor_type()?;
        let shape = self.known.shape(self.tensors[whole].value)?;
        let rank = i64::try_from(shape.len()).ok()?;
        let axis = node.attr_int("axis").unwrap_or(0);
        let axis = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
        let extents = parts
            .iter()
            .map(|&v| {
                let t = self.graph.values[v?].tensor_type()?;
                (t.dtype == ty.dtype).then_some(())?;
                self.known.shape(v?)?.get(axis).copied()
            })
            .collect::<Option<Vec<i64>>>()?;
        let bits = ty.dtype.bits()?;
        Some((slice_offsets(shape, axis, &extents, bits)?, bits))
    }
}

/// Whether the tensor of input `k` is also another input of the node (a Concat of `x` with
/// itself: one tensor cannot be two slices of the output).
fn read_twice(inputs: &[Option<usize>], k: usize) -> bool {
    inputs[k].is_some_and(|t| {
        inputs
            .iter()
            .enumerate()
            .any(|(j, &o)| j != k && o == Some(t))
    })
}
