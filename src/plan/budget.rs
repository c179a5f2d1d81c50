//! How much a search may do. Searches count their *work* (units of a few nanoseconds of
//! single-core time: a buffer placed, a conflict scanned, a search node's buffers examined) and
//! stop when their allowance is spent, so the same problem and budget give the same result on
//! any machine, under any load and at any thread count. A wall-clock deadline and a cancel flag
//! are safety stops on top: when one fires the result depends on timing, and the search reports
//! it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::progress::Progress;

/// Work units a budget grants per second of time limit: one unit stands for about 33 ns of one
/// core's time on a 2-core x86 machine, in every planner. Each planner counts *ticks* (its own
/// fine-grained operations) and converts them at its calibrated rate below ([`Meter::spend_ticks`]);
/// `cargo bench --bench calibrate` prints the nanoseconds a unit costs in each planner, and the
/// rates make them about equal (ARCHITECTURE.md, "Work units", has the method and numbers).
/// `auto` gives its search two thirds of the budget, so with a capacity to meet the exact search
/// runs about two thirds of `--time-limit`.
pub const WORK_PER_SECOND: u64 = 30_000_000;

/// Ticks of the exact search (100 a node plus 5 a buffer of its part) per work unit.
pub(crate) const EXACT_TICKS_PER_UNIT: u64 = 8;
/// Ticks of a greedy placement (20 plus 4 a conflicting buffer) per work unit.
pub(crate) const GREEDY_TICKS_PER_UNIT: u64 = 8;
/// Ticks of the genetic search's placements (counted as the greedy ones; a decoding also sorts
/// and breeds) per work unit.
pub(crate) const GENETIC_TICKS_PER_UNIT: u64 = 4;
/// Ticks of the S2 free list (100 a block, 50 a block moved) per work unit.
pub(crate) const FREE_LIST_TICKS_PER_UNIT: u64 = 16;

/// A time limit's wall-clock safety stop is this many times the limit, while its work
/// allowance is the limit's worth of units: the work ends a search first even on a machine
/// several times slower than calibrated (another process busy on each core), so the clock
/// decides nothing on a working machine.
pub const SAFETY_FACTOR: u32 = 10;

/// Clock and cancel checks happen after this many units at most.
const CHECK_EVERY: u64 = 1 << 16;

/// Why a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ending {
    /// It finished on its own (exhausted its search space, or met its goal).
    Complete,
    /// It spent its work allowance (deterministic).
    Work,
    /// The wall-clock safety stop fired (the result depends on timing).
    Time,
    /// It was cancelled from outside.
    Cancelled,
}

impl Ending {
    /// The name the table uses: `complete`, `work-budget`, `time-limit` or `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Complete => "complete",
            Ending::Work => "work-budget",
            Ending::Time => "time-limit",
            Ending::Cancelled => "cancelled",
        }
    }
}

/// A work allowance with its safety stops; cheap to clone.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Work units the whole planning may spend.
    pub work: u64,
    /// No search runs past this instant.
    pub deadline: Option<Instant>,
    /// Set from another thread to stop every search at its next check.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Where the searches report their phase and the arenas they find (for a display only).
    pub progress: Option<Arc<Progress>>,
}

impl Budget {
    /// No limit at all.
    pub fn unlimited() -> Self {
        Budget {
            work: u64::MAX,
            deadline: None,
            cancel: None,
            progress: None,
        }
    }

    /// The budget of a time limit counted from `started`: [`WORK_PER_SECOND`] units per second,
    /// and the safety stop [`SAFETY_FACTOR`] times the limit after `started`.
    pub fn for_time(limit: Duration, started: Instant) -> Self {
        let work = (limit.as_secs_f64() * WORK_PER_SECOND as f64).min(u64::MAX as f64) as u64;
        Budget {
            work,
            deadline: started.checked_add(limit.saturating_mul(SAFETY_FACTOR)),
            cancel: None,
            progress: None,
        }
    }

    /// [`Budget::for_time`] from now.
    pub fn within(limit: Duration) -> Self {
        Budget::for_time(limit, Instant::now())
    }

    /// The same stops with `numerator / denominator` of the work.
    pub fn part(&self, numerator: u64, denominator: u64) -> Budget {
        let work = (self.work as u128 * numerator as u128 / denominator.max(1) as u128) as u64;
        Budget {
            work,
            ..self.clone()
        }
    }

    /// The same stops with `work` units.
    pub fn part_of(&self, work: u64) -> Budget {
        Budget {
            work,
            ..self.clone()
        }
    }

    /// A meter drawing on this budget's whole work.
    pub fn meter(&self) -> Meter {
        Meter {
            granted: self.work,
            left: self.work,
            deadline: self.deadline,
            cancel: self.cancel.clone(),
            since_check: 0,
            ended: None,
            ticks: 0,
        }
    }

    /// Reports entering `phase`, whose searches stop at this budget's deadline.
    pub fn report_phase(&self, phase: &'static str) {
        if let Some(progress) = &self.progress {
            progress.phase(phase, self.deadline);
        }
    }

    /// Reports an arena found.
    pub fn report_arena(&self, arena: u64) {
        if let Some(progress) = &self.progress {
            progress.found(arena);
        }
    }

    /// True when a safety stop has fired already.
    pub fn stopped(&self) -> Option<Ending> {
        if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            Some(Ending::Cancelled)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Ending::Time)
        } else {
            None
        }
    }
}

/// One search's running account of work against its allowance.
#[derive(Debug)]
pub struct Meter {
    granted: u64,
    left: u64,
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
    since_check: u64,
    ended: Option<Ending>,
    ticks: u64,
}

impl Meter {
    /// Spends `ticks` at `per_unit` ticks a unit (a planner's calibrated rate); the remainder
    /// carries over to the next call, so the account is exact whatever the rounding.
    pub fn spend_ticks(&mut self, ticks: u64, per_unit: u64) -> bool {
        let total = self.ticks.saturating_add(ticks);
        let per_unit = per_unit.max(1);
        self.ticks = total % per_unit;
        self.spend(total / per_unit)
    }

    /// Spends `units`; false (for good) once the allowance is spent or a safety stop fired.
    pub fn spend(&mut self, units: u64) -> bool {
        if self.ended.is_some() {
            return false;
        }
        if units > self.left {
            self.left = 0;
            self.ended = Some(Ending::Work);
            return false;
        }
        self.left -= units;
        self.since_check += units;
        if self.since_check >= CHECK_EVERY {
            self.since_check = 0;
            if let Some(stop) = self.stopped() {
                self.ended = Some(stop);
                return false;
            }
        }
        true
    }

    /// True while the search may go on (checks the safety stops now).
    pub fn running(&mut self) -> bool {
        if self.ended.is_none()
            && let Some(stop) = self.stopped()
        {
            self.ended = Some(stop);
        }
        self.ended.is_none()
    }

    /// Why the search ended so far: [`Ending::Complete`] while nothing stopped it.
    pub fn ending(&self) -> Ending {
        self.ended.unwrap_or(Ending::Complete)
    }

    /// Units left.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Units spent so far (including what sub-searches gave back with [`Meter::absorb`]).
    pub fn spent(&self) -> u64 {
        self.granted - self.left
    }

    /// A meter for a sub-search with `1 / denominator` of what is left; give it back with
    /// [`Meter::absorb`].
    pub fn share(&self, denominator: u64) -> Meter {
        let left = self.left / denominator.max(1);
        Meter {
            granted: left,
            left,
            deadline: self.deadline,
            cancel: self.cancel.clone(),
            since_check: self.since_check,
            ended: self.ended,
            ticks: 0,
        }
    }

    /// Charges what a sub-search from [`Meter::share`] spent; a safety stop it met stops this
    /// meter too (its own allowance running out does not).
    pub fn absorb(&mut self, sub: Meter, granted: u64) {
        self.left -= granted - sub.left;
        if let Some(stop @ (Ending::Time | Ending::Cancelled)) = sub.ended {
            self.ended = Some(stop);
        }
    }

    fn stopped(&self) -> Option<Ending> {
        Budget {
            work: 0,
            deadline: self.deadline,
            cancel: self.cancel.clone(),
            progress: None,
        }
        .stopped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_runs_out_at_the_allowance_exactly() {
        let budget = Budget {
            work: 10,
            ..Budget::unlimited()
        };
        let mut meter = budget.meter();
        assert!(meter.spend(4) && meter.spend(6));
        assert_eq!(meter.ending(), Ending::Complete);
        assert!(!meter.spend(1));
        assert_eq!(meter.ending(), Ending::Work);
        assert!(!meter.spend(0), "an ended meter stays ended");
    }

    #[test]
    fn a_past_deadline_or_a_cancel_stops_at_the_next_check() {
        let past = Budget {
            deadline: Some(Instant::now()),
            ..Budget::unlimited()
        };
        let mut meter = past.meter();
        assert!(!meter.spend(CHECK_EVERY));
        assert_eq!(meter.ending(), Ending::Time);
        let flag = Arc::new(AtomicBool::new(false));
        let cancellable = Budget {
            cancel: Some(flag.clone()),
            ..Budget::unlimited()
        };
        let mut meter = cancellable.meter();
        assert!(meter.running());
        flag.store(true, Ordering::Relaxed);
        assert!(!meter.running());
        assert_eq!(meter.ending(), Ending::Cancelled);
    }

    #[test]
    fn ticks_convert_to_units_without_losing_the_remainder() {
        let mut meter = Budget {
            work: 10,
            ..Budget::unlimited()
        }
        .meter();
        // 3 + 3 + 3 ticks at 4 a unit: 0 units, then 1 (6 ticks, 2 left over), then 1 more
        // (5 ticks, 1 left over): 2 units spent, 8 left.
        assert!(meter.spend_ticks(3, 4) && meter.spend_ticks(3, 4) && meter.spend_ticks(3, 4));
        assert_eq!(meter.left(), 8);
        // 1 left over + 31 = 32 ticks = 8 units: exactly the rest; one tick more overdraws.
        assert!(meter.spend_ticks(31, 4));
        assert_eq!(meter.left(), 0);
        assert!(meter.spend_ticks(3, 4), "3 ticks stay below a unit");
        assert!(!meter.spend_ticks(1, 4));
        assert_eq!(meter.ending(), Ending::Work);
    }

    #[test]
    fn a_share_is_charged_back_to_its_parent() {
        let mut meter = Budget {
            work: 100,
            ..Budget::unlimited()
        }
        .meter();
        let mut sub = meter.share(4);
        let granted = sub.left();
        assert_eq!(granted, 25);
        assert!(sub.spend(20) && !sub.spend(10));
        meter.absorb(sub, granted);
        assert_eq!((meter.left(), meter.ending()), (75, Ending::Complete));
    }
}
