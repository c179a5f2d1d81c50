//! A memo of chain cuts shared by the split search's rounds and searches. Each round re-walks
//! the chains around the new peaks and cuts each by every grid, yet a rewrite changes only the
//! nodes of the chain it cut: most chains come back unchanged, round after round and search
//! after search. A cut depends on the chain's rules, reads, layouts and grids and, per node,
//! on its operator, attributes and the shapes of its inputs and outputs (never on node or
//! tensor indices, which a rewrite shifts), so those are the key. The memo changes no result
//! (the work each cut is charged stays the same); it saves the time of cutting again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

use super::chain::Chain;
use super::rules::shape_of;
use super::tiling::{Tiling, cut_costed};
use crate::ir::Graph;

/// What cutting a chain by a grid gave: the tiling, or the extra MACs past the allowance it
/// was cut within, or no tiling at any allowance.
enum Cached {
    Cut(Rc<Tiling>),
    Over(u64),
    Never,
}

/// A chain's signature ([`Cuts::signature`]) and a grid.
type Key = (Rc<str>, [usize; 2]);

/// The memo: cuts by chain signature and grid.
#[derive(Default)]
pub struct Cuts {
    memo: RefCell<HashMap<Key, Cached>>,
}

impl Cuts {
    /// The key of a chain's cuts in `graph`: everything a cut reads, without indices.
    pub fn signature(graph: &Graph, chain: &Chain) -> Rc<str> {
        let mut key = format!(
            "{:?}|{:?}|{:?}|{:?}|{}|{:?}",
            chain.rules, chain.reads, chain.layouts, chain.grids, chain.last, chain.extra
        );
        let shape = |v: Option<usize>| v.and_then(|v| shape_of(graph, v));
        for &n in &chain.nodes {
            let node = &graph.nodes[n];
            let inputs: Vec<_> = node.inputs.iter().map(|&v| shape(v)).collect();
            let outputs: Vec<_> = node.outputs.iter().map(|&v| shape(v)).collect();
            let _ = write!(
                key,
                "|{}:{}:{:?}:{inputs:?}:{outputs:?}",
                node.domain, node.op_type, node.attributes
            );
        }
        key.into()
    }

    /// [`super::tiling::cut_within`] of the chain whose [`Cuts::signature`] is `signature`,
    /// from the memo when an earlier cut answers it.
    pub fn cut_within(
        &self,
        graph: &Graph,
        (chain, signature): (&Chain, &Rc<str>),
        grid: [usize; 2],
        max_macs: u64,
    ) -> Option<Rc<Tiling>> {
        let key = (signature.clone(), grid);
        match self.memo.borrow().get(&key) {
            Some(Cached::Cut(t)) => return within(t, max_macs).then(|| t.clone()),
            Some(Cached::Over(extra)) if *extra > max_macs => return None,
            Some(Cached::Never) => return None,
            _ => {}
        }
        let (answer, cached) = match cut_costed(graph, chain, grid, max_macs) {
            Some(Ok(t)) => {
                let t = Rc::new(t);
                (Some(t.clone()), Cached::Cut(t))
            }
            Some(Err(extra)) => (None, Cached::Over(extra)),
            None => (None, Cached::Never),
        };
        self.memo.borrow_mut().insert(key, cached);
        answer
    }
}

/// Whether `cut_within` with `max_macs` gives the tiling `t`: streamed strips whatever the
/// allowance, tiles when their halos fit it.
fn within(t: &Tiling, max_macs: u64) -> bool {
    t.streamed || t.extra_macs <= max_macs
}
