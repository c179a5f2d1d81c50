//! Depth-first branch and bound over canonical placements.
//!
//! **Canonical placements.** Push every buffer down until it rests on offset 0 or (rounded up to
//! the alignment) on the top of a buffer it conflicts with; no solution gets worse. Sort the
//! buffers of such a placement by offset. Placing them in that order, each one's offset is exactly
//! its *floor*: the highest top among the already placed buffers it conflicts with (aligned),
//! because everything below it is placed and nothing above it is. So the search builds placements
//! in that order and never has to choose an offset, only the next buffer.
//!
//! **Branching.** The search keeps a *level* (the offset of the last placed buffer; offsets never
//! decrease). Buffers whose floor is the level and that the branching has not excluded from it
//! are the *candidates*. Two branching rules (see [`Branching`]) split the placements at a node
//! so that each is reached along exactly one path: by section (some candidate covering a chosen
//! section goes at the level, or the section is *passed*: none may cover it at this level), or by
//! buffer (the buffers are tried in a fixed order; at one level they must come in that order).
//!
//! **Pruning.** Every unplaced buffer has a lowest possible offset: its floor if it can still be
//! placed at or above the level, otherwise (it was passed over) the level plus the smallest size
//! still to place, since it must then rest on a buffer placed later. In each section, the unplaced
//! buffers are stacked above the lowest of their lowest offsets, so that plus their total size
//! must fit in the cap. A buffer that would fit entirely below the level has free
//! space under it for good, so every completion could move it down: such a partial placement is
//! dropped, which keeps only *compact* placements (some optimal placement is compact, as each such
//! move lowers the sum of offsets). Identical buffers are placed in index order.
//!
//! **Decomposition and memory.** When no unplaced buffer spans a point in time, the buffers on
//! either side no longer interact and are solved one after the other, each from level 0 again;
//! if one side fails, the whole node fails without trying the other side's alternatives. A node
//! that failed is remembered by a hash of everything its subtree depends on (its unplaced buffers
//! and which of them are passed over, their sections' floors and the level), so the same situation
//! reached in another way (another stacking order of the same buffers, or the same part of a
//! problem next to other decisions elsewhere) is pruned at once. Failures stay valid while the
//! cap only decreases.

use std::cmp::Reverse;
use std::collections::HashSet;

use super::instance::{Instance, NONE};
use super::strategy::{Branching, Strategy};
use crate::plan::budget::{Budget, EXACT_TICKS_PER_UNIT, Meter};
use crate::plan::problem::align_up;
use crate::plan::rng::mix;

/// Why a search stopped before finishing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The work allowance is spent (or a safety stop fired).
    Spent,
    /// The node budget of this attempt ran out.
    Budget,
}

/// One change to the search state, kept to undo it.
enum Undo {
    Place(u32),
    SectionFloor(u32, u64),
    BufferFloor(u32, u64),
    Pass(u32, u64),
}

/// Unplaced buffers that interact only among themselves: sorted by first section, covering the
/// sections `lo..hi`.
struct Part {
    buffers: Vec<u32>,
    lo: usize,
    hi: usize,
}

/// Where the search stands in the canonical order: the level, and (branching by buffer) the rank
/// of the buffer last placed at that level, which later ones at the level must exceed.
#[derive(Debug, Clone, Copy)]
struct Position {
    level: u64,
    after: u32,
}

/// One open node: the branches left to try.
struct Frame {
    at: Position,
    /// The section to pass after the candidates (branching by section), or [`NONE`].
    hole: u32,
    /// Candidates are `candidates[first..end]`; `next` is the next to try.
    first: u32,
    next: u32,
    end: u32,
    mark: usize,
    key: u64,
}

/// What opening a node found.
enum Opened {
    Solved,
    Failed,
    Node(Frame),
}

/// How deeply decompositions may nest (each is a recursive call); deeper, the search goes on
/// without splitting, which is only slower.
const MAX_NESTING: u32 = 200;

/// Ticks of a search node, besides its buffers ([`EXACT_TICKS_PER_UNIT`] make a work unit).
const NODE_WORK: u64 = 100;
/// Ticks per buffer of the part a node examines.
const BUFFER_WORK: u64 = 5;

/// Forgotten failures are only lost pruning, so the memory is simply cleared when full.
const MEMORY_LIMIT: usize = 1 << 23;

/// The exact search over one instance; failures are remembered across calls while the cap does
/// not grow.
pub(super) struct Solver<'a> {
    inst: &'a Instance,
    cap: u64,
    meter: Meter,
    node_limit: u64,
    branching: Branching,
    rank: Vec<u32>,
    nodes: u64,
    /// How many decompositions enclose the current search.
    nesting: u32,
    placed: Vec<bool>,
    offset: Vec<u64>,
    /// Highest top of a placed buffer in each section.
    section_floor: Vec<u64>,
    /// The level at which each section was last passed.
    passed_at: Vec<u64>,
    /// Total size of the unplaced buffers covering each section.
    remaining: Vec<u64>,
    log: Vec<Undo>,
    candidates: Vec<u32>,
    /// Highest top of a placed buffer each unplaced buffer conflicts with.
    top_below: Vec<u64>,
    /// Per node: each unplaced buffer's aligned floor.
    floor: Vec<u64>,
    scratch: Vec<u32>,
    /// Per node: how many sections before each one were passed at the current level.
    passed_before: Vec<u32>,
    /// Per node: whether each unplaced buffer is a candidate.
    is_candidate: Vec<bool>,
    /// Per node, for the frontier check: which sections are reached, and the candidates.
    reach: Vec<bool>,
    starts_here: Vec<u32>,
    /// Per node: the lowest offset each unplaced buffer can get.
    lowest_of: Vec<u64>,
    /// Per section, the buffer that last showed the section's bound holds (checked first).
    witness: Vec<u32>,
    covered: Vec<u32>,
    failed: HashSet<u64>,
    /// Per buffer, its terms of [`Solver::key`] when not passed and when passed over.
    buffer_salt: Vec<[u64; 2]>,
    /// Per section, its salt in [`Solver::key`].
    section_salt: Vec<u64>,
}

impl<'a> Solver<'a> {
    /// A solver with nothing placed.
    pub(super) fn new(inst: &'a Instance) -> Self {
        let n = inst.len();
        let mut remaining = vec![0u64; inst.sections];
        for b in 0..n {
            for s in inst.lo[b]..inst.hi[b] {
                remaining[s as usize] += inst.size[b];
            }
        }
        Solver {
            inst,
            cap: 0,
            meter: Budget::unlimited().meter(),
            node_limit: 0,
            branching: Branching::MostCrowded,
            rank: vec![0; n],
            nodes: 0,
            nesting: 0,
            placed: vec![false; n],
            offset: vec![0; n],
            section_floor: vec![0; inst.sections],
            passed_at: vec![u64::MAX; inst.sections],
            remaining,
            log: Vec::new(),
            candidates: Vec::new(),
            top_below: vec![0; n],
            floor: vec![0; n],
            scratch: Vec::with_capacity(n),
            passed_before: vec![0; inst.sections + 1],
            is_candidate: vec![false; n],
            reach: vec![false; inst.sections + 1],
            starts_here: Vec::with_capacity(n),
            lowest_of: vec![0; n],
            witness: inst
                .covering
                .iter()
                .map(|c| c.first().copied().unwrap_or(0))
                .collect(),
            covered: vec![0; inst.sections],
            failed: HashSet::new(),
            buffer_salt: (0..n as u64)
                .map(|b| [0, 1].map(|passed| mix(2 * b + passed + 0x5151)))
                .collect(),
            section_salt: (0..inst.sections as u64).map(|s| mix(s + 1)).collect(),
        }
    }

    /// Number of buffers of the instance.
    pub(super) fn len(&self) -> usize {
        self.inst.len()
    }

    /// Finds a placement whose arena is at most `cap` using `strategy`: `Ok(Some(offsets))`, or
    /// `Ok(None)` when none exists, or why it stopped: `meter` spent (or stopped), or `budget`
    /// nodes explored. Each node costs work in proportion to the buffers it examines.
    pub(super) fn satisfy(
        &mut self,
        cap: u64,
        strategy: &Strategy,
        budget: u64,
        meter: &mut Meter,
    ) -> Result<Option<Vec<u64>>, Stop> {
        if cap > self.cap {
            // Failures remembered under a smaller cap may succeed under this one.
            self.failed.clear();
        }
        self.cap = cap;
        std::mem::swap(&mut self.meter, meter);
        self.node_limit = self.nodes.saturating_add(budget);
        self.branching = strategy.branching;
        self.rank.clone_from(&strategy.rank);
        let mut all: Vec<u32> = (0..self.inst.len() as u32).collect();
        all.sort_by_key(|&b| self.inst.lo[b as usize]);
        let whole = Part {
            buffers: all,
            lo: 0,
            hi: self.inst.sections,
        };
        let outcome = self.solve(&whole);
        std::mem::swap(&mut self.meter, meter);
        let found = matches!(outcome, Ok(true)).then(|| self.offset.clone());
        self.undo_to(0);
        self.candidates.clear();
        outcome.map(|_| found)
    }

    /// Places every buffer of `part`, from level 0; on failure the state is unchanged, on
    /// success the placements stay.
    fn solve(&mut self, part: &Part) -> Result<bool, Stop> {
        let base = self.log.len();
        let start = Position {
            level: 0,
            after: NONE,
        };
        let mut stack = match self.open(part, start)? {
            Opened::Solved => return Ok(true),
            Opened::Failed => return Ok(false),
            Opened::Node(frame) => vec![frame],
        };
        while let Some(frame) = stack.last_mut() {
            self.undo_to(frame.mark);
            let at = if frame.next < frame.end {
                let b = self.candidates[frame.next as usize];
                frame.next += 1;
                let level = self.floor_now(b as usize);
                if level + self.inst.size[b as usize] > self.cap {
                    continue;
                }
                self.place(b, level);
                let after = if self.branching == Branching::Buffers {
                    self.rank[b as usize]
                } else {
                    NONE
                };
                Position { level, after }
            } else if frame.hole != NONE {
                let hole = std::mem::replace(&mut frame.hole, NONE);
                self.log
                    .push(Undo::Pass(hole, self.passed_at[hole as usize]));
                self.passed_at[hole as usize] = frame.at.level;
                frame.at
            } else {
                self.candidates.truncate(frame.first as usize);
                self.remember(frame.key);
                stack.pop();
                continue;
            };
            match self.open(part, at)? {
                Opened::Solved => return Ok(true),
                Opened::Failed => {}
                Opened::Node(child) => stack.push(child),
            }
        }
        self.undo_to(base);
        Ok(false)
    }

    /// The aligned floor of `b`: the highest top below it, rounded up to the alignment.
    fn floor_now(&self, b: usize) -> u64 {
        let top = self.top_below[b];
        if self.inst.alignment == 1 {
            top
        } else {
            align_up(top, self.inst.alignment)
        }
    }

    fn remember(&mut self, key: u64) {
        if self.failed.len() >= MEMORY_LIMIT {
            self.failed.clear();
        }
        self.failed.insert(key);
    }

    fn eligible(&self, b: usize) -> bool {
        let twin = self.inst.twin_before[b];
        !self.placed[b] && (twin == NONE || self.placed[twin as usize])
    }

    /// True when `b` may still be placed at the level: eligible, with the level as floor, not
    /// covering a section passed at it (`passed_before` must be current) and, branching by
    /// buffer, later in the order than the last buffer placed at it.
    fn candidate(&self, b: usize, at: Position) -> bool {
        let (lo, hi) = (self.inst.lo[b] as usize, self.inst.hi[b] as usize);
        self.floor[b] == at.level
            && (at.after == NONE || self.rank[b] > at.after)
            && self.eligible(b)
            && self.passed_before[hi] == self.passed_before[lo]
    }

    /// Marks the candidates among the unplaced buffers at `at` (see [`Self::candidate`]).
    fn mark_candidates(&mut self, part: &Part, unplaced: &[u32], at: Position) {
        let mut count = 0;
        for s in part.lo..part.hi {
            self.passed_before[s] = count;
            count += u32::from(self.passed_at[s] == at.level);
        }
        self.passed_before[part.hi] = count;
        for &b in unplaced {
            self.is_candidate[b as usize] = self.candidate(b as usize, at);
        }
    }

    /// Examines the situation after a branch: solved, failed (bounds, dominance or memory), split
    /// into independent parts (solved here, one after the other), or a new node.
    fn open(&mut self, part: &Part, at: Position) -> Result<Opened, Stop> {
        self.nodes += 1;
        if self.nodes >= self.node_limit {
            return Err(Stop::Budget);
        }
        if !self.meter.spend_ticks(
            NODE_WORK + BUFFER_WORK * part.buffers.len() as u64,
            EXACT_TICKS_PER_UNIT,
        ) {
            return Err(Stop::Spent);
        }
        let mut unplaced = std::mem::take(&mut self.scratch);
        unplaced.clear();
        unplaced.extend(
            part.buffers
                .iter()
                .copied()
                .filter(|&b| !self.placed[b as usize]),
        );
        for &b in &unplaced {
            self.floor[b as usize] = self.floor_now(b as usize);
        }
        let pieces = if self.nesting < MAX_NESTING {
            split(self.inst, &unplaced)
        } else {
            None
        };
        let opened = if unplaced.is_empty() {
            Ok(Opened::Solved)
        } else if pieces.is_some() {
            Ok(Opened::Failed)
        } else if self.branching == Branching::Buffers {
            self.branch_by_buffer(part, &unplaced, at)
        } else {
            self.branch_by_section(part, &unplaced, at)
        };
        self.scratch = unplaced;
        match pieces {
            Some(pieces) => self.solve_pieces(pieces),
            None => opened,
        }
    }

    /// Opens a node that branches on the section [`Self::find_hole`] picks, raising the level
    /// while no candidate is left at it.
    fn branch_by_section(
        &mut self,
        part: &Part,
        unplaced: &[u32],
        mut at: Position,
    ) -> Result<Opened, Stop> {
        let hole = loop {
            self.mark_candidates(part, unplaced, at);
            if let Some(hole) = self.find_hole(unplaced, at) {
                break hole;
            }
            match self.next_level(unplaced, at.level) {
                Some(next) => {
                    at = Position {
                        level: next,
                        after: NONE,
                    }
                }
                None => return Ok(Opened::Failed),
            }
        };
        let Some(key) = self.prune(part, unplaced, at) else {
            return Ok(Opened::Failed);
        };
        let first = self.candidates.len();
        for &b in unplaced {
            let bu = b as usize;
            if self.inst.lo[bu] <= hole && hole < self.inst.hi[bu] && self.is_candidate[bu] {
                self.candidates.push(b);
            }
        }
        let rank = &self.rank;
        self.candidates[first..].sort_unstable_by_key(|&b| rank[b as usize]);
        Ok(Opened::Node(Frame {
            at,
            hole,
            first: first as u32,
            next: first as u32,
            end: self.candidates.len() as u32,
            mark: self.log.len(),
            key,
        }))
    }

    /// Opens a node that branches on every buffer that may come next: at the level (later in
    /// the order than the last one placed at it) or above it, but not so high that another
    /// buffer would fit entirely below it (which would not be compact).
    fn branch_by_buffer(
        &mut self,
        part: &Part,
        unplaced: &[u32],
        at: Position,
    ) -> Result<Opened, Stop> {
        self.mark_candidates(part, unplaced, at);
        let Some(key) = self.prune(part, unplaced, at) else {
            return Ok(Opened::Failed);
        };
        let lowest_top = unplaced
            .iter()
            .map(|&b| self.floor[b as usize] + self.inst.size[b as usize])
            .min()
            .unwrap_or(u64::MAX);
        let first = self.candidates.len();
        for &b in unplaced {
            let bu = b as usize;
            let f = self.floor[bu];
            if f < lowest_top && self.eligible(bu) && (f > at.level || self.is_candidate[bu]) {
                self.candidates.push(b);
            }
        }
        let (floor, rank) = (&self.floor, &self.rank);
        self.candidates[first..].sort_unstable_by_key(|&b| (floor[b as usize], rank[b as usize]));
        Ok(Opened::Node(Frame {
            at,
            hole: NONE,
            first: first as u32,
            next: first as u32,
            end: self.candidates.len() as u32,
            mark: self.log.len(),
            key,
        }))
    }

    /// Checks dominance, the bounds and the memory; returns the node's key if it survives.
    /// A passed-over buffer can start no lower than the level plus the smallest unplaced size.
    fn prune(&mut self, part: &Part, unplaced: &[u32], at: Position) -> Option<u64> {
        let smallest = unplaced
            .iter()
            .map(|&b| self.inst.size[b as usize])
            .min()
            .unwrap_or(0);
        let passed_over = align_up(at.level + smallest, self.inst.alignment);
        if !self.compact(unplaced, at.level)
            || !self.bounds_hold(part, unplaced, at, passed_over)
            || !self.frontier_can_be_filled(part, unplaced, at, passed_over)
        {
            return None;
        }
        let key = self.key(part, unplaced, at);
        (!self.failed.contains(&key)).then_some(key)
    }

    /// Solves independent parts one after the other, the most crowded first.
    fn solve_pieces(&mut self, pieces: Vec<Part>) -> Result<Opened, Stop> {
        self.nesting += 1;
        let opened = self.solve_pieces_in_turn(pieces);
        self.nesting -= 1;
        opened
    }

    fn solve_pieces_in_turn(&mut self, mut pieces: Vec<Part>) -> Result<Opened, Stop> {
        pieces.sort_by_key(|p| {
            let crowded = (p.lo..p.hi)
                .map(|s| self.section_floor[s] + self.remaining[s])
                .max()
                .unwrap_or(0);
            Reverse(crowded)
        });
        let mark = self.log.len();
        for piece in &pieces {
            for s in piece.lo..piece.hi {
                if self.passed_at[s] != u64::MAX {
                    self.log.push(Undo::Pass(s as u32, self.passed_at[s]));
                    self.passed_at[s] = u64::MAX;
                }
            }
            if !self.solve(piece)? {
                self.undo_to(mark);
                return Ok(Opened::Failed);
            }
        }
        Ok(Opened::Solved)
    }

    /// The section to branch on: among those some candidate covers, the one with the fewest
    /// candidates or the least room to spare, as the strategy says (the earliest on ties).
    fn find_hole(&mut self, unplaced: &[u32], at: Position) -> Option<u32> {
        let mut range: Option<(usize, usize)> = None;
        for &b in unplaced {
            let b = b as usize;
            if self.is_candidate[b] {
                let (lo, hi) = (self.inst.lo[b] as usize, self.inst.hi[b] as usize);
                for c in &mut self.covered[lo..hi] {
                    *c += 1;
                }
                range = Some(range.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
            }
        }
        let (lo, hi) = range?;
        let crowding = |s: usize| self.section_floor[s].max(at.level) + self.remaining[s];
        let sections = (lo..hi).filter(|&s| self.covered[s] > 0);
        let hole = if self.branching == Branching::FewestCandidates {
            sections.min_by_key(|&s| (self.covered[s], Reverse(crowding(s)), s))
        } else {
            sections.min_by_key(|&s| (Reverse(crowding(s)), s))
        };
        self.covered[lo..hi].fill(0);
        hole.map(|s| s as u32)
    }

    /// The lowest floor above `level` among eligible buffers.
    fn next_level(&self, unplaced: &[u32], level: u64) -> Option<u64> {
        unplaced
            .iter()
            .map(|&b| b as usize)
            .filter(|&b| self.eligible(b))
            .map(|b| self.floor[b])
            .filter(|&f| f > level)
            .min()
    }

    /// False when some unplaced buffer fits entirely below the level: the space under it is
    /// free for good (everything still to come sits at or above the level), so every completion
    /// could move it down and is not compact.
    fn compact(&self, unplaced: &[u32], level: u64) -> bool {
        unplaced.iter().all(|&b| {
            let b = b as usize;
            self.floor[b] + self.inst.size[b] > level
        })
    }

    /// The lowest offset `b` can still get: its floor, or above the level if passed over
    /// (candidates must be marked).
    fn lowest(&self, b: usize, at: Position, passed_over: u64) -> u64 {
        let f = self.floor[b];
        if f > at.level || self.is_candidate[b] {
            f
        } else {
            passed_over
        }
    }

    /// The stacking bound of the module documentation, against the current cap: in each
    /// section, the unplaced buffers stack above the lowest offset any of them can get. A section
    /// passes as soon as one buffer covering it can start low enough; the one found last time is
    /// tried first, so most sections take one step.
    fn bounds_hold(
        &mut self,
        part: &Part,
        unplaced: &[u32],
        at: Position,
        passed_over: u64,
    ) -> bool {
        for &b in unplaced {
            let b = b as usize;
            let lowest = self.lowest(b, at, passed_over);
            if lowest + self.inst.size[b] > self.cap {
                return false;
            }
            self.lowest_of[b] = lowest;
        }
        for s in part.lo..part.hi {
            let rem = self.remaining[s];
            if rem == 0 {
                continue;
            }
            if rem > self.cap {
                return false;
            }
            let low_enough = |b: u32| {
                let b = b as usize;
                !self.placed[b] && self.lowest_of[b] <= self.cap - rem
            };
            if low_enough(self.witness[s]) {
                continue;
            }
            match self.inst.covering[s]
                .iter()
                .copied()
                .find(|&b| low_enough(b))
            {
                Some(b) => self.witness[s] = b,
                None => return false,
            }
        }
        true
    }

    /// False when the sections that must get a buffer at the level cannot all get one.
    ///
    /// In a section at or below the level, the next buffer either is a candidate placed at the
    /// level, or starts no lower than its lowest offset (see [`Self::lowest`]), where a candidate
    /// not placed at the level counts as passed over. When no buffer covering the section could
    /// start low enough that way for the rest to fit, a candidate must go across the section at
    /// the level. Candidates at one level do not conflict, so they are disjoint intervals of
    /// sections; a left-to-right pass over the sections checks that disjoint candidates can
    /// cover all such sections (`lowest_of` and the candidates must be current).
    fn frontier_can_be_filled(
        &mut self,
        part: &Part,
        unplaced: &[u32],
        at: Position,
        passed_over: u64,
    ) -> bool {
        let must_fill = |s: usize| {
            let rem = self.remaining[s];
            rem > 0
                && self.section_floor[s] <= at.level
                && !self.inst.covering[s].iter().any(|&b| {
                    let b = b as usize;
                    let later = if self.is_candidate[b] {
                        passed_over
                    } else {
                        self.lowest_of[b]
                    };
                    !self.placed[b] && later + rem <= self.cap
                })
        };
        if !(part.lo..part.hi).any(must_fill) {
            return true;
        }
        let reach = &mut self.reach;
        reach[part.lo..=part.hi].fill(false);
        reach[part.lo] = true;
        self.starts_here.clear();
        self.starts_here.extend(
            unplaced
                .iter()
                .copied()
                .filter(|&b| self.is_candidate[b as usize]),
        );
        let lo_of = &self.inst.lo;
        self.starts_here
            .sort_unstable_by_key(|&b| lo_of[b as usize]);
        let mut next = 0;
        for s in part.lo..part.hi {
            while next < self.starts_here.len()
                && (lo_of[self.starts_here[next] as usize] as usize) < s
            {
                next += 1;
            }
            if !reach[s] {
                continue;
            }
            if !must_fill(s) {
                reach[s + 1] = true;
            }
            let mut k = next;
            while k < self.starts_here.len() && lo_of[self.starts_here[k] as usize] as usize == s {
                reach[self.inst.hi[self.starts_here[k] as usize] as usize] = true;
                k += 1;
            }
        }
        reach[part.hi]
    }

    /// A hash of what the rest of this part's search depends on.
    fn key(&self, part: &Part, unplaced: &[u32], at: Position) -> u64 {
        let mut key = mix(at.level);
        for &b in unplaced {
            let bu = b as usize;
            let passed = self.floor[bu] == at.level && !self.is_candidate[bu];
            key ^= self.buffer_salt[bu][usize::from(passed)];
        }
        for s in part.lo..part.hi {
            if self.remaining[s] > 0 {
                let floor = self.section_floor[s];
                let floor = if floor < at.level { u64::MAX } else { floor };
                key = key.wrapping_add(mix(floor ^ self.section_salt[s]));
            }
        }
        key
    }

    fn place(&mut self, b: u32, at: u64) {
        let bu = b as usize;
        let inst = self.inst;
        self.placed[bu] = true;
        self.offset[bu] = at;
        self.log.push(Undo::Place(b));
        let top = at + inst.size[bu];
        for s in inst.lo[bu]..inst.hi[bu] {
            let su = s as usize;
            self.log.push(Undo::SectionFloor(s, self.section_floor[su]));
            self.section_floor[su] = top;
            self.remaining[su] -= inst.size[bu];
        }
        for &c in &inst.conflicts[bu] {
            let cu = c as usize;
            if !self.placed[cu] && self.top_below[cu] < top {
                self.log.push(Undo::BufferFloor(c, self.top_below[cu]));
                self.top_below[cu] = top;
            }
        }
    }

    fn undo_to(&mut self, mark: usize) {
        while self.log.len() > mark {
            match self.log.pop() {
                Some(Undo::Place(b)) => {
                    let bu = b as usize;
                    self.placed[bu] = false;
                    for s in self.inst.lo[bu]..self.inst.hi[bu] {
                        self.remaining[s as usize] += self.inst.size[bu];
                    }
                }
                Some(Undo::SectionFloor(s, old)) => self.section_floor[s as usize] = old,
                Some(Undo::BufferFloor(b, old)) => self.top_below[b as usize] = old,
                Some(Undo::Pass(s, old)) => self.passed_at[s as usize] = old,
                None => {}
            }
        }
    }
}

/// Splits unplaced buffers (sorted by first section) where no buffer spans from one group to the
/// next; `None` when they form one group.
fn split(inst: &Instance, unplaced: &[u32]) -> Option<Vec<Part>> {
    let mut reach = 0;
    let splits = unplaced.iter().enumerate().any(|(k, &b)| {
        let (lo, hi) = (inst.lo[b as usize] as usize, inst.hi[b as usize] as usize);
        let starts_group = k > 0 && lo >= reach;
        reach = reach.max(hi);
        starts_group
    });
    if !splits {
        return None;
    }
    let mut pieces: Vec<Part> = Vec::new();
    for &b in unplaced {
        let (lo, hi) = (inst.lo[b as usize] as usize, inst.hi[b as usize] as usize);
        match pieces.last_mut() {
            Some(piece) if lo < piece.hi => {
                piece.buffers.push(b);
                piece.hi = piece.hi.max(hi);
            }
            _ => pieces.push(Part {
                buffers: vec![b],
                lo,
                hi,
            }),
        }
    }
    Some(pieces)
}
