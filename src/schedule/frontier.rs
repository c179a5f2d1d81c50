//! Minimum-peak ordering by dynamic programming over frontiers (the sets of executed nodes),
//! level by level. At each level the states are the distinct executed sets reached; two paths
//! to the same set leave the same tensors live, so only the lower peak is kept. While every
//! level holds at most `width` states the result is exact for the memory model; beyond that
//! the best `width` states by (peak, live bytes) survive, which makes it a beam search.
//!
//! The memory model knows the sharing rules: a Reshape-like output adds no bytes and keeps its
//! input's bytes live while it is read; an in-place output takes the bytes of the input that
//! dies at its node. A ready node that raises neither the live bytes nor the peak is run at
//! once without branching: moving such a node earlier never raises any later step, so this
//! keeps the search exact while collapsing the many cheap shape-computation chains.
//!
//! It runs over [`Steps`]: a QDQ node unit is one step, holding what it reads while it writes.

use std::collections::HashMap;

use crate::ir::{Graph, NodeId, ValueId};
use crate::liveness::rules::{ReuseRule, node_rule};
use crate::plan::rng::mix;

use super::steps::Steps;

/// A frontier-search result.
pub struct FrontierOrder {
    /// The order found.
    pub order: Vec<NodeId>,
    /// True when no level had to drop states, so the order is optimal for the memory model.
    pub exact: bool,
}

/// The sharing-aware memory model: values merged into buffers by the alias rules.
struct Model {
    /// Bytes of each buffer.
    bytes: Vec<u64>,
    /// Steps that read each buffer, through any of its values (alias nodes included).
    readers: Vec<Vec<usize>>,
    /// Step producing each buffer's first value (`None`: present from the start).
    producer: Vec<Option<usize>>,
    /// Buffers that hold a graph output and so never die.
    pinned: Vec<bool>,
    /// Per step: buffers it reads.
    reads: Vec<Vec<usize>>,
    /// Per step: bytes of the new buffers it writes.
    writes: Vec<u64>,
    /// Per step: buffers of the inputs it may overwrite in place.
    inplace: Vec<Vec<usize>>,
    /// Per step: the steps it waits for.
    preds: Vec<Vec<usize>>,
    /// Per step: the steps that read its outputs.
    succs: Vec<Vec<usize>>,
}

impl Model {
    /// The memory model of `steps` (a unit's float tensors cost nothing: `bytes_of` gives
    /// them 0).
    fn new(graph: &Graph, steps: &Steps, bytes_of: &dyn Fn(ValueId) -> u64) -> Model {
        let n = graph.nodes.len();
        let rules: Vec<ReuseRule> = graph.nodes.iter().map(|n| node_rule(graph, n)).collect();
        // Alias outputs join their input's buffer.
        let mut root: Vec<ValueId> = (0..graph.values.len()).collect();
        let mut alias_node = vec![false; n];
        for (id, node) in graph.nodes.iter().enumerate() {
            if rules[id] == ReuseRule::Alias
                && let (Some(Some(input)), Some(Some(output))) =
                    (node.inputs.first(), node.outputs.first())
                && bytes_of(*input) > 0
                && bytes_of(*input) == bytes_of(*output)
                && !graph.values[*output].is_output
            {
                root[*output] = root[*input];
                alias_node[id] = true;
            }
        }
        // Roots are assigned before their aliases in node order, but an alias can be lowered
        // before its input's producer in a non-topological model: resolve chains fully.
        for v in 0..root.len() {
            let mut r = root[v];
            while root[r] != r {
                r = root[r];
            }
            root[v] = r;
        }
        let mut buffer_index: HashMap<ValueId, usize> = HashMap::new();
        let mut buffer_of = vec![None; graph.values.len()];
        let (mut bytes, mut readers, mut producer, mut pinned) = (vec![], vec![], vec![], vec![]);
        for (v, value) in graph.values.iter().enumerate() {
            let r = root[v];
            if bytes_of(r) == 0 {
                continue;
            }
            let b = *buffer_index.entry(r).or_insert_with(|| {
                bytes.push(bytes_of(r));
                readers.push(Vec::new());
                producer.push(graph.values[r].producer.map(|p| steps.of[p]));
                pinned.push(false);
                bytes.len() - 1
            });
            buffer_of[v] = Some(b);
            pinned[b] |= value.is_output;
            // Alias nodes read the buffer too: when nothing reads the alias's output, the
            // buffer dies at the alias node, and it is freed exactly once, at its last reader.
            readers[b].extend(&steps.readers[v]);
        }
        for r in &mut readers {
            r.sort_unstable();
            r.dedup();
        }
        let count = steps.nodes.len();
        let mut reads = Vec::with_capacity(count);
        let mut writes = Vec::with_capacity(count);
        let mut inplace = Vec::with_capacity(count);
        let mut succs = vec![Vec::new(); count];
        // Bytes of the new buffers a node writes (none for an alias).
        let written = |id: NodeId| -> u64 {
            match alias_node[id] {
                true => 0,
                false => graph.nodes[id]
                    .outputs
                    .iter()
                    .flatten()
                    .map(|&v| bytes_of(v))
                    .sum(),
            }
        };
        for (s, members) in steps.nodes.iter().enumerate() {
            let mut r: Vec<usize> = steps.reads[s].iter().filter_map(|&v| buffer_of[v]).collect();
            r.sort_unstable();
            r.dedup();
            for &q in &steps.preds[s] {
                succs[q].push(s);
            }
            writes.push(members.iter().map(|&id| written(id)).sum());
            let mut over: Vec<usize> = Vec::new();
            for &id in members {
                if let ReuseRule::InPlace(slots) = rules[id] {
                    over.extend(
                        slots
                            .iter()
                            .filter_map(|&slot| graph.nodes[id].inputs.get(slot).copied().flatten())
                            .filter_map(|v| buffer_of[v])
                            .filter(|b| r.contains(b)),
                    );
                }
            }
            inplace.push(over);
            reads.push(r);
        }
        Model {
            bytes,
            readers,
            producer,
            pinned,
            reads,
            writes,
            inplace,
            preds: steps.preds.clone(),
            succs,
        }
    }
}

/// One search state: an executed set (with its Zobrist key), the bytes live after it, the
/// best peak reaching it, and the nodes ready to run (with what each frees, once known).
#[derive(Default)]
struct State {
    done: Vec<u64>,
    key: u64,
    live: u64,
    peak: u64,
    ready: Vec<NodeId>,
    /// Per ready node: its [`freed_by`] once computed.
    freed: Vec<Option<(u64, u64)>>,
}

/// How a state was reached: its parent's index in the previous level, and the node run.
#[derive(Clone, Copy)]
struct Step {
    parent: u32,
    node: u32,
}

fn has(done: &[u64], node: NodeId) -> bool {
    done[node / 64] >> (node % 64) & 1 == 1
}

/// True when `a` plus node `x` is the same set as `b` plus node `y`.
fn same_set(a: &[u64], x: NodeId, b: &[u64], y: NodeId) -> bool {
    let bit = |w: usize, node: NodeId| {
        if w == node / 64 {
            1u64 << (node % 64)
        } else {
            0
        }
    };
    a.iter()
        .zip(b)
        .enumerate()
        .all(|(w, (&p, &q))| p | bit(w, x) == q | bit(w, y))
}

/// A move from a state of the current level, before the level is cut to the beam width.
struct Candidate {
    key: u64,
    parent: u32,
    node: u32,
    live: u64,
    peak: u64,
}

/// Hashes already-random Zobrist keys by taking them as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

type KeyMap = HashMap<u64, usize, std::hash::BuildHasherDefault<KeyHasher>>;

/// How wide the frontier search may go and how much work it may do.
#[derive(Clone, Copy, Debug)]
pub struct FrontierLimits {
    /// States kept per level at most.
    pub width: usize,
    /// States kept per level at least, whatever the budget.
    pub min_width: usize,
    /// Moves (state expansions) allowed over the whole search; the width of each level is
    /// cut so that the remaining levels fit the remaining budget.
    pub moves: usize,
}

/// Searches for a minimum-peak order of `steps` within `limits`; the order found is given
/// node by node.
pub fn frontier_order(
    graph: &Graph,
    steps: &Steps,
    bytes_of: &dyn Fn(ValueId) -> u64,
    limits: FrontierLimits,
) -> FrontierOrder {
    let model = Model::new(graph, steps, bytes_of);
    let n = steps.nodes.len();
    let zobrist: Vec<u64> = (0..n as u64)
        .map(|i| mix(i.wrapping_add(0x9e37_79b9_7f4a_7c15)))
        .collect();
    let start_live: u64 = (0..model.bytes.len())
        .filter(|&b| {
            model.producer[b].is_none() && (model.pinned[b] || !model.readers[b].is_empty())
        })
        .map(|b| model.bytes[b])
        .sum();
    let mut current = vec![State {
        done: vec![0; n.div_ceil(64)],
        key: 0,
        live: start_live,
        peak: start_live,
        ready: (0..n).filter(|&id| model.preds[id].is_empty()).collect(),
        freed: Vec::new(),
    }];
    current[0].freed = vec![None; current[0].ready.len()];
    let mut trail: Vec<Vec<Step>> = Vec::with_capacity(n);
    let mut exact = true;
    let mut moves: Vec<(NodeId, u64, u64)> = Vec::new();
    let mut spent = 0usize;
    // Reused from level to level: the candidates, their index, the states a level left
    // behind (their vectors refilled), and the scratch of `advance`.
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut index = KeyMap::default();
    let mut spare: Vec<State> = Vec::new();
    let mut scratch = Scratch {
        made: Vec::new(),
        mark: vec![0; n],
        tick: 0,
    };
    for level in 0..n {
        // Every move from every state, merged by executed set (keeping the lower peak).
        candidates.clear();
        index.clear();
        for parent in 0..current.len() {
            // A node that raises neither the live bytes nor the peak goes first, alone: the
            // first such in ready order, once found the others' moves are not needed.
            moves.clear();
            let state = &mut current[parent];
            for i in 0..state.ready.len() {
                let v = state.ready[i];
                let freed = match state.freed[i] {
                    Some(freed) => freed,
                    None => freed_by(&model, state, v),
                };
                state.freed[i] = Some(freed);
                let (live, transient) = state.after(&model, v, freed);
                if live <= state.live && transient <= state.peak {
                    moves.clear();
                    moves.push((v, live, transient));
                    break;
                }
                moves.push((v, live, transient));
            }
            let state = &current[parent];
            for &(v, live, transient) in &moves {
                let candidate = Candidate {
                    key: state.key ^ zobrist[v],
                    parent: parent as u32,
                    node: v as u32,
                    live,
                    peak: state.peak.max(transient),
                };
                match index.get(&candidate.key) {
                    Some(&i) => {
                        let other: &Candidate = &candidates[i];
                        let same = same_set(
                            &current[other.parent as usize].done,
                            other.node as usize,
                            &state.done,
                            v,
                        );
                        // A different set with the same key (vanishingly rare) is dropped.
                        if same && candidate.peak < other.peak {
                            candidates[i] = candidate;
                        }
                    }
                    None => {
                        index.insert(candidate.key, candidates.len());
                        candidates.push(candidate);
                    }
                }
            }
        }
        if candidates.is_empty() {
            break;
        }
        spent += candidates.len();
        // Moves per kept state at this level predict the next levels' cost.
        let per_state = candidates.len().div_ceil(current.len()).max(1);
        let left = limits.moves.saturating_sub(spent) / (n - level) / per_state;
        let width = left.clamp(limits.min_width, limits.width);
        if candidates.len() > width {
            exact = false;
            candidates.select_nth_unstable_by_key(width - 1, |c| (c.peak, c.live));
            candidates.truncate(width);
        }
        let mut next: Vec<State> = Vec::with_capacity(candidates.len());
        for c in &candidates {
            let mut state = spare.pop().unwrap_or_default();
            advance(&model, &current[c.parent as usize], c, &mut state, &mut scratch);
            next.push(state);
        }
        spare.append(&mut current);
        trail.push(
            candidates
                .iter()
                .map(|c| Step {
                    parent: c.parent,
                    node: c.node,
                })
                .collect(),
        );
        current = next;
    }
    // Walk back from the best final state.
    let (mut at, _) = current
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| s.peak)
        .expect("a final state");
    let mut order = Vec::with_capacity(n);
    for steps in trail.iter().rev() {
        let reached = steps[at];
        order.push(reached.node as NodeId);
        at = reached.parent as usize;
    }
    order.reverse();
    FrontierOrder {
        order: steps.expand(&order),
        exact,
    }
}

/// The bytes running `v` from `state` frees, and those its output may overwrite in place.
/// They change only when a step reading one of `v`'s buffers runs (see [`advance`]).
fn freed_by(model: &Model, state: &State, v: NodeId) -> (u64, u64) {
    let dies = |b: usize| {
        !model.pinned[b]
            && model.producer[b].is_none_or(|p| has(&state.done, p))
            && model.readers[b]
                .iter()
                .all(|&r| r == v || has(&state.done, r))
    };
    let freed: u64 = model.reads[v]
        .iter()
        .filter(|&&b| dies(b))
        .map(|&b| model.bytes[b])
        .sum();
    let out = model.writes[v];
    // One dying input of the same size may be overwritten by the output.
    let saving = if out > 0 {
        model.inplace[v]
            .iter()
            .filter(|&&b| dies(b) && model.bytes[b] == out)
            .map(|&b| model.bytes[b])
            .next()
            .unwrap_or(0)
    } else {
        0
    };
    (freed, saving)
}

impl State {
    /// Live bytes after running `v` (which frees `freed`, see [`freed_by`]) from this
    /// state, and the bytes live while it runs.
    fn after(&self, model: &Model, v: NodeId, (freed, saving): (u64, u64)) -> (u64, u64) {
        let out = model.writes[v];
        (self.live + out - freed, self.live + out - saving)
    }
}

/// Scratch space of [`advance`]: the successors a move made ready, and a mark per step
/// (`tick` for those reading a buffer the move read).
struct Scratch {
    made: Vec<NodeId>,
    mark: Vec<u64>,
    tick: u64,
}

/// Fills `state` (its vectors reused) with the state `candidate` reaches from `parent`: the
/// executed set with its node, and the ready nodes (the parent's without it, merged with the
/// successors it made ready, in increasing order). A ready node keeps the parent's
/// [`freed_by`] unless it reads a buffer the node read: only then can one of its inputs die
/// sooner.
fn advance(
    model: &Model,
    parent: &State,
    candidate: &Candidate,
    state: &mut State,
    scratch: &mut Scratch,
) {
    let v = candidate.node as usize;
    state.done.clear();
    state.done.extend_from_slice(&parent.done);
    state.done[v / 64] |= 1 << (v % 64);
    (state.key, state.live, state.peak) = (candidate.key, candidate.live, candidate.peak);
    scratch.tick += 1;
    let tick = scratch.tick;
    for &b in &model.reads[v] {
        for &r in &model.readers[b] {
            scratch.mark[r] = tick;
        }
    }
    let made = &mut scratch.made;
    made.clear();
    made.extend(
        model.succs[v]
            .iter()
            .copied()
            .filter(|&s| model.preds[s].iter().all(|&p| has(&state.done, p))),
    );
    made.sort_unstable();
    state.ready.clear();
    state.freed.clear();
    state.ready.reserve(parent.ready.len() + made.len());
    state.freed.reserve(parent.ready.len() + made.len());
    // Merged in increasing order: the successors made ready (none already ready) go before
    // the first kept node above them.
    let mut made = made.iter().copied().peekable();
    for (&r, &freed) in parent.ready.iter().zip(&parent.freed) {
        if r == v {
            continue;
        }
        while let Some(s) = made.next_if(|&s| s < r) {
            state.ready.push(s);
            state.freed.push(None);
        }
        state.ready.push(r);
        state.freed.push(freed.filter(|_| scratch.mark[r] != tick));
    }
    for s in made {
        state.ready.push(s);
        state.freed.push(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::GraphProto;
    use crate::schedule::test_nodes::{info, node, unit_beside_a_node};

    /// Room for every state of the small graphs below: the search stays exact.
    const ROOMY: FrontierLimits = FrontierLimits {
        width: 64,
        min_width: 64,
        moves: 1000,
    };

    /// Live bytes after running `order` (every node once) from the start state.
    fn live_after(model: &Model, order: &[NodeId], start_live: u64) -> u64 {
        let mut state = State {
            done: vec![0; order.len().div_ceil(64)],
            key: 0,
            live: start_live,
            peak: start_live,
            ready: Vec::new(),
            freed: Vec::new(),
        };
        for &v in order {
            state.live = state.after(model, v, freed_by(model, &state, v)).0;
            state.done[v / 64] |= 1 << (v % 64);
        }
        state.live
    }

    /// Found by the `model` fuzz target: an Identity (an alias) of graph input x whose output
    /// nothing reads, beside A reading x. Worked by hand: x (100 bytes) is live from the
    /// start and dies at whichever of A and the Identity runs last, so after both only A's
    /// output y (1 byte, a graph output) is live, in either order. The model used to leave
    /// the Identity out of x's readers and free x twice (subtract with overflow).
    #[test]
    fn an_alias_with_an_unread_output_frees_its_input_once() {
        let mut identity = node("Identity", &["x"], &["d"]);
        identity.domain = Some(String::new());
        let graph = Graph::from_proto(&GraphProto {
            node: vec![identity, node("A", &["x"], &["y"])],
            input: vec![info("x")],
            output: vec![info("y")],
            ..Default::default()
        })
        .unwrap();
        let bytes = |v: ValueId| match graph.values[v].name.as_str() {
            "x" | "d" => 100,
            _ => 1,
        };
        let model = Model::new(&graph, &Steps::new(&graph), &bytes);
        let start = 100;
        assert_eq!(live_after(&model, &[0, 1], start), 1);
        assert_eq!(live_after(&model, &[1, 0], start), 1);
    }

    /// Two branches from x: P makes p (100 bytes) that Q shrinks to q (1 byte); R makes r
    /// (50 bytes) that S shrinks to s (1 byte); Add joins q and s. Worked by hand: running
    /// either branch to its end first peaks at 102 bytes (x + p + q); the stored order, which
    /// interleaves P and R, holds x + p + r = 151 bytes at once.
    #[test]
    fn finishes_one_branch_before_starting_the_other() {
        let graph = Graph::from_proto(&GraphProto {
            node: vec![
                node("P", &["x"], &["p"]),
                node("R", &["x"], &["r"]),
                node("Q", &["p"], &["q"]),
                node("S", &["r"], &["s"]),
                node("Add", &["q", "s"], &["y"]),
            ],
            input: vec![info("x")],
            output: vec![info("y")],
            ..Default::default()
        })
        .unwrap();
        let bytes = |v: ValueId| match graph.values[v].name.as_str() {
            "p" => 100,
            "r" => 50,
            _ => 1,
        };
        let found = frontier_order(&graph, &Steps::new(&graph), &bytes, ROOMY);
        assert!(found.exact);
        let at = |op: &str| {
            let id = graph.nodes.iter().position(|n| n.op_type == op).unwrap();
            found.order.iter().position(|&n| n == id).unwrap()
        };
        assert!(
            at("Q") < at("R") || at("S") < at("P"),
            "branches interleaved: {:?}",
            found.order
        );
        assert_eq!(at("Add"), 4);

        // With room for one state per level the search is a beam and says so.
        let narrow = FrontierLimits {
            width: 1,
            min_width: 1,
            moves: 1000,
        };
        assert!(!frontier_order(&graph, &Steps::new(&graph), &bytes, narrow).exact);
    }

    /// Worked by hand on [`unit_beside_a_node`]. Node by node, B run between the unit's Relu
    /// and its QuantizeLinear frees x before u is written: a peak of 200 bytes that no
    /// runtime reaches, as the unit's kernel reads x while it writes u. As one step, the unit
    /// holds x and u at once whichever of it and B runs first (300 bytes), and the order
    /// keeps its nodes together.
    #[test]
    fn a_unit_runs_as_one_step() {
        let (graph, bytes) = unit_beside_a_node();
        let found = frontier_order(&graph, &Steps::new(&graph), &bytes, ROOMY);
        assert!(found.exact);
        let unit = found.order.iter().position(|&n| n == 0).unwrap();
        assert_eq!(found.order[unit..unit + 3], [0, 1, 2], "{:?}", found.order);
        assert_eq!(found.order[4], 4);
    }
}
