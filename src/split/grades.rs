//! A memo of chain grades shared by the searches. The searches run side by side with options
//! that differ in a few ways, and pass through the same plans: a search that does not share a
//! plan's whole ranking with the first (it grades fewer grids, or estimates bands otherwise)
//! still grades most of the same chains over the same grids. A chain's grades
//! ([`super::target::grade`]) are a pure function of its plan, the nodes earlier splits made,
//! the MAC allowance, its first and last steps, the grids and, when its estimate reads bands,
//! how bands are counted; so those are the key, and a search that meets them again takes the
//! grades and charges the work grading them would charge ([`ChainGrades::replay`]). It
//! changes no result; it saves building and grading the chain again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::cuts::lock;
use super::target::{ChainGrades, Graded};
use super::{Spend, Spent, TrialPlan};

/// What fixes a plan's grades besides the chain: the plan (by address: the entry holds it,
/// so no other plan takes its address while the memo stands), the nodes earlier splits made
/// and the MACs left.
#[derive(PartialEq, Eq, Hash)]
struct PlanKey {
    plan: [usize; 2],
    origin: Vec<Option<usize>>,
    allowance: u64,
}

/// The memo: each plan's grades, by plan. The searches of one model share it.
#[derive(Default)]
pub struct Grades {
    plans: Mutex<HashMap<PlanKey, Arc<PlanGrades>>>,
}

/// One plan's chain grades.
pub struct PlanGrades {
    /// The plan, held so that its address names it alone.
    _plan: TrialPlan,
    /// Its chains' grades.
    pub chains: ChainMemo,
}

/// A chain's first and last steps and whether bands are counted progressively
/// ([`super::estimate::Banding::progressive`]).
type ChainKey = ([usize; 2], bool);

/// Chain grades, by [`ChainKey`].
#[derive(Default)]
pub struct ChainMemo {
    kept: Mutex<HashMap<ChainKey, Arc<ChainGrades>>>,
}

impl Grades {
    /// The grades of `planned`, whose nodes `origin` maps to the input model's (`None` for
    /// nodes earlier splits made), within `allowance` extra MACs.
    pub fn of(
        &self,
        planned: &TrialPlan,
        origin: &[Option<usize>],
        allowance: u64,
    ) -> Arc<PlanGrades> {
        let key = PlanKey {
            plan: planned.address(),
            origin: origin.to_vec(),
            allowance,
        };
        let mut plans = lock(&self.plans);
        let entry = plans.entry(key).or_insert_with(|| {
            Arc::new(PlanGrades {
                _plan: planned.clone(),
                chains: ChainMemo::default(),
            })
        });
        Arc::clone(entry)
    }
}

impl ChainMemo {
    /// Grades kept for the chain over `steps` that answer `grids` counted with `progressive`:
    /// graded over `grids` or more, and with the same counting, or with progressive counting
    /// that read no bands (which then counts as the other).
    pub fn find(
        &self,
        steps: [usize; 2],
        grids: &[[usize; 2]],
        progressive: bool,
    ) -> Option<Arc<ChainGrades>> {
        let chains = lock(&self.kept);
        let answers = |g: &&Arc<ChainGrades>| g.covers(grids);
        if let Some(g) = chains.get(&(steps, progressive)).filter(answers) {
            return Some(Arc::clone(g));
        }
        let plain = chains.get(&(steps, true)).filter(|g| !g.banded);
        (!progressive).then_some(plain).flatten().filter(answers).cloned()
    }

    /// Keeps `grades` of the chain over `steps`, counted with `progressive`, unless grades
    /// kept already cover as many grids.
    pub fn keep(&self, steps: [usize; 2], progressive: bool, grades: Arc<ChainGrades>) {
        let mut chains = lock(&self.kept);
        let slot = chains.entry((steps, progressive)).or_insert_with(|| grades.clone());
        if grades.grids.len() > slot.grids.len() {
            *slot = grades;
        }
    }

    /// The grades of the chain over `steps` on `grids`: from the memo, charging `spend` what
    /// grading would, or made by `make` (which builds the chain and grades it, charging
    /// `spend`; `None` when the steps make no chain) and kept.
    pub fn grades(
        &self,
        (steps, grids, progressive): ([usize; 2], &'static [[usize; 2]], bool),
        spend: Spend,
        make: impl FnOnce(Spend) -> Result<Option<ChainGrades>, Spent>,
    ) -> Result<Option<Vec<Graded>>, Spent> {
        if let Some(kept) = self.find(steps, grids, progressive) {
            return kept.replay(grids, spend).map(Some);
        }
        let Some(made) = make(spend)? else {
            return Ok(None);
        };
        let graded = made.graded.clone();
        self.keep(steps, progressive, Arc::new(made));
        Ok(Some(graded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graded(grid: [usize; 2], estimate: u64) -> Graded {
        Graded {
            grid,
            estimate,
            inside: estimate,
            extra_macs: 0,
        }
    }

    static SHORT: [[usize; 2]; 2] = [[1, 2], [2, 1]];
    static LONG: [[usize; 2]; 3] = [[1, 2], [2, 1], [3, 1]];

    fn grades(grids: &'static [[usize; 2]], banded: bool) -> Arc<ChainGrades> {
        let graded = grids.iter().map(|&g| graded(g, 10)).collect();
        Arc::new(ChainGrades {
            visit: 6,
            banded,
            grids,
            graded,
        })
    }


    #[test]
    fn grades_of_more_grids_answer_fewer_and_are_kept_over_them() {
        let memo = ChainMemo::default();
        memo.keep([0, 1], true, grades(&SHORT, false));
        assert!(memo.find([0, 1], &SHORT, true).is_some());
        assert!(memo.find([0, 1], &LONG, true).is_none());
        memo.keep([0, 1], true, grades(&LONG, false));
        assert!(memo.find([0, 1], &LONG, true).is_some());
        // Fewer grids never replace more.
        memo.keep([0, 1], true, grades(&SHORT, false));
        assert_eq!(memo.find([0, 1], &SHORT, true).unwrap().grids.len(), 3);
        assert!(memo.find([0, 2], &SHORT, true).is_none());
    }

    #[test]
    fn progressive_grades_answer_plain_counting_only_when_they_read_no_bands() {
        let memo = ChainMemo::default();
        memo.keep([0, 1], true, grades(&SHORT, false));
        memo.keep([2, 3], true, grades(&SHORT, true));
        memo.keep([4, 5], false, grades(&SHORT, false));
        assert!(memo.find([0, 1], &SHORT, false).is_some());
        assert!(memo.find([2, 3], &SHORT, false).is_none());
        // Plain counting says nothing of what progressive counting would read.
        assert!(memo.find([4, 5], &SHORT, true).is_none());
        assert!(memo.find([4, 5], &SHORT, false).is_some());
    }
}
