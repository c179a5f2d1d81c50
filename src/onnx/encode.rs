//! Encoding a model into a file.

use std::fs::File;
use std::io::{self, Write};

use prost::Message;

use super::proto::ModelProto;

/// Writes the protobuf encoding of `model` to `file`.
pub fn write_model(model: &ModelProto, file: &mut File) -> io::Result<()> {
    file.write_all(&model.encode_to_vec())
}
