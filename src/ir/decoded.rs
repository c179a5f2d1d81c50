//! Initializers decoded once for many models: a split search types hundreds of rewrites of
//! one model, each holding the input's initializers (their `raw_data` slices the same bytes),
//! and lowering decoded every small integer initializer of each again (an int8 network's
//! weights: 4.7 MB of values per MobileNetV3-Small rewrite, kept by every trial). Shared
//! here by payload, each is decoded once and held once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prost::bytes::Bytes;

use super::Constant;
use crate::onnx::proto::TensorProto;

/// A payload's address and length, its element type and its dimensions: what
/// [`Constant::from_proto`] reads of a tensor with `raw_data`.
type Key = (usize, usize, i32, Vec<i64>);

/// Decoded values by [`Key`], each with the payload it was decoded from.
type Map = HashMap<Key, (Bytes, Option<Arc<Constant>>)>;

/// The decoded initializers, by payload. Each entry holds its payload, so no other payload
/// takes its address while the entry stands.
#[derive(Default)]
pub struct Decoded(Mutex<Map>);

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decoded")
    }
}

impl Decoded {
    /// [`Constant::from_proto`] of `tensor`, decoded before when another tensor had the same
    /// payload, type and dimensions. Tensors without `raw_data` (values in typed fields, in
    /// external files, strings) are decoded each time.
    pub fn decode(&self, tensor: &TensorProto) -> Result<Option<Arc<Constant>>, String> {
        let strings = super::DType::from_onnx(tensor.data_type()) == Some(super::DType::String);
        let raw = match &tensor.raw_data {
            Some(raw) if tensor.external_data.is_empty() && !strings => raw,
            _ => return Ok(Constant::from_proto(tensor)?.map(Arc::new)),
        };
        let key = (
            raw.as_ptr() as usize,
            raw.len(),
            tensor.data_type(),
            tensor.dims.clone(),
        );
        if let Some((_, constant)) = self.lock().get(&key) {
            return Ok(constant.clone());
        }
        let constant = Constant::from_proto(tensor)?.map(Arc::new);
        self.lock().insert(key, (raw.clone(), constant.clone()));
        Ok(constant)
    }

    /// The map, whatever a panicking holder left (an entry is whole or absent).
    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tensors slicing one payload decode once, to the values worked by hand; the same
    /// bytes at other dimensions, or another payload, decode apart.
    #[test]
    fn tensors_sharing_a_payload_share_their_values() {
        let bytes = Bytes::from_static(&[1, 255, 7, 128]);
        let int8 = |raw: Bytes, dims: Vec<i64>| TensorProto {
            dims,
            data_type: Some(3),
            raw_data: Some(raw),
            ..Default::default()
        };
        let decoded = Decoded::default();
        let first = decoded.decode(&int8(bytes.clone(), vec![4])).unwrap().unwrap();
        let again = decoded.decode(&int8(bytes.clone(), vec![4])).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first.to_i64_vec(), Some(vec![1, -1, 7, -128]));
        let square = decoded.decode(&int8(bytes.clone(), vec![2, 2])).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &square));
        let copy = Bytes::copy_from_slice(&bytes);
        let other = decoded.decode(&int8(copy, vec![4])).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other.to_i64_vec(), first.to_i64_vec());
    }
}
