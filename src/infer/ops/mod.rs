//! The table of shape rules: one row per (domain, operator), contributed by one file per
//! operator family. Adding a family is one name in the `families!` list below; the family file
//! exports its rows as
//!
//! ```ignore
//! pub const RULES: &[Entry] = &[("com.example", "MyOp", my_op)];
//! fn my_op(ctx: &mut NodeCtx) -> anyhow::Result<()> { util::same_as_input(ctx, 0, 0) }
//! ```
//!
//! A rule reads its inputs through [`NodeCtx`](crate::infer::NodeCtx) (types, known values,
//! shape values, attributes, `ctx.opset()` for version-dependent behaviour) and sets every
//! output it has; `ctx.error(..)` builds an input error naming the node.

use std::collections::HashMap;
use std::sync::LazyLock;

use super::context::Rule;

mod einsum;
mod spatial;
mod util;

/// One row of the table: domain (`""` for `ai.onnx`), operator type and its rule.
pub type Entry = (&'static str, &'static str, Rule);

/// Declares the family modules and the list of their tables.
macro_rules! families {
    ($($family:ident),* $(,)?) => {
        $(mod $family;)*
        /// Every family's slice of the table.
        const FAMILIES: &[&[Entry]] = &[$($family::RULES),*];
    };
}

families!(
    attention,
    control_flow,
    conv,
    elementwise,
    generator,
    image,
    indexing,
    loss,
    matmul,
    microsoft,
    ms_attention,
    ms_nchwc,
    ms_nhwc,
    ms_norm,
    ms_quant,
    misc,
    ml,
    normalization,
    pool,
    quant,
    reduce,
    rnn,
    sequence,
    shape_ops,
    signal,
    text,
    training,
);

static TABLE: LazyLock<HashMap<(&'static str, &'static str), Rule>> = LazyLock::new(|| {
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .map(|&(domain, op, rule)| ((domain, op), rule))
        .collect()
});

/// The rule for an operator, if the table has one.
pub fn rule(domain: &str, op_type: &str) -> Option<Rule> {
    let table: &HashMap<(&str, &str), Rule> = &TABLE;
    table.get(&(domain, op_type)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_operator_is_listed_twice() {
        let rows: usize = FAMILIES.iter().map(|f| f.len()).sum();
        assert_eq!(rows, TABLE.len());
    }
}
