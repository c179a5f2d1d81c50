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
//! decrease). The buffers whose floor equals the level are the candidates. The search picks a
//! *hole*: a section covered by a candidate, the one with the least room to spare. Either some
//! candidate covering the hole is placed at the level, or none is and the hole is *passed* at this
//! level (no buffer at this level may cover it any more). When no candidate is left, the level
//! rises to the lowest floor above it. Each placement is reached along exactly one path, because
//! at one level at most one buffer covers a section.
//!
//! **Pruning.** Every unplaced buffer has a lowest possible offset: its floor if it can still be
//! placed at or above the level, otherwise (it was passed over) the level plus the smallest size
//! still to place, since it must then rest on a buffer placed later. In each section, the unplaced
//! buffers whose lowest offset is at least `t` are stacked above `t`, so `t` plus their total size
//! must fit in the cap, for every `t`. A buffer that would fit entirely below the level has free
//! space under it for good, so every completion could move it down: such a partial placement is
//! dropped, which keeps only *compact* placements (some optimal placement is compact, as each such
//! move lowers the sum of offsets). Identical buffers are placed in index order.
//!
//! **Decomposition and memory.** When no unplaced buffer spans a point in time, the buffers on
//! either side no longer interact and are solved one after the other; if one side fails, the whole
//! node fails without trying the other side's alternatives. A node that failed is remembered by a
//! hash of everything its subtree depends on (its unplaced buffers, their sections' floors, the
//! level and the passed sections), so the same situation reached in another way (another stacking
//! order of the same buffers, or the same part of a problem next to other decisions elsewhere) is
//! pruned at once. Failures stay valid while the cap only decreases.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::time::Instant;

use super::instance::{Instance, NONE};
use crate::plan::problem::align_up;

/// The search ran out of time.
pub(super) struct Timeout;

/// One change to the search state, kept to undo it.
enum Undo {
    Place(u32),
    Floor(u32, u64),
    Pass(u32, u64),
}

/// Unplaced buffers that interact only among themselves: sorted by first section, covering the
/// sections `lo..hi`.
struct Part {
    buffers: Vec<u32>,
    lo: usize,
    hi: usize,
}

/// One open node: the branches left to try at a hole.
struct Frame {
    level: u64,
    hole: u32,
    /// Candidates are `candidates[first..end]`; `next` is the next to try.
    first: u32,
    next: u32,
    end: u32,
    passed: bool,
    mark: usize,
    key: u64,
}

/// What opening a node found.
enum Opened {
    Solved,
    Failed,
    Node(Frame),
}

/// Forgotten failures are only lost pruning, so the memory is simply cleared when full.
const MEMORY_LIMIT: usize = 1 << 23;

/// The exact search over one instance; failures are remembered across calls.
pub(super) struct Solver<'a> {
    inst: &'a Instance,
    cap: u64,
    deadline: Instant,
    nodes: u64,
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
    /// Per node: each unplaced buffer's aligned floor and lowest possible offset.
    floor: Vec<u64>,
    lowest: Vec<u64>,
    scratch: Vec<u32>,
    stacked: Vec<u64>,
    covered: Vec<u32>,
    failed: HashSet<u64>,
}

/// A well-mixed 64-bit function of one value (the SplitMix64 finaliser).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
            deadline: Instant::now(),
            nodes: 0,
            placed: vec![false; n],
            offset: vec![0; n],
            section_floor: vec![0; inst.sections],
            passed_at: vec![u64::MAX; inst.sections],
            remaining,
            log: Vec::new(),
            candidates: Vec::new(),
            floor: vec![0; n],
            lowest: vec![0; n],
            scratch: Vec::with_capacity(n),
            stacked: vec![0; inst.sections],
            covered: vec![0; inst.sections],
            failed: HashSet::new(),
        }
    }

    /// Finds a placement whose arena is at most `cap`: `Ok(Some(offsets))`, or `Ok(None)` when
    /// none exists, or `Err(Timeout)` at the deadline.
    pub(super) fn satisfy(
        &mut self,
        cap: u64,
        deadline: Instant,
    ) -> Result<Option<Vec<u64>>, Timeout> {
        self.cap = cap;
        self.deadline = deadline;
        let mut all: Vec<u32> = (0..self.inst.len() as u32).collect();
        all.sort_by_key(|&b| self.inst.lo[b as usize]);
        let whole = Part {
            buffers: all,
            lo: 0,
            hi: self.inst.sections,
        };
        let outcome = self.solve(&whole, 0);
        let found = matches!(outcome, Ok(true)).then(|| self.offset.clone());
        self.undo_to(0);
        if std::env::var_os("MEMPLAN_DEBUG").is_some() {
            eprintln!(
                "satisfy cap {cap}: nodes {} memo {} found {}",
                self.nodes,
                self.failed.len(),
                found.is_some()
            );
        }
        outcome.map(|_| found)
    }

    /// Places every buffer of `part` at or above `level`; on failure the state is unchanged,
    /// on success the placements stay.
    fn solve(&mut self, part: &Part, level: u64) -> Result<bool, Timeout> {
        let base = self.log.len();
        let mut stack = match self.open(part, level)? {
            Opened::Solved => return Ok(true),
            Opened::Failed => return Ok(false),
            Opened::Node(frame) => vec![frame],
        };
        while let Some(frame) = stack.last_mut() {
            self.undo_to(frame.mark);
            let level = frame.level;
            if frame.next < frame.end {
                let b = self.candidates[frame.next as usize];
                frame.next += 1;
                if level + self.inst.size[b as usize] > self.cap {
                    continue;
                }
                self.place(b, level);
            } else if !frame.passed {
                frame.passed = true;
                let hole = frame.hole;
                self.log
                    .push(Undo::Pass(hole, self.passed_at[hole as usize]));
                self.passed_at[hole as usize] = level;
            } else {
                self.candidates.truncate(frame.first as usize);
                self.remember(frame.key);
                stack.pop();
                continue;
            }
            match self.open(part, level)? {
                Opened::Solved => return Ok(true),
                Opened::Failed => {}
                Opened::Node(child) => stack.push(child),
            }
        }
        self.undo_to(base);
        Ok(false)
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

    /// True when `b` could be placed at `level` now: eligible, with that floor, and covering no
    /// section passed at that level.
    fn candidate(&self, b: usize, level: u64) -> bool {
        self.eligible(b)
            && self.floor[b] == level
            && (self.inst.lo[b]..self.inst.hi[b]).all(|s| self.passed_at[s as usize] != level)
    }

    /// Examines the situation after a branch: solved, failed (bounds, dominance or memory), split
    /// into independent parts (solved here, one after the other), or a new node.
    fn open(&mut self, part: &Part, mut level: u64) -> Result<Opened, Timeout> {
        self.nodes += 1;
        if std::env::var_os("MEMPLAN_DEBUG").is_some() && self.nodes.is_multiple_of(1 << 16) {
            let placed = self.placed.iter().filter(|&&p| p).count();
            let levels: Vec<u64> = (0..self.inst.sections)
                .map(|s| self.section_floor[s] >> 10)
                .collect();
            eprintln!(
                "nodes {} placed {placed} level {} floors {:?}",
                self.nodes,
                level >> 10,
                levels
            );
        }
        if self.nodes.is_multiple_of(1024) && Instant::now() >= self.deadline {
            return Err(Timeout);
        }
        self.scratch.clear();
        self.scratch.extend(
            part.buffers
                .iter()
                .copied()
                .filter(|&b| !self.placed[b as usize]),
        );
        if self.scratch.is_empty() {
            return Ok(Opened::Solved);
        }
        let unplaced = std::mem::take(&mut self.scratch);
        for &b in &unplaced {
            let b = b as usize;
            let (lo, hi) = (self.inst.lo[b] as usize, self.inst.hi[b] as usize);
            let top = self.section_floor[lo..hi]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            self.floor[b] = align_up(top, self.inst.alignment);
        }
        let outcome = self.examine(part, &unplaced, &mut level);
        self.scratch = unplaced;
        outcome
    }

    fn examine(
        &mut self,
        part: &Part,
        unplaced: &[u32],
        level: &mut u64,
    ) -> Result<Opened, Timeout> {
        let pieces = split(self.inst, unplaced);
        if pieces.len() > 1 {
            return self.solve_pieces(pieces, *level);
        }
        let hole = loop {
            if let Some(hole) = self.find_hole(unplaced, *level) {
                break hole;
            }
            match self.next_level(unplaced, *level) {
                Some(next) => *level = next,
                None => return Ok(Opened::Failed),
            }
        };
        let level = *level;
        if !self.compact(unplaced, level) || !self.bounds_hold(part, unplaced, level) {
            return Ok(Opened::Failed);
        }
        let key = self.key(part, unplaced, level);
        if self.failed.contains(&key) {
            return Ok(Opened::Failed);
        }
        let first = self.candidates.len();
        for &b in unplaced {
            let bu = b as usize;
            if self.inst.lo[bu] <= hole && hole < self.inst.hi[bu] && self.candidate(bu, level) {
                self.candidates.push(b);
            }
        }
        let rank = &self.inst.rank;
        self.candidates[first..].sort_unstable_by_key(|&b| rank[b as usize]);
        Ok(Opened::Node(Frame {
            level,
            hole,
            first: first as u32,
            next: first as u32,
            end: self.candidates.len() as u32,
            passed: false,
            mark: self.log.len(),
            key,
        }))
    }

    /// Solves independent parts one after the other, the most crowded first.
    fn solve_pieces(&mut self, mut pieces: Vec<Part>, level: u64) -> Result<Opened, Timeout> {
        pieces.sort_by_key(|p| {
            let crowded = (p.lo..p.hi)
                .map(|s| self.section_floor[s].max(level) + self.remaining[s])
                .max()
                .unwrap_or(0);
            Reverse(crowded)
        });
        let mark = self.log.len();
        for piece in &pieces {
            if !self.solve(piece, level)? {
                self.undo_to(mark);
                return Ok(Opened::Failed);
            }
        }
        Ok(Opened::Solved)
    }

    /// The section to branch on at `level`: among those some candidate covers, the one with the
    /// least room to spare (the earliest on ties).
    fn find_hole(&mut self, unplaced: &[u32], level: u64) -> Option<u32> {
        let mut range: Option<(usize, usize)> = None;
        for &b in unplaced {
            let b = b as usize;
            if self.candidate(b, level) {
                let (lo, hi) = (self.inst.lo[b] as usize, self.inst.hi[b] as usize);
                for c in &mut self.covered[lo..hi] {
                    *c += 1;
                }
                range = Some(range.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
            }
        }
        let (lo, hi) = range?;
        let mode = std::env::var("MEMPLAN_HOLE").unwrap_or_default();
        let hole = (lo..hi).filter(|&s| self.covered[s] > 0).min_by_key(|&s| {
            let used = self.section_floor[s].max(level) + self.remaining[s];
            match mode.as_str() {
                "left" => (0, Reverse(0), s),
                "mrv" => (self.covered[s], Reverse(used), s),
                _ => (0, Reverse(used), s),
            }
        });
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

    /// The stacking bounds of the module documentation, against the current cap.
    fn bounds_hold(&mut self, part: &Part, unplaced: &[u32], level: u64) -> bool {
        let smallest = unplaced
            .iter()
            .map(|&b| self.inst.size[b as usize])
            .min()
            .unwrap_or(0);
        let passed_over = align_up(level + smallest, self.inst.alignment);
        let mut order = Vec::with_capacity(unplaced.len());
        for &b in unplaced {
            let bu = b as usize;
            let f = self.floor[bu];
            self.lowest[bu] = if f > level || self.candidate(bu, level) {
                f
            } else {
                passed_over
            };
            order.push(b);
        }
        let lowest = &self.lowest;
        order.sort_unstable_by_key(|&b| Reverse(lowest[b as usize]));
        self.stacked[part.lo..part.hi].fill(0);
        for &b in &order {
            let b = b as usize;
            let (lo, hi) = (self.inst.lo[b] as usize, self.inst.hi[b] as usize);
            let size = self.inst.size[b];
            for total in &mut self.stacked[lo..hi] {
                *total += size;
                if lowest[b] + *total > self.cap {
                    return false;
                }
            }
        }
        true
    }

    /// A hash of what the rest of this part's search depends on.
    fn key(&self, part: &Part, unplaced: &[u32], level: u64) -> u64 {
        let mut key = mix(level);
        for &b in unplaced {
            key ^= mix(u64::from(b) + 0x5151);
        }
        for s in part.lo..part.hi {
            if self.remaining[s] > 0 {
                let floor = self.section_floor[s];
                let floor = if floor < level { u64::MAX } else { floor };
                let passed = u64::from(self.passed_at[s] == level);
                key = key.wrapping_add(mix(floor ^ mix(2 * s as u64 + passed + 1)));
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
            self.log.push(Undo::Floor(s, self.section_floor[su]));
            self.section_floor[su] = top;
            self.remaining[su] -= inst.size[bu];
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
                Some(Undo::Floor(s, old)) => self.section_floor[s as usize] = old,
                Some(Undo::Pass(s, old)) => self.passed_at[s as usize] = old,
                None => {}
            }
        }
    }
}

/// Splits unplaced buffers (sorted by first section) where no buffer spans from one group to the
/// next.
fn split(inst: &Instance, unplaced: &[u32]) -> Vec<Part> {
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
    pieces
}
