//! Control flow: `If` (both branches inferred, merged unless the condition is known or one
//! branch cannot run), `Loop`
//! (loop-carried types generalised to a fixed point, scan outputs stacked) and `Scan`.

use anyhow::Result;

use super::Entry;
use super::util::{merge_types, merge_types_by};
use crate::error::{is_input_error, is_unsupported};
use crate::infer::NodeCtx;
use crate::ir::{DType, Dim, TensorType, ValueType};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[("", "If", if_), ("", "Loop", loop_), ("", "Scan", scan)];

fn scalar(dtype: DType) -> Option<ValueType> {
    Some(ValueType::tensor(dtype, vec![]))
}

/// The outputs of a subgraph, each required to have a type.
fn required(ctx: &NodeCtx, attribute: &str, types: Vec<Option<ValueType>>) -> Result<Vec<ValueType>> {
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| ctx.error(format!("output {i} of subgraph '{attribute}' has no type"))))
        .collect()
}

/// `If`. When the condition is known, the node's outputs are the taken branch's (values
/// included) and the other branch is ruled out: it cannot run. Otherwise both branches are
/// inferred and each output merges their types; but a branch whose inference finds the model
/// invalid for the planned inputs (a contradiction such as a rank or broadcast mismatch, not an
/// operator without a rule) would fail wherever it ran with them, so every run that succeeds
/// takes the other branch. That branch is ruled out and the node's outputs are the other's,
/// which is what onnxruntime (it checks only what it runs) computes. Both failing is an error.
/// Typed at the data-dependent bounds, a condition that depends on a count is not known
/// (see `InferOptions::count_dependent`): both branches stay and each output is planned at
/// the larger of the two.
fn if_(ctx: &mut NodeCtx) -> Result<()> {
    let chosen = ctx.ints(0).and_then(|v| v.first().copied()).map(|c| c != 0);
    let condition = ctx.input_value(0).map(|v| v.name.clone()).unwrap_or_default();
    let then_out = ctx.infer_subgraph_outputs("then_branch", &[], &[]);
    let else_out = ctx.infer_subgraph_outputs("else_branch", &[], &[]);
    let fails = |e: &anyhow::Error| is_input_error(e) && !is_unsupported(e);
    let (taken, other, ruled_out) = match (chosen, then_out, else_out) {
        (Some(true), t, _) => (t?, None, Some(("else_branch", format!("condition '{condition}' is true")))),
        (Some(false), _, e) => (e?, None, Some(("then_branch", format!("condition '{condition}' is false")))),
        (None, Ok(t), Ok(e)) => (t, Some(e), None),
        (None, Ok(t), Err(err)) if fails(&err) => (t, None, Some(("else_branch", format!("it fails for these inputs: {err:#}")))),
        (None, Err(err), Ok(e)) if fails(&err) => (e, None, Some(("then_branch", format!("it fails for these inputs: {err:#}")))),
        (None, Err(err), _) | (None, _, Err(err)) => return Err(err),
    };
    ctx.rule_out("then_branch", None);
    ctx.rule_out("else_branch", None);
    if let Some((branch, reason)) = ruled_out {
        ctx.rule_out(branch, Some(reason));
    }
    if taken.len() != ctx.output_count() {
        return Err(ctx.error(format!(
            "a branch has {} outputs for {} node outputs",
            taken.len(),
            ctx.output_count()
        )));
    }
    let Some(other) = other else {
        for (i, out) in taken.into_iter().enumerate() {
            if out.ty.is_none() {
                return Err(ctx.error(format!("branch output {i} has no type")));
            }
            ctx.set_output(i, out);
        }
        return Ok(());
    };
    if other.len() != taken.len() {
        return Err(ctx.error(format!(
            "branches have {} and {} outputs",
            taken.len(),
            other.len()
        )));
    }
    // Typed at the bounds (the sizes planned for), an output either branch may give is
    // planned at the larger of the two, where one provably is.
    let larger = |a: &Dim, b: &Dim| match (ctx.proven_le(a, b), ctx.proven_le(b, a)) {
        (true, _) => b.clone(),
        (_, true) => a.clone(),
        _ => Dim::Unknown,
    };
    let unknown = |_: &Dim, _: &Dim| Dim::Unknown;
    let differ: &dyn Fn(&Dim, &Dim) -> Dim = if ctx.env.options.data_dependent_at_bound { &larger } else { &unknown };
    let mut merged = Vec::with_capacity(taken.len());
    for (i, (t, e)) in taken.into_iter().zip(other).enumerate() {
        let (Some(t), Some(e)) = (t.ty, e.ty) else {
            return Err(ctx.error(format!("branch output {i} has no type")));
        };
        let ty = merge_types_by(&t, &e, differ)
            .ok_or_else(|| ctx.error(format!("branches disagree on output {i}: {t} and {e}")))?;
        merged.push(ty);
    }
    for (i, ty) in merged.into_iter().enumerate() {
        ctx.set(i, ty);
    }
    Ok(())
}

/// `t` with a leading dimension.
fn stacked(ty: &ValueType, lead: &Dim, ctx: &NodeCtx) -> Result<ValueType> {
    let ValueType::Tensor(t) = ty else {
        return Err(ctx.error(format!("scan output must be a tensor, not {ty}")));
    };
    Ok(ValueType::Tensor(TensorType {
        dtype: t.dtype,
        shape: t.shape.as_ref().map(|s| std::iter::once(lead.clone()).chain(s.iter().cloned()).collect()),
    }))
}

/// `Loop(M?, cond?, v_initial...)` → final loop-carried values and stacked scan outputs.
fn loop_(ctx: &mut NodeCtx) -> Result<()> {
    let carried_count = ctx.input_count().saturating_sub(2);
    let mut carried: Vec<Option<ValueType>> = (2..ctx.input_count()).map(|i| ctx.input_type(i).cloned()).collect();
    // A known-empty initial sequence constrains nothing: the body's type replaces it.
    let mut empty: Vec<bool> = (2..ctx.input_count())
        .map(|i| super::sequence::length(ctx, i) == Some(Dim::Known(0)))
        .collect();
    let mut outs = Vec::new();
    for _ in 0..3 {
        let mut inputs = vec![scalar(DType::Int64), scalar(DType::Bool)];
        inputs.extend(carried.iter().cloned());
        let mut lengths = vec![None, None];
        lengths.extend(empty.iter().map(|&e| e.then(|| vec![Dim::Known(0)])));
        let outputs = ctx.infer_subgraph_outputs("body", &inputs, &lengths)?;
        let types = outputs.into_iter().map(|o| o.ty).collect();
        outs = required(ctx, "body", types)?;
        if outs.len() < 1 + carried_count {
            return Err(ctx.error(format!("the body has {} outputs for {carried_count} loop-carried values", outs.len())));
        }
        let mut changed = false;
        for ((c, out), empty) in carried.iter_mut().zip(&outs[1..]).zip(&mut empty) {
            let merged = match c {
                Some(_) if std::mem::take(empty) => out.clone(),
                Some(prev) => merge_carried(prev, out)
                    .ok_or_else(|| ctx.error(format!("loop-carried type changes from {prev} to {out}")))?,
                None => out.clone(),
            };
            if c.as_ref() != Some(&merged) {
                *c = Some(merged);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (i, (c, out)) in carried.into_iter().zip(&outs[1..]).enumerate() {
        match c {
            Some(ValueType::Optional(inner)) if !matches!(out, ValueType::Optional(_)) => ctx.set(i, *inner),
            Some(ty) => ctx.set(i, ty),
            None => {}
        }
    }
    let trips = trip_count(ctx)?;
    for (k, ty) in outs[1 + carried_count..].iter().enumerate() {
        let ty = stacked(ty, &trips, ctx)?;
        ctx.set(carried_count + k, ty);
    }
    Ok(())
}

/// The type covering a loop-carried value's initial and updated types. An optional initial
/// value updated with a plain value stays optional inside the body (the node output then
/// unwraps it: after the first iteration the value is present).
fn merge_carried(prev: &ValueType, out: &ValueType) -> Option<ValueType> {
    match (prev, out) {
        (ValueType::Optional(inner), plain) if !matches!(plain, ValueType::Optional(_)) => {
            Some(ValueType::Optional(Box::new(merge_types(inner, plain)?)))
        }
        _ => merge_types(prev, out),
    }
}

/// The number of iterations: `M` (a constant or a size such as a data-dependent count) when
/// nothing can stop the loop earlier (no condition input, or a known-true one that the body
/// passes through unchanged); a data-dependent count bounded by a constant `M` when the
/// condition may stop it earlier; unknown otherwise.
fn trip_count(ctx: &mut NodeCtx) -> Result<Dim> {
    let constant = ctx.ints(0).and_then(|v| v.first().copied());
    let m = match constant {
        Some(m) => Dim::Known(m.max(0)),
        None => ctx
            .dims_value(0)
            .and_then(|v| v.first().cloned())
            .unwrap_or(Dim::Unknown),
    };
    if m == Dim::Unknown {
        return Ok(Dim::Unknown);
    }
    let cond_true = !ctx.has_input(1) || ctx.ints(1).is_some_and(|v| v.iter().all(|&c| c != 0));
    let body = ctx.subgraph("body")?;
    let passes_through = match (body.inputs.get(1), body.outputs.first()) {
        (Some(&cond_in), Some(&cond_out)) => {
            let mut v = cond_out;
            loop {
                if v == cond_in || body.values[v].constant.as_ref().is_some_and(|c| c.to_i64_vec().is_some_and(|x| x.iter().all(|&b| b != 0))) {
                    break true;
                }
                match body.values[v].producer.map(|p| &body.nodes[p]) {
                    Some(n) if n.op_type == "Identity" => match n.inputs.first() {
                        Some(Some(src)) => v = *src,
                        _ => break false,
                    },
                    _ => break false,
                }
            }
        }
        _ => false,
    };
    Ok(match (cond_true && passes_through, constant) {
        (true, _) => m,
        (false, Some(_)) => ctx.data_dependent(&m),
        (false, None) => Dim::Unknown,
    })
}

/// `Scan`: states through the body, scan inputs sliced along their axes, scan outputs
/// stacked along theirs (opset 8: with a leading batch axis on everything).
fn scan(ctx: &mut NodeCtx) -> Result<()> {
    let batched = ctx.opset() < 9;
    let first = usize::from(batched);
    let scan_inputs = ctx.attr_i("num_scan_inputs", 0)?.max(0) as usize;
    let Some(total) = ctx.input_count().checked_sub(first) else {
        return Err(ctx.error("Scan before opset 9 needs its sequence_lens input (input 0)"));
    };
    if scan_inputs > total {
        return Err(ctx.error("num_scan_inputs exceeds the number of inputs"));
    }
    let states = total - scan_inputs;
    let in_axes = ctx.attr_ints("scan_input_axes").map(<[i64]>::to_vec).unwrap_or_else(|| vec![0; scan_inputs]);
    let mut body_inputs: Vec<Option<ValueType>> = Vec::with_capacity(total);
    let mut batch = Dim::Unknown;
    for i in 0..states {
        body_inputs.push(match ctx.input(first + i)? {
            ValueType::Tensor(t) if batched => {
                if let Some(s) = &t.shape {
                    batch = s.first().cloned().unwrap_or(Dim::Unknown);
                }
                Some(ValueType::Tensor(TensorType {
                    dtype: t.dtype,
                    shape: t.shape.as_ref().map(|s| s.iter().skip(1).cloned().collect()),
                }))
            }
            other => Some(other.clone()),
        });
    }
    let mut length = Dim::Unknown;
    for j in 0..scan_inputs {
        let t = ctx.tensor(first + states + j)?;
        let slice = match &t.shape {
            Some(s) => {
                if batched && batch == Dim::Unknown {
                    batch = s.first().cloned().unwrap_or(Dim::Unknown);
                }
                let s: &[Dim] = if batched { s.get(1..).unwrap_or_default() } else { s };
                let axis = ctx.axis(in_axes.get(j).copied().unwrap_or(0), s.len())?;
                length = s[axis].clone();
                Some(s.iter().enumerate().filter(|(i, _)| *i != axis).map(|(_, d)| d.clone()).collect())
            }
            None => None,
        };
        body_inputs.push(Some(ValueType::Tensor(TensorType { dtype: t.dtype, shape: slice })));
    }
    let types = ctx.infer_subgraph("body", &body_inputs)?;
    let outs = required(ctx, "body", types)?;
    let out_axes = ctx.attr_ints("scan_output_axes").map(<[i64]>::to_vec);
    for (i, ty) in outs.into_iter().enumerate() {
        let ValueType::Tensor(t) = &ty else {
            ctx.set(i, ty);
            continue;
        };
        let shape = t.shape.as_ref().map(|s| -> Result<Vec<Dim>> {
            let mut s = s.clone();
            if i >= states {
                let axis = out_axes.as_ref().and_then(|a| a.get(i - states)).copied().unwrap_or(0);
                let axis = ctx.axis(axis, s.len() + 1)?;
                s.insert(axis, length.clone());
            }
            if batched {
                s.insert(0, batch.clone());
            }
            Ok(s)
        });
        let shape = shape.transpose()?;
        ctx.set_tensor(i, t.dtype, shape);
    }
    Ok(())
}
