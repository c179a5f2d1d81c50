//! A memo of chain cuts shared by the split search's rounds and searches. Each round re-walks
//! the chains around the new peaks and cuts each by every grid, yet a rewrite changes only the
//! nodes of the chain it cut: most chains come back unchanged, round after round and search
//! after search. A cut depends on the chain's rules, reads, layouts and grids and, per node,
//! on its operator, attributes and the element types and shapes of its inputs and outputs
//! (never on node or tensor indices, which a rewrite shifts), so those are the key. The memo
//! keeps what grading reads of a cut: its extra MACs and its working bytes per tile
//! ([`ChainEstimate::by_tile`]), which depend on the same; never the tiling itself (tens of
//! thousands of cuts a round, over a gigabyte of regions on MobileNetV2), which is cut again
//! for the few grids that need it. It changes no result (the work each cut is charged stays
//! the same); it saves the time of cutting and estimating again.

use rustc_hash::{FxHashMap, FxHashSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use prost::Message;

use super::chain::{Chain, Read};
use super::estimate::ChainEstimate;
use super::layout::Layout;
use super::rules::{Rule, shape_of};
use super::tiling::Strips;
use crate::ir::Graph;

/// What cutting a chain by a grid gave: its cost, or the extra MACs past the allowance it
/// was cut within, or no tiling at any allowance.
enum Cached {
    Cut(Cost),
    Over(u64),
    Never,
}

/// What grading reads of a chain's cut by a grid.
#[derive(Clone, Debug)]
pub struct Cost {
    /// The multiply-accumulates the cut recomputes (0 for streamed strips).
    pub extra_macs: u64,
    /// Whether the cut streams (row strips that recompute nothing, whatever the allowance).
    pub streamed: bool,
    /// [`ChainEstimate::by_tile`] of the cut.
    pub working: Arc<[u64]>,
}

/// A chain's signature ([`Cuts::signature`]): the chain's own fields ([`Header`]) and its
/// nodes' parts by number ([`Parts`]), with their hash computed once (a signature is looked
/// up once per grid).
#[derive(Clone, Debug)]
pub struct Signature(Arc<Signed>);

/// What a [`Signature`] holds.
#[derive(Debug)]
struct Signed {
    hash: u64,
    header: Header,
    parts: Box<[u32]>,
}

/// What a cut reads of the chain itself, beside its nodes: the fields of [`Chain`] but its
/// node and tensor indices.
#[derive(Debug, PartialEq)]
struct Header {
    rules: Vec<Rule>,
    reads: Vec<Vec<Read>>,
    layouts: Vec<Layout>,
    grids: Vec<[i64; 2]>,
    last: usize,
    extra: Vec<usize>,
}

impl PartialEq for Signature {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&*self.0, &*other.0);
        Arc::ptr_eq(&self.0, &other.0)
            || (a.hash == b.hash && a.parts == b.parts && a.header == b.header)
    }
}

impl Eq for Signature {}

impl Hash for Signature {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

/// A chain's signature and a grid.
type Key = (Signature, [usize; 2]);

/// The memo: the costs of cuts, by chain signature and grid. The searches that run side by
/// side share it.
#[derive(Default)]
pub struct Cuts {
    memo: Mutex<FxHashMap<Key, Cached>>,
    parts: Parts,
    /// Every signature made so far, once: a chain signed again gets the one made first, so
    /// the memo's look-ups by it (one per grid) compare addresses, not contents.
    signatures: Mutex<FxHashSet<Signature>>,
}

/// The node parts of signatures met so far, each by a number of its own: two parts have the
/// same number exactly when their bytes are equal, so a signature holds numbers, not bytes,
/// and compares them (a chain's parts run to kilobytes; its numbers to a few hundred bytes).
/// The numbers depend on the order the searches meet parts in; they only tell parts apart,
/// never order a result.
#[derive(Default)]
struct Parts(Mutex<FxHashMap<Box<[u8]>, u32>>);

impl Parts {
    /// The number of `bytes`, given now if they are new.
    fn number(&self, bytes: Vec<u8>) -> u32 {
        let mut parts = lock(&self.0);
        let next = u32::try_from(parts.len()).expect("fewer than 2^32 node parts");
        *parts.entry(bytes.into()).or_insert(next)
    }
}

/// The part of a chain's signature each node of one graph contributes (its operator,
/// attributes and the element types and shapes of its inputs and outputs), by its number in
/// the memo's [`Parts`] and with its hash: made on a node's first use, then shared by every
/// chain through it (a round signs tens of thousands of chains over the same few hundred
/// nodes).
pub struct NodeKeys<'g> {
    graph: &'g Graph,
    numbers: &'g Parts,
    signatures: &'g Mutex<FxHashSet<Signature>>,
    parts: Vec<OnceLock<(u64, u32)>>,
}

impl<'g> NodeKeys<'g> {
    /// No part made yet for `graph`'s nodes; `cuts` numbers them.
    pub fn new(graph: &'g Graph, cuts: &'g Cuts) -> Self {
        NodeKeys {
            graph,
            numbers: &cuts.parts,
            signatures: &cuts.signatures,
            parts: (0..graph.nodes.len()).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Node `n`'s part's hash and number.
    fn of(&self, n: usize) -> (u64, u32) {
        *self.parts[n].get_or_init(|| {
            let bytes = node_part(self.graph, n);
            (fixed_hash(&bytes), self.numbers.number(bytes))
        })
    }
}

/// Node `n`'s part of a signature; every variable-length part preceded by its length.
fn node_part(graph: &Graph, n: usize) -> Vec<u8> {
    let mut key = Vec::with_capacity(64);
    let node = &graph.nodes[n];
    put(node.domain.as_bytes(), &mut key);
    put(node.op_type.as_bytes(), &mut key);
    key.extend_from_slice(&(node.attributes.len() as u64).to_le_bytes());
    for attribute in &node.attributes {
        put(&attribute.encode_to_vec(), &mut key);
    }
    for values in [&node.inputs, &node.outputs] {
        key.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for &v in values {
            let typed = v.and_then(|v| graph.values[v].tensor_type());
            let dims = v.and_then(|v| shape_of(graph, v));
            key.push(u8::from(typed.is_some()));
            if let Some(t) = typed {
                key.extend_from_slice(&(t.dtype as i32).to_le_bytes());
            }
            key.push(u8::from(dims.is_some()));
            let dims = dims.unwrap_or_default();
            key.extend_from_slice(&(dims.len() as u64).to_le_bytes());
            dims.iter()
                .for_each(|d| key.extend_from_slice(&d.to_le_bytes()));
        }
    }
    key
}

/// `bytes` preceded by their length.
fn put(bytes: &[u8], key: &mut Vec<u8>) {
    key.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    key.extend_from_slice(bytes);
}

/// A hash with fixed keys: it only places keys in the memo, it never orders a result.
fn fixed_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(value)
}

impl Cuts {
    /// The key of a chain's cuts in its graph (`keys`'): everything a cut or its estimate
    /// reads, without indices: the chain's rules, reads, layouts and grids ([`Header`]), then
    /// each node's part ([`NodeKeys`]), so two chains share a key only when they are alike.
    pub fn signature(keys: &NodeKeys, chain: &Chain) -> Signature {
        let header = Header {
            rules: chain.rules.clone(),
            reads: chain.reads.clone(),
            layouts: chain.layouts.clone(),
            grids: chain.grids.clone(),
            last: chain.last,
            extra: chain.extra.clone(),
        };
        let parts: Vec<(u64, u32)> = chain.nodes.iter().map(|&n| keys.of(n)).collect();
        // The header's hashable fields and the parts' hashes place the key; equal signatures
        // agree on them.
        let placed = (&header.layouts, &header.grids, header.last, &header.extra);
        let hashes: Vec<u64> = std::iter::once(fixed_hash(&placed))
            .chain(parts.iter().map(|p| p.0))
            .collect();
        let made = Signature(Arc::new(Signed {
            hash: fixed_hash(&hashes[..]),
            header,
            parts: parts.iter().map(|p| p.1).collect(),
        }));
        let mut signatures = lock(keys.signatures);
        match signatures.get(&made) {
            Some(first) => first.clone(),
            None => {
                signatures.insert(made.clone());
                made
            }
        }
    }

    /// The [`Cost`] of [`super::tiling::cut_within`] of the chain whose [`Cuts::signature`] is
    /// `signature`, its working bytes estimated by `estimate`, from the memo when an earlier
    /// cut answers it; `None` when the grid does not cut the chain within `max_macs`.
    pub fn cost(
        &self,
        (strips, signature): (&Strips, &Signature),
        grid: [usize; 2],
        max_macs: u64,
        estimate: &ChainEstimate,
    ) -> Option<Cost> {
        let key = (signature.clone(), grid);
        match lock(&self.memo).get(&key) {
            Some(Cached::Cut(c)) => return within(c, max_macs).then(|| c.clone()),
            Some(Cached::Over(extra)) if *extra > max_macs => return None,
            Some(Cached::Never) => return None,
            _ => {}
        }
        let (answer, cached) = match strips.cut_costed(grid, max_macs) {
            Some(Ok(t)) => {
                let cost = Cost {
                    extra_macs: t.extra_macs,
                    streamed: t.streamed,
                    working: estimate.by_tile(strips.chain(), &t).into(),
                };
                (Some(cost.clone()), Cached::Cut(cost))
            }
            Some(Err(extra)) => (None, Cached::Over(extra)),
            None => (None, Cached::Never),
        };
        lock(&self.memo).insert(key, cached);
        answer
    }
}

/// A memo's map, whatever a panicking holder left (a memo's entry is whole or absent, so
/// the map stays sound); the split driver's memos take theirs the same way.
pub fn lock<T>(map: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `cut_within` with `max_macs` gives the cut costing `c`: streamed strips whatever
/// the allowance, tiles when their halos fit it.
fn within(c: &Cost, max_macs: u64) -> bool {
    c.streamed || c.extra_macs <= max_macs
}
