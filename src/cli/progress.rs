//! The progress line `plan` draws on a terminal: after about a second of work, the phase, the
//! best arena found so far and the time left of the running search, redrawn in place on
//! stderr and erased when the work ends. Nothing is drawn when stderr is not a terminal or
//! with `--quiet`.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::plan::{Progress, Snapshot};

/// Work shorter than this shows no line.
const QUIET_START: Duration = Duration::from_secs(1);

/// How often the line is redrawn.
const REDRAW: Duration = Duration::from_millis(200);

/// A progress record for `plan` when a line should be drawn (stderr is a terminal and
/// `quiet` is off).
pub fn for_terminal(quiet: bool) -> Option<Arc<Progress>> {
    (!quiet && std::io::stderr().is_terminal()).then(|| Arc::new(Progress::default()))
}

/// Runs `work`, drawing `progress` (if any) on stderr meanwhile.
pub fn show_while<T: Send>(progress: Option<Arc<Progress>>, work: impl FnOnce() -> T + Send) -> T {
    let Some(progress) = progress else {
        return work();
    };
    let started = Instant::now();
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut drawn = false;
            loop {
                match finished.recv_timeout(REDRAW) {
                    Err(RecvTimeoutError::Timeout) if started.elapsed() >= QUIET_START => {
                        draw(&line(&progress.snapshot(), Instant::now()));
                        drawn = true;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
            if drawn {
                draw("");
            }
        });
        let result = work();
        let _ = done.send(());
        result
    })
}

/// Redraws the terminal's current line with `text`.
fn draw(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{text}");
    let _ = err.flush();
}

/// The line for a snapshot taken at `now`.
fn line(seen: &Snapshot, now: Instant) -> String {
    let phase = if seen.phase.is_empty() {
        "reading the model"
    } else {
        seen.phase
    };
    let mut text = format!("onnx-memplan: {phase}");
    if let Some(arena) = seen.best_arena {
        text.push_str(&format!(", best arena {arena} bytes"));
    }
    if let Some(deadline) = seen.deadline {
        let left = deadline.saturating_duration_since(now).as_secs_f64();
        text.push_str(&format!(", {left:.1} s left"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_phase_the_best_arena_and_the_time_left() {
        let now = Instant::now();
        let seen = Snapshot {
            phase: "budget search",
            best_arena: Some(1_246_208),
            deadline: Some(now + Duration::from_millis(2500)),
        };
        assert_eq!(
            line(&seen, now),
            "onnx-memplan: budget search, best arena 1246208 bytes, 2.5 s left"
        );
        let start = Snapshot {
            phase: "",
            best_arena: None,
            deadline: None,
        };
        assert_eq!(line(&start, now), "onnx-memplan: reading the model");
    }
}
