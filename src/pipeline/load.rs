//! Loading: decode, lower to the IR and infer types.

use std::path::Path;

use anyhow::Result;
use bytes::Bytes;

use super::prefix;
use crate::infer::{InferOptions, InferReport, infer_model};
use crate::ir::Model;
use crate::onnx::{decode_model, load_model, proto::ModelProto};

/// Loads, lowers and infers a model.
pub fn load_typed(path: &Path, infer: &InferOptions) -> Result<(ModelProto, Model, InferReport)> {
    type_model(path, load_model(path)?, infer)
}

/// Decodes, lowers and infers the bytes of the model at `path` (see [`plan_model_bytes`]).
pub fn load_typed_bytes(
    path: &Path,
    bytes: Bytes,
    infer: &InferOptions,
) -> Result<(ModelProto, Model, InferReport)> {
    type_model(path, decode_model(path, bytes)?, infer)
}

/// Lowers and infers a decoded model (`path` names it in messages).
pub(crate) fn type_model(
    path: &Path,
    proto: ModelProto,
    infer: &InferOptions,
) -> Result<(ModelProto, Model, InferReport)> {
    let mut model =
        Model::from_proto_sharing(&proto, infer.decoded.as_deref()).map_err(|e| prefix(path, e))?;
    let report = infer_model(&mut model, infer).map_err(|e| prefix(path, e))?;
    Ok((proto, model, report))
}

/// The options typing every data-dependent count at its proven bound, knowing no more of
/// any value's contents than `symbolic` (the report of the typing with the counts as symbols).
pub(crate) fn at_bound(infer: &InferOptions, symbolic: &InferReport) -> InferOptions {
    InferOptions {
        data_dependent_at_bound: true,
        count_dependent: symbolic.contents_unknown.clone(),
        ..infer.clone()
    }
}
