//! A DynamicQuantizeLinear in a row chain: its scale and zero point come from the minimum and
//! maximum of its WHOLE input, so no block can compute them alone. The rewrite computes them
//! once, before the blocks, from the whole input with ReduceMin, ReduceMax and the arithmetic
//! of the operator (as onnxruntime's kernel does it), under the original output names; each
//! block then quantizes its own rows with QuantizeLinear by them. The same arithmetic on the
//! same values, so the blocks' rows are the bytes the whole operator makes.
//!
//! With `x_min`, `x_max` the input's extremes, `lo = min(x_min, 0)`, `hi = max(x_max, 0)`:
//! `scale = (hi − lo) / 255`, or 1 when `hi = lo` (an all-zero input: onnxruntime's rule, where
//! the formula would divide by zero), and `zero_point = round_half_even(clamp(0 − lo / scale,
//! 0, 255))` as uint8.

use super::super::glue::{Glue, int_attribute, op};
use crate::ir::DType;
use crate::onnx::proto::{NodeProto, TensorProto};

/// Adds to `e` the nodes computing a DynamicQuantizeLinear's scale and zero point from the
/// whole of `x`, writing them to `scale` and `zero_point`; `base` prefixes the new names.
pub fn scale_and_zero_point(e: &mut Glue, x: &str, [scale, zero_point]: [&str; 2], base: &str) {
    let mut steps = Steps { e, base };
    let reduce = |s: &mut Steps, op_type: &str| {
        let keepdims = vec![int_attribute("keepdims", 0)];
        s.e.add((s.base, op_type), op_type, vec![x.to_string()], keepdims)
    };
    let x_min = reduce(&mut steps, "ReduceMin");
    let x_max = reduce(&mut steps, "ReduceMax");
    steps.arithmetic([&x_min, &x_max], [scale, zero_point]);
}

/// Adds to `e` the nodes computing a DynamicQuantizeLinear's scale and zero point from the
/// minimum and maximum of its input (`[x_min, x_max]`, scalars, which a first pass folds from
/// its blocks'). Writes them to `scale` and `zero_point`; `base` prefixes the new names.
pub fn from_extremes(
    e: &mut Glue,
    [x_min, x_max]: [String; 2],
    [scale, zero_point]: [&str; 2],
    base: &str,
) {
    Steps { e, base }.arithmetic([&x_min, &x_max], [scale, zero_point]);
}

/// Adds nodes with fresh names under one base.
struct Steps<'a> {
    e: &'a mut Glue,
    base: &'a str,
}

impl Steps<'_> {
    /// The scale and zero point from the input's extremes, written to `scale` and
    /// `zero_point` (onnxruntime's arithmetic, above).
    fn arithmetic(&mut self, [x_min, x_max]: [&str; 2], [scale, zero_point]: [&str; 2]) {
        let zero = self.float(0.0);
        let one = self.float(1.0);
        let top = self.float(255.0);
        let lo = self.add("Min", [x_min, &zero]);
        let hi = self.add("Max", [x_max, &zero]);
        let range = self.add("Sub", [&hi, &lo]);
        let ratio = self.add("Div", [&range, &top]);
        let flat = self.add("Equal", [&hi, &lo]);
        self.add_to("Where", &[&flat, &one, &ratio], scale);
        let shift = self.add("Div", [&lo, scale]);
        let initial = self.add("Sub", [&zero, &shift]);
        let below = self.add("Min", [&initial, &top]);
        let clamped = self.add("Max", [&below, &zero]);
        let rounded = self.add("Round", [&clamped]);
        let mut cast = self.node("Cast", vec![rounded]);
        cast.attribute
            .push(int_attribute("to", i64::from(DType::Uint8.to_onnx())));
        cast.output = vec![zero_point.to_string()];
        self.push(cast);
    }

    /// A float32 scalar initializer holding `value`.
    fn float(&mut self, value: f32) -> String {
        let name = self.e.fresh(self.base, &format!("const_{value}"));
        self.e.initializers.push(TensorProto {
            name: Some(name.clone()),
            data_type: Some(DType::Float.to_onnx()),
            raw_data: Some(value.to_le_bytes().to_vec().into()),
            ..Default::default()
        });
        name
    }

    /// A node of `op_type` reading `inputs`, with a fresh name and a fresh output name.
    fn node(&mut self, op_type: &str, inputs: Vec<String>) -> NodeProto {
        let out = self.e.fresh(self.base, op_type);
        let name = self.e.names.fresh(&format!("{out}/node"));
        op(op_type, inputs, &out, &name, Vec::new())
    }

    /// Adds `node`; returns its output.
    fn push(&mut self, node: NodeProto) -> String {
        let out = node.output[0].clone();
        self.e.glue.push(node.name().to_string());
        self.e.nodes.push(node);
        out
    }

    /// Adds a node of `op_type` reading `inputs`; returns its output.
    fn add<const N: usize>(&mut self, op_type: &str, inputs: [&str; N]) -> String {
        let inputs = inputs.iter().map(|s| s.to_string()).collect();
        self.e.add((self.base, op_type), op_type, inputs, Vec::new())
    }

    /// Adds a node of `op_type` reading `inputs` and writing `out`.
    fn add_to(&mut self, op_type: &str, inputs: &[&str], out: &str) {
        let mut node = self.node(op_type, inputs.iter().map(|s| s.to_string()).collect());
        node.output = vec![out.to_string()];
        self.push(node);
    }
}
