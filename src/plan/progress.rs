//! What a long planning run is doing, for a progress display. The pass writes it (the phase,
//! each arena it finds, the deadline of the running search) and a display thread reads it; it
//! never changes what the pass computes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Shared progress of one planning run.
#[derive(Debug)]
pub struct Progress {
    state: Mutex<State>,
    best: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    phase: &'static str,
    deadline: Option<Instant>,
}

/// One reading of a [`Progress`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// What the pass is doing, e.g. `planning`.
    pub phase: &'static str,
    /// The smallest arena found so far, in bytes.
    pub best_arena: Option<u64>,
    /// When the running search's safety stop fires.
    pub deadline: Option<Instant>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            state: Mutex::new(State::default()),
            best: AtomicU64::new(u64::MAX),
        }
    }
}

impl Progress {
    /// Enters a phase whose searches stop at `deadline` (if any).
    pub fn phase(&self, phase: &'static str, deadline: Option<Instant>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *state = State { phase, deadline };
    }

    /// Records an arena found; the display shows the smallest.
    pub fn found(&self, arena: u64) {
        self.best.fetch_min(arena, Ordering::Relaxed);
    }

    /// What the pass is doing now.
    pub fn snapshot(&self) -> Snapshot {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let best = self.best.load(Ordering::Relaxed);
        Snapshot {
            phase: state.phase,
            best_arena: (best != u64::MAX).then_some(best),
            deadline: state.deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_arena_and_the_latest_phase_are_shown() {
        let progress = Progress::default();
        assert_eq!(progress.snapshot().best_arena, None);
        progress.phase("planning", None);
        progress.found(300);
        progress.found(200);
        progress.found(250);
        let now = Instant::now();
        progress.phase("budget search", Some(now));
        let seen = progress.snapshot();
        assert_eq!(
            seen,
            Snapshot {
                phase: "budget search",
                best_arena: Some(200),
                deadline: Some(now),
            }
        );
    }
}
