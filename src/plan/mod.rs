//! The planner core: dynamic storage allocation over intervals, independent of ONNX.
//!
//! A [`Problem`] lists buffers (size, lifetime); [`solve`] gives each an offset in one arena so
//! that buffers live at the same step never share bytes; [`verify`] checks any solution on its
//! own; [`lower_bound`] says how small an arena can be at best.

mod bounds;
pub mod budget;
pub mod csv;
mod exact;
mod free_list;
mod genetic;
mod greedy;
mod options;
mod parametric;
mod place;
mod portfolio;
mod problem;
pub mod progress;
pub(crate) mod rng;
pub mod synth;
mod timeline;
mod verify;

pub use bounds::{aligned_live_bound, lower_bound, max_live_bound};
pub use budget::{Budget, Ending, Meter, SAFETY_FACTOR, WORK_PER_SECOND};
pub use options::{PlanOptions, PlannerChoice, UnknownPlanner, planner_names};
pub use parametric::{
    ParametricPlan, Point, SymBuffer, SymProblem, plan_parametric, sample_points,
};
pub use portfolio::HEURISTICS;
pub use problem::{Buffer, MAX_TOTAL, PlanError, Problem, Search, Solution};
pub use progress::{Progress, Snapshot};
pub use verify::{VerifyError, verify};

/// Plans the problem with the chosen planner. Errors only on an invalid problem (zero alignment,
/// sizes whose sum overflows); a capacity that cannot be met still yields the best plan found,
/// with `lower_bound > capacity` when the capacity is proven impossible.
pub fn solve(problem: &Problem, options: &PlanOptions) -> Result<Solution, PlanError> {
    problem.validate()?;
    Ok(portfolio::run(problem, options))
}
