//! S1's improvement search. Steps are taken in segments; inside a segment every combination
//! of one action per step (or none) is tried: *move* a new block to another free spot of its
//! tier, *reuse* (toggle overwriting its in-place candidate) or *swap* it to another tier.
//! After each action the later steps are re-placed by the initial rules and the whole
//! program is scored by E(s); the best state at the end of the segment is kept, so the search
//! costs a sum of k^segment instead of k^steps. Once every block from the segment on sits in
//! the fastest tier, nothing can improve and the search stops.

use super::Hierarchy;
use crate::plan::budget::{Budget, Ending, Meter};

use super::cost::cost;
use super::place::{Choice, Placement, Stuck, place, walk};
use super::seed::density_seed;

/// Walks over all the steps at most this many times (stopping when a walk finds nothing).
const PASSES: usize = 4;

/// Other spots tried per move action, at most.
const MAX_SPOTS: usize = 4;

/// The initial placement, the improved one and their costs.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The initial placement.
    pub initial: Placement,
    /// E(s) of the initial placement.
    pub cost_initial: f64,
    /// The best placement found.
    pub best: Placement,
    /// E(s) of the best placement.
    pub cost_final: f64,
    /// Actions kept in the best state.
    pub actions: usize,
    /// What ended the search (the first stop met by either run).
    pub ended: Ending,
}

/// Work units one scored placement costs (placing and scoring walk every block).
fn placement_work(h: &Hierarchy) -> u64 {
    WORK_PER_BLOCK * (1 + h.blocks.len() as u64)
}

/// Work units per block of a scored placement (so that a unit is a few nanoseconds, as
/// [`crate::plan::budget`] assumes).
const WORK_PER_BLOCK: u64 = 3;

/// Runs the initial placement and the improvement search with `segment` steps per segment,
/// from S1's initial placement and, when it is cheaper, from the density seed (see
/// `density_seed`); keeps the better result. The two runs share `budget`'s work (each scored
/// placement costs `placement_work`); when it is spent or a safety stop fires, the search
/// keeps the best state so far.
pub fn improve(h: &Hierarchy, segment: usize, budget: &Budget) -> Result<Outcome, Stuck> {
    let choices = vec![Choice::default(); h.blocks.len()];
    let initial = place(h, &choices)?;
    let cost_initial = cost(h, &initial);
    let state = State {
        placement: initial.clone(),
        cost: cost_initial,
        actions: 0,
    };
    let mut born: Vec<Vec<usize>> = vec![Vec::new(); h.steps()];
    for (b, block) in h.blocks.iter().enumerate() {
        if block.size > 0 {
            born[block.first].push(b);
        }
    }
    let seed = density_seed(h).filter(|s| s.2 < cost_initial);
    let runs = if seed.is_some() { 2 } else { 1 };
    let mut meter = budget.part(1, runs).meter();
    let mut best = search(h, &born, segment, &mut meter, state, choices);
    let mut ended = meter.ending();
    if let Some((seeded, placement, e)) = seed {
        let state = State {
            placement,
            cost: e,
            actions: seeded.iter().filter(|c| c.tier.is_some()).count(),
        };
        let mut meter = budget.part(1, runs).meter();
        let other = search(h, &born, segment, &mut meter, state, seeded);
        if ended == Ending::Complete {
            ended = meter.ending();
        }
        if other.cost < best.cost {
            best = other;
        }
    }
    Ok(Outcome {
        initial,
        cost_initial,
        cost_final: best.cost,
        best: best.placement,
        actions: best.actions,
        ended,
    })
}

/// S1's segment search from `state` (made by `choices`) while `meter` allows; `born[s]` lists
/// the blocks made at step `s`.
fn search(
    h: &Hierarchy,
    born: &[Vec<usize>],
    segment: usize,
    meter: &mut Meter,
    mut state: State,
    mut choices: Vec<Choice>,
) -> State {
    let segment = segment.max(1);
    for _ in 0..PASSES {
        let before = state.cost;
        let mut start = 0;
        while start < born.len() {
            let rest_fastest = born[start..]
                .iter()
                .flatten()
                .all(|&b| state.placement.tier[b] == 0);
            if rest_fastest || !meter.running() {
                break;
            }
            let end = (start + segment).min(born.len());
            let mut search = Segment {
                h,
                born: &born[start..end],
                best: (state.clone(), choices.clone()),
                meter: &mut *meter,
                work: placement_work(h),
            };
            search.descend(0, &mut choices, &state);
            (state, choices) = search.best;
            start = end;
        }
        if state.cost >= before || !meter.running() {
            break;
        }
    }
    state
}

/// A scored placement and the number of actions that led to it.
#[derive(Clone, Debug)]
struct State {
    placement: Placement,
    cost: f64,
    actions: usize,
}

/// Exhaustive search over one segment (cut short when the meter runs out).
struct Segment<'a> {
    h: &'a Hierarchy,
    born: &'a [Vec<usize>],
    best: (State, Vec<Choice>),
    meter: &'a mut Meter,
    /// Work units per scored placement.
    work: u64,
}

impl Segment<'_> {
    fn descend(&mut self, depth: usize, choices: &mut Vec<Choice>, state: &State) {
        if depth == self.born.len() {
            let (best, _) = &self.best;
            if state.cost < best.cost - 1e-9 * best.cost.abs()
                || (state.cost <= best.cost && state.actions < best.actions)
            {
                self.best = (state.clone(), choices.clone());
            }
            return;
        }
        self.descend(depth + 1, choices, state);
        for (b, choice) in self.actions(&self.born[depth], choices, &state.placement) {
            if !self.meter.spend(self.work) {
                return;
            }
            let saved = choices[b];
            choices[b] = choice;
            if let Ok(placement) = place(self.h, choices) {
                let next = State {
                    cost: cost(self.h, &placement),
                    placement,
                    actions: state.actions + 1,
                };
                self.descend(depth + 1, choices, &next);
            }
            choices[b] = saved;
        }
    }

    /// Every single action on the blocks born at this step.
    fn actions(&self, blocks: &[usize], choices: &[Choice], p: &Placement) -> Vec<(usize, Choice)> {
        let mut out = Vec::new();
        for &b in blocks {
            let tier = p.tier[b];
            for t in (0..self.h.tiers.len()).filter(|&t| t != tier) {
                out.push((
                    b,
                    Choice {
                        tier: Some(t),
                        offset: None,
                        reuse: Some(false),
                    },
                ));
            }
            if self.h.blocks[b].reuses.is_some() {
                let reuse = Some(!p.reused[b]);
                out.push((
                    b,
                    Choice {
                        tier: None,
                        offset: None,
                        reuse,
                    },
                ));
            }
            if let Ok((_, levels)) = walk(self.h, choices, Some(b)) {
                let size = self.h.blocks[b].size;
                let spots = levels[tier].spots(size, self.h.alignment.max(1));
                for at in spots
                    .into_iter()
                    .filter(|&at| at != p.offset[b])
                    .take(MAX_SPOTS)
                {
                    out.push((
                        b,
                        Choice {
                            tier: Some(tier),
                            offset: Some(at),
                            reuse: Some(false),
                        },
                    ));
                }
            }
        }
        out
    }
}
