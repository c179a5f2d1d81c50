//! Shared command-line options: symbolic dims and input shapes.

use std::collections::{BTreeMap, BTreeSet};

use crate::infer::InferOptions;
use crate::onnx::proto::{ModelProto, tensor_shape_proto::dimension, type_proto};

/// `--dim` / `--input-shape` / `--trust-value-info`, shared by every command that infers.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ShapeArgs {
    /// Bind a symbolic dimension to a size, `--dim batch=1`, or to an integer range,
    /// `--dim sequence=1..512` (repeatable).
    #[arg(long = "dim", value_name = "NAME=N|LO..HI", value_parser = parse_dim)]
    pub dims: Vec<(String, (i64, i64))>,
    /// Give an input's whole shape, e.g. `--input-shape images=1x3x224x224` (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=AxBxC", value_parser = parse_input_shape)]
    pub input_shapes: Vec<(String, Vec<i64>)>,
    /// Bind an input's value (a scalar or small 1-D tensor), e.g. `--input-value sr=16000` or
    /// `--input-value ids=1,2,3`, so conditions, trip counts and shape computations fold; the
    /// plan then holds only for runs fed that value (repeatable).
    #[arg(long = "input-value", value_name = "NAME=V", value_parser = parse_input_value)]
    pub input_values: Vec<(String, String)>,
    /// For operators without a shape rule, use the output types the model declares.
    #[arg(long)]
    pub trust_value_info: bool,
}

impl ShapeArgs {
    /// The inference options these flags describe.
    pub fn infer_options(&self) -> InferOptions {
        InferOptions {
            dims: self
                .dims
                .iter()
                .filter(|(_, (lo, hi))| lo == hi)
                .map(|(name, (lo, _))| (name.clone(), *lo))
                .collect::<BTreeMap<_, _>>(),
            ranges: self
                .dims
                .iter()
                .filter(|(_, (lo, hi))| lo != hi)
                .cloned()
                .collect(),
            input_shapes: self.input_shapes.iter().cloned().collect(),
            input_values: self.input_values.iter().cloned().collect(),
            trust_value_info: self.trust_value_info,
            ..InferOptions::default()
        }
    }
}

impl ShapeArgs {
    /// A warning for each `--dim` name `model` does not declare, listing the names it does
    /// (a warning, not an error: scripts pass one set of bindings to many models).
    pub fn unknown_dim_warnings(&self, model: &ModelProto) -> Vec<String> {
        let symbols = model_symbols(model);
        let mut warned = BTreeSet::new();
        self.dims
            .iter()
            .filter(|(name, _)| !symbols.contains(name) && warned.insert(name.clone()))
            .map(|(name, _)| {
                let known = if symbols.is_empty() {
                    "none".to_string()
                } else {
                    symbols.iter().cloned().collect::<Vec<_>>().join(", ")
                };
                format!("--dim {name}: the model has no dimension '{name}' (its symbols: {known})")
            })
            .collect()
    }
}

/// The symbolic dimension names the model's inputs, outputs and value infos declare.
fn model_symbols(model: &ModelProto) -> BTreeSet<String> {
    let Some(graph) = &model.graph else {
        return BTreeSet::new();
    };
    graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info)
        .filter_map(|info| match info.r#type.as_ref()?.value.as_ref()? {
            type_proto::Value::TensorType(t) => t.shape.as_ref(),
            _ => None,
        })
        .flat_map(|shape| &shape.dim)
        .filter_map(|d| match &d.value {
            Some(dimension::Value::DimParam(p)) if !p.is_empty() => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// `NAME=N` (the range `N..N`) or `NAME=LO..HI` with `1 ≤ LO ≤ HI` (a dimension of 0 makes
/// empty tensors, which no plan is for).
fn parse_dim(s: &str) -> Result<(String, (i64, i64)), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=N or NAME=LO..HI"))?;
    let number = |v: &str| {
        v.trim()
            .parse::<i64>()
            .map_err(|_| format!("'{v}' in '{s}' is not a whole number"))
    };
    let (lo, hi) = match value.split_once("..") {
        Some((lo, hi)) => (number(lo)?, number(hi)?),
        None => (number(value)?, number(value)?),
    };
    if lo < 1 || name.is_empty() {
        return Err(format!("'{s}': need a name and a size ≥ 1"));
    }
    if hi < lo {
        return Err(format!("'{s}': the range is empty ({hi} < {lo})"));
    }
    Ok((name.to_string(), (lo, hi)))
}

/// `NAME=N` for `--at`: one value of a range symbol.
pub fn parse_at(s: &str) -> Result<(String, i64), String> {
    match parse_dim(s)? {
        (name, (lo, hi)) if lo == hi => Ok((name, lo)),
        _ => Err(format!("'{s}' is not NAME=N")),
    }
}

fn parse_input_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.trim().is_empty() => {
            let parts: Vec<&str> = value.split(',').map(str::trim).collect();
            Ok((name.to_string(), parts.join(",")))
        }
        _ => Err(format!("'{s}' is not NAME=V or NAME=V1,V2,...")),
    }
}

fn parse_input_shape(s: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=1x3x224x224"))?;
    let dims = if dims.trim().is_empty() || dims.trim() == "scalar" {
        Vec::new()
    } else {
        dims.split(['x', 'X', ','])
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&v| v >= 1)
                    .ok_or_else(|| format!("'{d}' in '{s}' is not a size ≥ 1"))
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    Ok((name.to_string(), dims))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bindings() {
        assert_eq!(parse_dim("batch=4"), Ok(("batch".into(), (4, 4))));
        assert_eq!(
            parse_dim("sequence=1..512"),
            Ok(("sequence".into(), (1, 512)))
        );
        assert!(parse_dim("sequence=8..1").is_err());
        assert!(parse_dim("sequence=1..x").is_err());
        assert!(parse_dim("batch").is_err());
        assert!(parse_dim("batch=-1").is_err());
        assert!(parse_dim("batch=0").is_err());
        assert!(parse_dim("sequence=0..8").is_err());
        assert!(parse_input_shape("x=1x0x3").is_err());
        assert_eq!(
            parse_input_shape("x=1x3x224x224"),
            Ok(("x".into(), vec![1, 3, 224, 224]))
        );
        assert!(parse_input_shape("x=1xqx3").is_err());
        assert_eq!(
            parse_input_value("ids=1, 2,3"),
            Ok(("ids".into(), "1,2,3".into()))
        );
        assert!(parse_input_value("sr=").is_err());
    }
}
