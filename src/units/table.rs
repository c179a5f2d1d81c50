//! The QDQ node-unit rule table: which operators run with their DequantizeLinear inputs and
//! QuantizeLinear outputs as one integer kernel, one row per operator group. The facts are
//! onnxruntime's QDQ node-group selectors (`qdq_selectors.cc`, `selectors_actions/shared/
//! utils.cc`) at their default settings (8-bit activations; no 16-bit or 4-bit groups):
//!
//! - every DQ of a unit has its output read by the operator alone (not a graph output);
//! - every present output of the operator is read by exactly one node, a QuantizeLinear, and
//!   is not a graph output (Gemm may instead have no Q at all: its float output then leaves
//!   the unit);
//! - the dtypes agree as the row's [`Types`] says.
//!
//! The units stage (`find.rs`) and the verifier each match patterns against this table.

use crate::ir::{DType, Node};

/// Which operator inputs are read from DequantizeLinear nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DqInputs {
    /// Every present input.
    All,
    /// Exactly these input slots, and no other input comes from a DQ.
    Slots(&'static [usize]),
}

/// Whether QuantizeLinear nodes must close the unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QOutputs {
    /// Every output is quantised.
    Required,
    /// Every output is quantised, or none is (the float output leaves the unit).
    Optional,
}

/// The dtype constraint of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Types {
    /// Every DQ input and every Q output has the same 8-bit type.
    Same,
    /// Same, and the Q and DQ share their scale and zero point (the operator only moves
    /// bytes: onnxruntime drops the pair).
    SameParams,
    /// A weighted operator: input 0 and the Q output have the same 8-bit type, the weight
    /// (input 1) is 8-bit and `int8` when input 0 is, a bias (input 2) is `int32`.
    Weighted,
}

/// One operator group.
#[derive(Clone, Copy, Debug)]
pub struct UnitRule {
    /// The group's name (onnxruntime's selector).
    pub group: &'static str,
    /// The operators (default domain).
    pub ops: &'static [&'static str],
    /// The inputs read from DQs.
    pub dq: DqInputs,
    /// The Q outputs.
    pub q: QOutputs,
    /// The dtype constraint.
    pub types: Types,
}

/// The rule table, one row per operator group.
pub const RULES: &[UnitRule] = &[
    UnitRule {
        group: "drop-qdq",
        ops: &[
            "Gather",
            "Reshape",
            "Flatten",
            "Transpose",
            "MaxPool",
            "Resize",
            "Squeeze",
            "Unsqueeze",
        ],
        dq: DqInputs::Slots(&[0]),
        q: QOutputs::Required,
        types: Types::SameParams,
    },
    UnitRule {
        group: "unary",
        ops: &[
            "AveragePool",
            "GlobalAveragePool",
            "LeakyRelu",
            "ReduceMean",
            "ReduceMin",
            "ReduceMax",
            "ReduceProd",
            "ReduceSum",
            "Relu",
            "Sigmoid",
            "Slice",
            "Softmax",
            "Sqrt",
            "Tanh",
        ],
        dq: DqInputs::Slots(&[0]),
        q: QOutputs::Required,
        types: Types::Same,
    },
    UnitRule {
        group: "binary",
        ops: &["Add", "Div", "Mul", "Pow", "Sub"],
        dq: DqInputs::Slots(&[0, 1]),
        q: QOutputs::Required,
        types: Types::Same,
    },
    UnitRule {
        group: "variadic",
        ops: &["Concat"],
        dq: DqInputs::All,
        q: QOutputs::Required,
        types: Types::Same,
    },
    UnitRule {
        group: "split",
        ops: &["Split"],
        dq: DqInputs::Slots(&[0]),
        q: QOutputs::Required,
        types: Types::Same,
    },
    UnitRule {
        group: "where",
        ops: &["Where"],
        dq: DqInputs::Slots(&[1, 2]),
        q: QOutputs::Required,
        types: Types::Same,
    },
    UnitRule {
        group: "conv",
        ops: &["Conv", "ConvTranspose"],
        dq: DqInputs::All,
        q: QOutputs::Required,
        types: Types::Weighted,
    },
    UnitRule {
        group: "matmul",
        ops: &["MatMul"],
        dq: DqInputs::Slots(&[0, 1]),
        q: QOutputs::Required,
        types: Types::Weighted,
    },
    UnitRule {
        group: "gemm",
        ops: &["Gemm"],
        dq: DqInputs::All,
        q: QOutputs::Optional,
        types: Types::Weighted,
    },
];

/// The row of a node's operator (default domain only).
pub fn rule_for(node: &Node) -> Option<&'static UnitRule> {
    if !node.domain.is_empty() {
        return None;
    }
    RULES
        .iter()
        .find(|r| r.ops.contains(&node.op_type.as_str()))
}

/// True for a DequantizeLinear (default or `com.microsoft` domain).
pub fn is_dq(node: &Node) -> bool {
    node.op_type == "DequantizeLinear" && quant_domain(&node.domain)
}

/// True for a QuantizeLinear (default or `com.microsoft` domain).
pub fn is_q(node: &Node) -> bool {
    node.op_type == "QuantizeLinear" && quant_domain(&node.domain)
}

fn quant_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "com.microsoft"
}

/// The integer types a unit's activations may have.
pub fn is_activation_type(dtype: DType) -> bool {
    matches!(dtype, DType::Uint8 | DType::Int8)
}

/// Whether the dtypes of a match satisfy `types`: `inputs` are the integer types read by the
/// DQs, by input slot (`None` for a slot not read from a DQ), `outputs` those of the Qs.
pub fn types_agree(types: Types, inputs: &[Option<DType>], outputs: &[DType]) -> bool {
    let present: Vec<DType> = inputs.iter().flatten().copied().collect();
    let Some(&first) = present.first() else {
        return false;
    };
    let outputs_match = outputs.iter().all(|&o| o == first);
    match types {
        Types::Same | Types::SameParams => {
            is_activation_type(first) && present.iter().all(|&d| d == first) && outputs_match
        }
        Types::Weighted => {
            let input = inputs.first().copied().flatten();
            let weight = inputs.get(1).copied().flatten();
            let bias = inputs.get(2).copied().flatten();
            let (Some(input), Some(weight)) = (input, weight) else {
                return false;
            };
            is_activation_type(input)
                && is_activation_type(weight)
                && (input != DType::Int8 || weight == DType::Int8)
                && bias.is_none_or(|b| b == DType::Int32)
                && outputs.iter().all(|&o| o == input)
        }
    }
}

/// Attribute facts of a group: a Gemm with a bias forms a unit only with `beta` = 1.
pub fn attributes_allow(node: &Node) -> bool {
    let has_bias = node.inputs.get(2).is_some_and(Option::is_some);
    node.op_type != "Gemm" || !has_bias || node.attr_float("beta").is_none_or(|b| b == 1.0)
}
