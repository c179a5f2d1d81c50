//! Byte sizes over the ranges: each tensor's expression (or its upper bound, with the reason),
//! each buffer's size, and writing them and the parametric offsets into the table.

use anyhow::{Result, anyhow};

use crate::bail_input;
use crate::emit::{ParametricInfo, Table};
use crate::ir::{Dim, Graph};
use crate::liveness::Liveness;
use crate::plan::{ParametricPlan, SymBuffer};
use crate::symbolic::{Expr, Ranges, at_corner, is_monotone, min_value};

/// The sizes of the analysis' tensors and buffers over the ranges.
pub struct Sized {
    /// Per tensor of the analysis: its exact size expression, or why it has none.
    exprs: Vec<Result<Expr, String>>,
    /// Per tensor: each dimension's expression, when every one has one.
    shapes: Vec<Option<Vec<String>>>,
    /// Per tensor: the reason it is planned at its upper bound, if it is.
    bound_reason: Vec<Option<String>>,
    /// Per buffer: its size expression.
    sizes: Vec<Expr>,
    /// Per buffer: the member owning the bytes (sharing no other's), whose end `$k` stands
    /// for the buffer's end.
    reps: Vec<usize>,
}

/// Sizes every buffer of `liveness` (analysed on `at_max`, the model at the upper corner)
/// with the expressions inference found over the ranges (`symbolic`).
pub fn size(
    symbolic: &Graph,
    at_max: &Graph,
    liveness: &Liveness,
    ranges: &Ranges,
) -> Result<Sized> {
    let name = |t: usize| &at_max.values[liveness.tensors[t].value].name;
    let exprs: Vec<Result<Expr, String>> = (0..liveness.tensors.len())
        .map(|t| {
            let id = symbolic.value_id(name(t));
            let Some(ty) = id.and_then(|id| symbolic.values[id].tensor_type()) else {
                return Err("not a tensor".to_string());
            };
            ty.bytes_expr().ok_or_else(|| {
                let id = id.expect("typed above");
                format!(
                    "no size expression over the ranges: {}",
                    super::no_expression::why(symbolic, id)
                )
            })
        })
        .collect();
    let shapes: Vec<Option<Vec<String>>> = (0..liveness.tensors.len())
        .map(|t| {
            let ty = symbolic.value(name(t))?.tensor_type()?;
            ty.shape
                .as_ref()?
                .iter()
                .map(|d| (*d != Dim::Unknown).then(|| d.to_string()))
                .collect()
        })
        .collect();
    let mut bound_reason: Vec<Option<String>> = vec![None; exprs.len()];
    let mut sizes = Vec::new();
    let mut reps = Vec::new();
    for buffer in &liveness.buffers {
        let bytes_at_max = |t: usize| liveness.tensors[t].bytes.unwrap_or(0);
        // The member sharing nobody's bytes: the others write over it or alias it.
        let rep = buffer
            .members
            .iter()
            .map(|&(t, _)| t)
            .find(|&t| liveness.sharing[t].is_none())
            .ok_or_else(|| anyhow!("bug: a buffer without an owner"))?;
        for &(t, _) in &buffer.members {
            if let Ok(e) = &exprs[t]
                && at_corner(e, ranges, true) != i64::try_from(bytes_at_max(t)).ok()
            {
                return Err(anyhow!(
                    "bug: '{}': the size expression {e} disagrees with the size at the upper corner",
                    name(t)
                ));
            }
            if let Ok(e) = &exprs[t]
                && !(is_monotone(e, ranges) && min_value(e, ranges).is_some_and(|v| v >= 0))
            {
                bail_input!(
                    "tensor '{}': its size {e} is not provably a size that never decreases as the symbols grow; plan one size (--dim NAME=N)",
                    name(t)
                );
            }
        }
        let fits = |t: usize| match (&exprs[rep], &exprs[t]) {
            (Ok(r), Ok(m)) => r
                .sub(m)
                .and_then(|d| min_value(&d, ranges))
                .is_some_and(|v| v >= 0),
            _ => false,
        };
        let culprit = buffer.members.iter().map(|&(t, _)| t).find(|&t| !fits(t));
        match culprit {
            None => sizes.push(exprs[rep].clone().map_err(|e| anyhow!("bug: {e}"))?),
            Some(c) => {
                let why = match &exprs[c] {
                    Err(e) => e.clone(),
                    Ok(_) => format!("may outgrow '{}' whose bytes it shares", name(rep)),
                };
                for &(t, _) in &buffer.members {
                    bound_reason[t] = Some(if t == c {
                        why.clone()
                    } else {
                        format!("shares its bytes with '{}' ({why})", name(c))
                    });
                }
                let bytes = i64::try_from(buffer.bytes)
                    .map_err(|_| anyhow!("bug: a buffer over 2^63 bytes"))?;
                sizes.push(Expr::constant(bytes));
            }
        }
        reps.push(rep);
    }
    Ok(Sized {
        exprs,
        shapes,
        bound_reason,
        sizes,
        reps,
    })
}

impl Sized {
    /// The buffers of the parametric problem.
    pub fn buffers(&self, liveness: &Liveness) -> Vec<SymBuffer> {
        liveness
            .buffers
            .iter()
            .zip(&self.sizes)
            .map(|(b, size)| SymBuffer {
                size: size.clone(),
                start: b.first as u32,
                end: b.last as u32 + 1,
            })
            .collect()
    }

    /// The tensors planned at their upper bound, by name, with the reason.
    pub fn upper_bound_reasons(&self, graph: &Graph, liveness: &Liveness) -> Vec<(String, String)> {
        self.bound_reason
            .iter()
            .enumerate()
            .filter_map(|(t, r)| {
                let name = graph.values[liveness.tensors[t].value].name.clone();
                Some((name, r.clone()?))
            })
            .collect()
    }

    /// Writes every arena tensor's expressions and the parametric plan into `table` (whose
    /// tensors are the analysis' tensors, in order).
    pub fn write(
        &self,
        table: &mut Table,
        liveness: &Liveness,
        parametric: &ParametricPlan,
        arena_at_max: u64,
    ) {
        let end_of = |b: usize| format!("${}", self.reps[b]);
        for (t, entry) in table.tensors.iter_mut().enumerate() {
            let Some(b) = liveness.buffer_of[t] else {
                continue;
            };
            let sym = &mut entry.symbolic;
            sym.offset_expr = Some(parametric.offset_text(b, &end_of));
            match &self.bound_reason[t] {
                Some(reason) => {
                    sym.upper_bound = true;
                    sym.upper_bound_reason = Some(reason.clone());
                    sym.bytes_expr = Some(entry.bytes.unwrap_or(0).to_string());
                }
                None => {
                    sym.bytes_expr = self.exprs[t].as_ref().ok().map(ToString::to_string);
                }
            }
            sym.shape_expr = self.shapes[t].clone();
        }
        table.parametric = Some(ParametricInfo {
            arena_expr: parametric.arena_text(&end_of),
            arena_at_max,
            proof: String::new(),
        });
    }
}
