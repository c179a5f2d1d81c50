//! The split stage (`--split auto`), a rewrite of the model between loading and planning: the
//! chains of operators that set the peak are cut into spatial tiles of their output, each
//! tile computing exactly its receptive field, so only one tile's intermediates are live at a
//! time. The rewritten model is then planned like any other.
//!
//! [`rules`] is the per-operator table (output region → input regions; [`upsample`] holds the
//! Resize and ConvTranspose entries), [`chain`] finds the
//! runs of splittable nodes, [`tiling`] derives each tile's regions and halo, [`rewrite`]
//! builds the tiled graph, [`target`] sets the one target arena every chain's grid aims at and
//! [`search()`] chooses chains and grids from the plan. [`rows`]
//! does the same for transformers along one axis (tokens, query rows): row blocking.

pub mod bands;
pub mod candidates;
pub mod chain;
pub mod cuts;
pub mod dequantize;
pub mod estimate;
pub mod glue;
pub mod grades;
pub mod layers;
pub mod layout;
pub mod macs;
pub mod memo;
pub mod pools;
pub mod region;
pub mod rewrite;
pub mod rows;
pub mod rules;
pub mod search;
pub mod target;
pub mod tiling;
pub mod upsample;

pub use search::{Outcome, Seen, search};

/// The memos the searches of one model share: chain cuts ([`cuts::Cuts`]), chain grades
/// ([`grades::Grades`]) and ranked rounds ([`candidates::Rounds`]). None changes a result;
/// each saves repeating work.
#[derive(Default)]
pub struct Memos {
    /// The costs of chain cuts.
    pub cuts: cuts::Cuts,
    /// The grades of chains, by plan.
    pub grades: grades::Grades,
    /// The rounds ranked so far.
    pub rounds: candidates::Rounds,
}

use rows::chain::Recompute;

/// The split search's account of its allowance: `spend(units)` charges work units (chain
/// estimates, trial plans) and is false once the allowance is spent or its time is up.
pub type Spend<'a> = &'a dyn Fn(u64) -> bool;

/// The search's allowance ran out while it ranked candidates (see [`Spend`]).
#[derive(Clone, Copy, Debug)]
pub struct Spent;

/// How a trial's plan orders the rewritten model: the order the rewrite wrote, or the
/// memory-aware order search's best (the caller plans each trial as asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrialOrder {
    /// The rewrite's order. A tile rewrite runs its tiles where the chain ran, each tile's
    /// nodes in the chain's order, in the plan's order around them: kept in tile trials, 29
    /// of 30 CNN split plans came out the same and one smaller, and the order search had
    /// taken half of each trial's time (ARCHITECTURE.md).
    Written,
    /// The order search's best: a row rewrite inserts its blocks where the chain ended, and
    /// the search interleaves them with what ran there (BERT with LayerNormalization operators
    /// at 128 tokens: 532,992 bytes with the search, 1,180,160 without); the just-in-time
    /// reorder is itself an order to improve on.
    Searched,
}

use std::sync::Arc;

use crate::emit::Table;
use crate::ir::Model;

/// What the split search reads of a plan (its own or one it asked for): the typed model and
/// its table. The search's caller makes them; the split stage never runs the pass itself.
/// Both are shared, so the trial memo and the searches hold a plan without copying it.
#[derive(Clone)]
pub struct TrialPlan {
    /// The model as planned, typed.
    pub model: Arc<Model>,
    /// The plan's table (its `schedule` the execution order).
    pub table: Arc<Table>,
}

impl TrialPlan {
    /// The plan's address (its model's and table's): the memos that hold a plan name it by
    /// this, as no other plan can take it while they hold it.
    pub fn address(&self) -> [usize; 2] {
        [
            Arc::as_ptr(&self.model) as usize,
            Arc::as_ptr(&self.table) as usize,
        ]
    }
}

/// Whether the pass may split operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum SplitChoice {
    /// Plan the model as given.
    #[default]
    Off,
    /// Split the chains that set the peak when that lowers the arena.
    Auto,
}

/// The split stage's options.
#[derive(Clone, Copy, Debug)]
pub struct SplitOptions {
    /// Off or auto.
    pub choice: SplitChoice,
    /// Extra multiply-accumulates allowed, percent of the model's total.
    pub overhead_pct: f64,
    /// A device budget (`--budget`; the pipeline fills it from the mode options): the search
    /// first splits the steps whose operands alone exceed it.
    pub budget: Option<u64>,
    /// Scatter the graph inputs a chain's tiles read into bands the runtime writes directly
    /// (the pipeline fills it: only when graph inputs are in the arena).
    pub scatter_inputs: bool,
    /// Seconds the search may take (`--split-time`): it spends [`crate::plan::WORK_PER_SECOND`]
    /// work units per second, charged per trial plan and per candidate estimate, with the time
    /// as a safety stop.
    pub search_time: std::time::Duration,
    /// The row rule sets chains are built with (the pipeline searches with several, see
    /// [`SEARCHES`], and keeps the best).
    pub row_rules: &'static [rows::rules::RuleSet],
    /// What row chains may recompute per block.
    pub recompute: Recompute,
    /// How many DynamicQuantizeLinear nodes a row chain may quantize after passes of their own
    /// (see [`rows::chain::Pass`]) rather than make their inputs whole before it: 0, 1 (two
    /// passes) or 2 (three: a pre-norm feed-forward's LayerNorm and GELU outputs).
    pub passes: usize,
    /// The arena alignment when the planner lets a row chain's blocks write over the rows of
    /// their input that died (the pipeline fills it, see `LivenessOptions::blockwise`): the
    /// rewrite then cuts the tensors a chain reads from outside by one Split.
    pub blockwise: Option<u64>,
    /// Estimate a chain reading an earlier split's parts as bands with its own outputs
    /// counted tile by tile, as a later chain would read them in turn (see
    /// [`estimate::Banding`]); otherwise such a chain is estimated as any other.
    pub progressive_bands: bool,
    /// Run the tiles of a chain reading an earlier split's bands as soon as the bands they
    /// read are made (see [`rewrite::BandSources::run_early`]).
    pub early_tiles: bool,
    /// Without a budget, also try row strips finer than 8 (up to [`candidates::MAX_STRIPS`]).
    pub fine_strips: bool,
    /// How a trial cutting row chains (one, or the layers cut alike) is ordered; a tile trial
    /// keeps its rewrite's order and the just-in-time reorder is searched, in every search.
    pub row_order: TrialOrder,
    /// Whether row chains may take the nodes earlier splits made: a block cut again along
    /// another axis (an attention's head block, holding that head's whole square of scores,
    /// cut by query rows), with the glue around it.
    pub nested: bool,
    /// The pipeline's first search, which the others must not slow: it grades the chains
    /// around each step side by side before walking them in turn (see [`target::target`]),
    /// and never waits for a round another search is ranking (it ranks it too). Neither
    /// changes a result.
    pub first: bool,
}

/// One search of [`SEARCHES`].
pub struct Search {
    /// The row rule sets.
    pub row_rules: &'static [rows::rules::RuleSet],
    /// What row chains may recompute per block.
    pub recompute: Recompute,
    /// [`SplitOptions::passes`].
    pub passes: usize,
    /// Whether blocks may write over the rows of their input.
    pub blockwise: bool,
    /// [`SplitOptions::progressive_bands`].
    pub progressive_bands: bool,
    /// [`SplitOptions::early_tiles`].
    pub early_tiles: bool,
    /// [`SplitOptions::fine_strips`].
    pub fine_strips: bool,
    /// [`SplitOptions::row_order`].
    pub row_order: TrialOrder,
    /// [`SplitOptions::nested`].
    pub nested: bool,
    /// What the search changes from the first: when the first saw no chain it applies to,
    /// the search would repeat it, and is skipped.
    pub differs_in: Differs,
}

/// What a search of [`SEARCHES`] changes from the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Differs {
    /// Nothing (the first search).
    Nothing,
    /// How row chains are cut (the rule sets, what they recompute, how their trials are
    /// ordered): nothing unless the first search planned a row chain as a trial. A CNN whose
    /// classifier or squeeze-and-excitation blocks make row candidates that never rank among
    /// a round's trials skips these.
    Rows,
    /// Whether a row chain's blocks write over their input: this changes every trial's
    /// liveness too, so it differs as soon as a round saw a row chain (measured: MNASNet in
    /// QDQ form, no row chain in its result, 633,408 bytes without and 625,216 with).
    Blocks,
    /// How chains reading an earlier split's parts as bands are estimated.
    Bands,
    /// How fine row strips may be: nothing without strips finer than 8.
    Strips,
    /// How many DynamicQuantizeLinear inputs are quantized after passes of their own: nothing
    /// unless a round of the first search saw a row chain holding a DynamicQuantizeLinear
    /// (one it did not cut may be cut in passes: a T5 encoder's first search cuts only its
    /// attention).
    Quantizers,
}

/// What a search has shown that makes the others of [`SEARCHES`] differ from it: whether a
/// round saw a row chain to cut, whether it planned one as a trial, whether a chain reads an
/// earlier one's parts as bands, and whether a chain is cut in row strips finer than any grid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shown {
    /// A round saw a row chain.
    pub rows_seen: bool,
    /// A round planned a row chain as a trial.
    pub rows_tried: bool,
    /// A chain reads an earlier chain's parts as bands.
    pub bands: bool,
    /// A chain is cut in row strips finer than [`candidates::MAX_TILES`].
    pub strips: bool,
    /// A round saw a row chain holding a DynamicQuantizeLinear.
    pub quantizers: bool,
}

impl Shown {
    /// What a search's `chains` show, with whether a round saw a row chain (`rows_seen`),
    /// whether one planned it as a trial (`rows_tried`) and whether a round saw a row chain
    /// holding a DynamicQuantizeLinear (`quantizers_seen`).
    pub fn of(
        chains: &[crate::emit::SplitChain],
        (rows_seen, rows_tried, quantizers_seen): (bool, bool, bool),
    ) -> Shown {
        Shown {
            rows_seen,
            rows_tried,
            bands: chains.iter().any(|c| c.read_as_bands_by.is_some()),
            strips: chains.iter().any(|c| {
                c.axis.is_none() && c.grid[1] == 1 && c.grid[0] > candidates::MAX_TILES
            }),
            quantizers: quantizers_seen,
        }
    }

    /// Whether a search that changes `what` from the one that showed this can differ from it.
    pub fn differs(self, what: Differs) -> bool {
        match what {
            Differs::Nothing => true,
            Differs::Rows => self.rows_tried,
            Differs::Blocks => self.rows_seen,
            Differs::Bands => self.bands,
            Differs::Strips => self.strips,
            Differs::Quantizers => self.quantizers,
        }
    }
}

/// The searches the pipeline makes, the first on the whole allowance and the others side by side,
/// each on the work the first left (so none depends on another's course), keeping the best: the row
/// rule sets, what row chains may recompute, whether blocks may write over the rows of their input
/// (`LivenessOptions::blockwise`, for the search's trials and, if it wins, the final plan), how
/// chains reading bands are estimated and when their tiles run. The search is greedy, and more
/// candidates or other sharing may lead it to a dead end that the narrower searches avoid
/// (measured: DistilBERT 1.14x with both rule sets, 1.76x with the plain set; BART 1.32x
/// recomputing normalizations, 2.68x without; T5 2.27x without blocks over their input, 1.00x with;
/// ResNet-50 2.25x estimating bands tile by tile, 2.11x as any input, where ResNet-18 goes 3.01x to
/// 3.28x; tiles reading bands run early: ResNet-50 2.91x to 3.11x, ResNet-18 3.52x to 3.40x; row
/// strips finer than 8: ResNet-18 3.36x to 3.52x, MobileNetV3-Large 5.42x to 5.03x; row trials in
/// their rewrite's order: ViT-tiny 1.00x to 1.13x, where BERT with LayerNormalization operators at
/// 128 tokens splits to 1,180,160 bytes rather than 532,992; attention blocked by heads in the
/// first search: a two-layer attention with a shared relative-position bias 5.82x to 1.08x), so
/// each wider search adds to the narrower ones rather than replacing them. The head rules join
/// only the search quantizing after two passes, where a dynamic-quantized T5-small encoder needs
/// them (1.89x to 2.12x); a search of their own cost `models/bert_tiny_dyn` 1.4 s for nothing.
/// That search also nests row chains in the blocks of earlier ones (a head block, holding its
/// head's whole square of scores, cut again by query rows: a `T5EncoderModel` of width 128 goes
/// from 1.83x to 2.16x); nesting in every search gave `models/bert_tiny_dyn` 17 chains of a few
/// hundred bytes each and tripled its split time.
pub const SEARCHES: &[Search] = &[
    FIRST_SEARCH,
    Search {
        progressive_bands: false,
        differs_in: Differs::Bands,
        ..FIRST_SEARCH
    },
    Search {
        early_tiles: true,
        differs_in: Differs::Bands,
        ..FIRST_SEARCH
    },
    Search {
        fine_strips: false,
        differs_in: Differs::Strips,
        ..FIRST_SEARCH
    },
    Search {
        row_rules: rows::PLAIN_RULE_SET,
        differs_in: Differs::Rows,
        ..FIRST_SEARCH
    },
    Search {
        recompute: Recompute::Normalizations,
        differs_in: Differs::Rows,
        ..FIRST_SEARCH
    },
    Search {
        blockwise: true,
        differs_in: Differs::Blocks,
        ..FIRST_SEARCH
    },
    Search {
        recompute: Recompute::Normalizations,
        blockwise: true,
        differs_in: Differs::Blocks,
        ..FIRST_SEARCH
    },
    Search {
        row_order: TrialOrder::Written,
        differs_in: Differs::Rows,
        ..FIRST_SEARCH
    },
    Search {
        passes: 1,
        differs_in: Differs::Quantizers,
        ..FIRST_SEARCH
    },
    Search {
        row_rules: rows::HEAD_RULE_SETS,
        passes: 2,
        nested: true,
        differs_in: Differs::Quantizers,
        ..FIRST_SEARCH
    },
];

/// The first search of [`SEARCHES`]; each other one is written as what it changes from it.
const FIRST_SEARCH: Search = Search {
    row_rules: rows::ALL_RULE_SETS,
    recompute: Recompute::Cheap,
    passes: 0,
    blockwise: false,
    progressive_bands: true,
    early_tiles: false,
    fine_strips: true,
    row_order: TrialOrder::Searched,
    nested: false,
    differs_in: Differs::Nothing,
};

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            choice: SplitChoice::Off,
            overhead_pct: 10.0,
            budget: None,
            scatter_inputs: true,
            search_time: std::time::Duration::from_secs(16),
            row_rules: rows::ALL_RULE_SETS,
            recompute: Recompute::Cheap,
            passes: 0,
            blockwise: None,
            progressive_bands: false,
            early_tiles: false,
            fine_strips: true,
            row_order: TrialOrder::Searched,
            nested: false,
            first: false,
        }
    }
}

/// The summary line's split part: arena before and after, and the extra MACs.
pub fn summary(table: &Table) -> String {
    let Some(s) = &table.splits else {
        return String::new();
    };
    let pct = if s.total_macs > 0 {
        100.0 * s.extra_macs as f64 / s.total_macs as f64
    } else {
        0.0
    };
    format!(
        "; split: {} chain(s), arena {} -> {} bytes ({:.2}x smaller), extra MACs {} ({pct:.2}% of {})",
        s.chains.len(),
        s.arena_before,
        s.arena_after,
        s.arena_before as f64 / s.arena_after.max(1) as f64,
        s.extra_macs,
        s.total_macs,
    )
}
