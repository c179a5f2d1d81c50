//! Runs shape inference on a one-node model built by hand and reports each output's type as
//! text (`float32 2×3×4`), so tests can state expectations taken from operator specs.
#![allow(dead_code)]

use onnx_memplan::error::is_input_error;
use onnx_memplan::infer::{InferOptions, infer_model};
use onnx_memplan::ir::Model;
use onnx_memplan::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_shape_proto::Dimension,
    tensor_shape_proto::dimension, type_proto,
};

/// ONNX element type codes used by the tests.
pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT8: i32 = 3;
pub const UINT16: i32 = 4;
pub const INT16: i32 = 5;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;
pub const STRING: i32 = 8;
pub const BOOL: i32 = 9;
pub const FLOAT16: i32 = 10;
pub const DOUBLE: i32 = 11;

/// One input slot of the node under test.
pub enum In {
    /// A graph input: name, element type, dims (numbers, symbol names, `?` for unknown).
    T(&'static str, i32, &'static [&'static str]),
    /// An int64 initializer with the given dims and values.
    I64(&'static str, &'static [i64], &'static [i64]),
    /// An int32 initializer with the given dims and values.
    I32(&'static str, &'static [i64], &'static [i32]),
    /// A graph input of any type.
    Typed(&'static str, TypeProto),
    /// An omitted optional input.
    Skip,
}

/// A map type proto from `key` to tensors of `value`.
pub fn map_type(key: i32, value: i32) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::MapType(Box::new(type_proto::Map {
            key_type: Some(key),
            value_type: Some(Box::new(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(value),
                    shape: None,
                })),
                denotation: None,
            })),
        }))),
        denotation: None,
    }
}

/// A tensor type proto.
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

/// An integer attribute.
pub fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(2),
        i: Some(v),
        ..Default::default()
    }
}

/// A float attribute.
pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(1),
        f: Some(v),
        ..Default::default()
    }
}

/// An integer-list attribute.
pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(7),
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A float-list attribute.
pub fn floats(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(6),
        floats: v.to_vec(),
        ..Default::default()
    }
}

/// A string attribute.
pub fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(3),
        s: Some(v.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

/// A string-list attribute.
pub fn strings(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(8),
        strings: v.iter().map(|s| s.as_bytes().to_vec().into()).collect(),
        ..Default::default()
    }
}

/// A node under test.
pub struct Case {
    domain: &'static str,
    op: &'static str,
    inputs: Vec<In>,
    outputs: usize,
    attrs: Vec<AttributeProto>,
    opset: i64,
}

/// A node of operator `op` in `domain` (default-domain opset 17).
pub fn node(domain: &'static str, op: &'static str) -> Case {
    Case {
        domain,
        op,
        inputs: Vec::new(),
        outputs: 1,
        attrs: Vec::new(),
        opset: 17,
    }
}

impl Case {
    /// Sets the inputs.
    pub fn inputs(mut self, inputs: Vec<In>) -> Self {
        self.inputs = inputs;
        self
    }

    /// Sets the number of outputs (default 1).
    pub fn outputs(mut self, n: usize) -> Self {
        self.outputs = n;
        self
    }

    /// Adds an attribute.
    pub fn attr(mut self, a: AttributeProto) -> Self {
        self.attrs.push(a);
        self
    }

    /// Sets the default domain's opset.
    pub fn opset(mut self, v: i64) -> Self {
        self.opset = v;
        self
    }

    fn model(&self) -> ModelProto {
        let mut graph = GraphProto::default();
        let mut names = Vec::new();
        for input in &self.inputs {
            match input {
                In::T(name, elem, dims) => {
                    graph.input.push(ValueInfoProto {
                        name: Some(name.to_string()),
                        r#type: Some(tensor_type(*elem, dims)),
                        ..Default::default()
                    });
                    names.push(name.to_string());
                }
                In::I64(name, dims, values) => {
                    graph.initializer.push(TensorProto {
                        name: Some(name.to_string()),
                        dims: dims.to_vec(),
                        data_type: Some(INT64),
                        int64_data: values.to_vec(),
                        ..Default::default()
                    });
                    names.push(name.to_string());
                }
                In::I32(name, dims, values) => {
                    graph.initializer.push(TensorProto {
                        name: Some(name.to_string()),
                        dims: dims.to_vec(),
                        data_type: Some(INT32),
                        int32_data: values.to_vec(),
                        ..Default::default()
                    });
                    names.push(name.to_string());
                }
                In::Typed(name, ty) => {
                    graph.input.push(ValueInfoProto {
                        name: Some(name.to_string()),
                        r#type: Some(ty.clone()),
                        ..Default::default()
                    });
                    names.push(name.to_string());
                }
                In::Skip => names.push(String::new()),
            }
        }
        let outputs: Vec<String> = (0..self.outputs).map(|i| format!("out{i}")).collect();
        for o in &outputs {
            graph.output.push(ValueInfoProto {
                name: Some(o.clone()),
                ..Default::default()
            });
        }
        graph.node.push(NodeProto {
            op_type: Some(self.op.into()),
            domain: Some(self.domain.into()),
            input: names,
            output: outputs,
            attribute: self.attrs.clone(),
            ..Default::default()
        });
        let mut opset_import = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(self.opset),
        }];
        if !self.domain.is_empty() {
            opset_import.push(OperatorSetIdProto {
                domain: Some(self.domain.into()),
                version: Some(1),
            });
        }
        ModelProto {
            ir_version: Some(10),
            opset_import,
            graph: Some(graph),
            ..Default::default()
        }
    }

    /// Infers the node and returns its outputs' types as text, or the error message.
    pub fn run(&self) -> Result<Vec<String>, String> {
        let mut model = Model::from_proto(&self.model()).map_err(|e| format!("{e:#}"))?;
        infer_model(&mut model, &InferOptions::default()).map_err(|e| {
            let kind = if is_input_error(&e) {
                "input error"
            } else {
                "bug"
            };
            format!("{kind}: {e:#}")
        })?;
        let g = &model.graph;
        Ok(g.outputs
            .iter()
            .map(|&o| {
                g.values[o]
                    .ty
                    .as_ref()
                    .map_or("-".into(), |t| t.to_string())
            })
            .collect())
    }

    /// Asserts the outputs' types.
    #[track_caller]
    pub fn expect(&self, expected: &[&str]) {
        assert_eq!(self.run().unwrap(), expected, "{} outputs", self.op);
    }

    /// Asserts that inference fails with an input error mentioning `text`.
    #[track_caller]
    pub fn rejects(&self, text: &str) {
        let err = self.run().expect_err("inference should fail");
        assert!(err.starts_with("input error"), "not an input error: {err}");
        assert!(
            err.contains(text),
            "error '{err}' does not mention '{text}'"
        );
    }
}
