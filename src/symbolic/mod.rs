//! Symbolic sizes, independent of ONNX: integer expressions in named symbols (dynamic
//! dimensions such as `sequence`), their normal form and evaluation, and integer ranges of
//! symbols.

mod expr;
mod range;

pub use expr::{Atom, Expr, Monomial};
pub use range::{Ranges, at_corner, is_monotone, max_value, min_value, point_count, points};
