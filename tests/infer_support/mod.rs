//! Builds small ONNX models with the prost types and runs inference on them.
#![allow(dead_code)]

pub mod transformer;

use onnx_memplan::infer::{InferOptions, InferReport, infer_model};
use onnx_memplan::ir::{Model, format_shape};
use onnx_memplan::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_shape_proto::Dimension,
    tensor_shape_proto::dimension, type_proto,
};

/// Element type codes.
pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;
pub const BOOL: i32 = 9;

/// A graph under construction.
#[derive(Default)]
pub struct G {
    pub graph: GraphProto,
}

/// A tensor type; dims are numbers or symbol names, `?` for unknown.
pub fn tensor_type(elem: i32, dims: &[&str]) -> TypeProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: match d.parse::<i64>() {
                Ok(v) => Some(dimension::Value::DimValue(v)),
                Err(_) if *d == "?" => None,
                Err(_) => Some(dimension::Value::DimParam(d.to_string())),
            },
            denotation: None,
        })
        .collect();
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem),
            shape: Some(TensorShapeProto { dim }),
        })),
        denotation: None,
    }
}

pub fn info(name: &str, ty: Option<TypeProto>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: ty,
        ..Default::default()
    }
}

impl G {
    pub fn input(mut self, name: &str, elem: i32, dims: &[&str]) -> Self {
        self.graph
            .input
            .push(info(name, Some(tensor_type(elem, dims))));
        self
    }

    pub fn output(mut self, name: &str) -> Self {
        self.graph.output.push(info(name, None));
        self
    }

    pub fn declared_output(mut self, name: &str, elem: i32, dims: &[&str]) -> Self {
        self.graph
            .output
            .push(info(name, Some(tensor_type(elem, dims))));
        self
    }

    pub fn ints(mut self, name: &str, dims: &[i64], values: &[i64]) -> Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(INT64),
            int64_data: values.to_vec(),
            ..Default::default()
        });
        self
    }

    pub fn floats(mut self, name: &str, dims: &[i64]) -> Self {
        let n: i64 = dims.iter().product();
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            dims: dims.to_vec(),
            data_type: Some(FLOAT),
            float_data: vec![0.5; n as usize],
            ..Default::default()
        });
        self
    }

    pub fn node(
        mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.graph.node.push(node(op, inputs, outputs, attrs));
        self
    }

    /// The model with one default-domain opset import.
    pub fn model(self, opset: i64) -> ModelProto {
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(opset),
            }],
            graph: Some(self.graph),
            ..Default::default()
        }
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        name: Some(format!("{op}_{}", outputs.first().copied().unwrap_or(""))),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn attr(name: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

pub fn a_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        r#type: Some(2),
        ..attr(name)
    }
}

pub fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        r#type: Some(7),
        ..attr(name)
    }
}

pub fn a_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(bytes::Bytes::from(v.to_string())),
        r#type: Some(3),
        ..attr(name)
    }
}

pub fn a_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        g: Some(Box::new(g)),
        r#type: Some(5),
        ..attr(name)
    }
}

/// Lowers and infers with the given options.
pub fn infer_with(
    proto: &ModelProto,
    options: &InferOptions,
) -> anyhow::Result<(Model, InferReport)> {
    let mut model = Model::from_proto(proto)?;
    let report = infer_model(&mut model, options)?;
    Ok((model, report))
}

/// Lowers and infers with default options, panicking on errors.
pub fn infer(proto: &ModelProto) -> Model {
    infer_with(proto, &InferOptions::default())
        .expect("inference succeeds")
        .0
}

/// `dtype shape` of a value, e.g. `float32 1×64×112×112`.
pub fn ty(model: &Model, name: &str) -> String {
    let value = model
        .graph
        .value(name)
        .unwrap_or_else(|| panic!("no value {name}"));
    match value.ty.as_ref() {
        Some(t) => t.to_string(),
        None => "untyped".into(),
    }
}

/// Just the shape of a tensor value, e.g. `1×64×112×112`.
pub fn shape(model: &Model, name: &str) -> String {
    let t = model
        .graph
        .value(name)
        .and_then(|v| v.tensor_type())
        .unwrap_or_else(|| panic!("{name} is not a typed tensor"));
    t.shape
        .as_deref()
        .map_or("unknown rank".into(), format_shape)
}

/// The folded value of a value, as integers.
pub fn value(model: &Model, name: &str) -> Option<Vec<i64>> {
    model.graph.value(name)?.constant.as_ref()?.to_i64_vec()
}
