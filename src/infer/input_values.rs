//! `--input-value NAME=V`: binds a graph input's value (a scalar or a small 1-D tensor), so that
//! `If` conditions, `Loop` trip counts and shape computations that read it fold. The input stays
//! a run-time input; the plan holds only for runs fed that value.

use std::sync::Arc;

use anyhow::Result;

use super::fold::{float_tensor, int_tensor};
use crate::bail_input;
use crate::ir::{Constant, DType, Dim, Graph, ValueType};

/// Binds each named input of `graph` to the value written in `text` (`16000`, `1,2,3`).
pub(super) fn bind_values(
    graph: &mut Graph,
    values: &std::collections::BTreeMap<String, String>,
) -> Result<()> {
    for (name, text) in values {
        let Some(id) = graph.input_id(name) else {
            bail_input!("--input-value names '{name}', which is not an input of the graph");
        };
        let value = &mut graph.values[id];
        let Some(ValueType::Tensor(t)) = &mut value.ty else {
            bail_input!("--input-value names '{name}', which is not a typed tensor input");
        };
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let shape: Vec<usize> = match t.shape.as_deref() {
            Some([]) if parts.len() == 1 => vec![],
            Some([]) => bail_input!(
                "--input-value {name}={text}: the input is a scalar, {} values given",
                parts.len()
            ),
            Some([Dim::Known(n)]) if *n != parts.len() as i64 => bail_input!(
                "--input-value {name}={text}: the input has {n} elements, {} given",
                parts.len()
            ),
            Some([_]) => vec![parts.len()],
            Some(dims) => bail_input!(
                "--input-value {name}: the input has rank {}; only scalars and 1-D inputs take a value",
                dims.len()
            ),
            None => bail_input!(
                "--input-value {name}: the input's rank is unknown; give it with --input-shape"
            ),
        };
        let constant = parse(t.dtype, &shape, &parts).ok_or_else(|| {
            crate::input_error!("--input-value {name}={text}: not {} values", t.dtype.name())
        })?;
        t.shape = Some(shape.iter().map(|&d| Dim::Known(d as i64)).collect());
        value.constant = Some(Arc::new(constant));
    }
    Ok(())
}

/// The value of the given element type and shape, `None` when a part does not parse.
fn parse(dtype: DType, shape: &[usize], parts: &[&str]) -> Option<Constant> {
    if dtype.is_float() {
        let values = parts
            .iter()
            .map(|p| p.parse::<f64>().ok())
            .collect::<Option<Vec<_>>>()?;
        return float_tensor(dtype, shape, values);
    }
    if dtype == DType::Bool {
        let values = parts
            .iter()
            .map(|p| match *p {
                "true" | "1" => Some(1),
                "false" | "0" => Some(0),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        return int_tensor(dtype, shape, values);
    }
    if !dtype.is_integer() {
        return None;
    }
    let values = parts
        .iter()
        .map(|p| p.parse::<i64>().ok())
        .collect::<Option<Vec<_>>>()?;
    if values.iter().any(|&v| super::fold::wrap_int(v, dtype) != v) {
        return None;
    }
    int_tensor(dtype, shape, values)
}
