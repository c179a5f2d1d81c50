//! A model whose image input has symbolic height and width, for the range tests and benches.

use std::path::Path;

use onnx_memplan::onnx::proto::{ModelProto, tensor_shape_proto::dimension, type_proto};
use prost::Message;

/// Writes `model` to a temporary file with its first input's last two dims renamed `H` and `W`
/// and its outputs' shapes left out (they follow from the range).
pub fn symbolic_image(model: &Path) -> tempfile::TempPath {
    let bytes = std::fs::read(model).unwrap();
    let mut proto = ModelProto::decode(bytes.as_slice()).unwrap();
    let graph = proto.graph.as_mut().unwrap();
    let Some(type_proto::Value::TensorType(t)) = graph.input[0]
        .r#type
        .as_mut()
        .and_then(|t| t.value.as_mut())
    else {
        panic!("{}: the first input is not a tensor", model.display());
    };
    let dims = &mut t.shape.as_mut().unwrap().dim;
    let n = dims.len();
    dims[n - 2].value = Some(dimension::Value::DimParam("H".into()));
    dims[n - 1].value = Some(dimension::Value::DimParam("W".into()));
    for out in &mut graph.output {
        if let Some(type_proto::Value::TensorType(t)) =
            out.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.shape = None;
        }
    }
    let file = tempfile::NamedTempFile::with_suffix(".onnx").unwrap();
    std::fs::write(file.path(), proto.encode_to_vec()).unwrap();
    file.into_temp_path()
}
