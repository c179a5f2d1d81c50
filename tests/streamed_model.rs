//! The annotated model is written as a stream (large tensor payloads straight from the input's
//! bytes), and must be exactly prost's encoding of the same message (`encode_to_vec`, the
//! independent reference), with the SHA-256 the writer reports equal to the bytes' digest; the
//! file `plan` writes must be those bytes too.

mod common;

use common::{root, run_cli};
use onnx_memplan::onnx::proto::ModelProto;
use onnx_memplan::onnx::{ModelFile, decode_model, open_model_file, write_model};
use onnx_memplan::pipeline::{Options, plan_model};
use prost::Message;
use sha2::{Digest, Sha256};

/// The bytes `write_model` writes into a file, and the digest it reports.
fn written(
    model: &ModelProto,
    source: Option<&ModelFile>,
    hash: bool,
) -> (Vec<u8>, Option<[u8; 32]>) {
    let mut file = tempfile::tempfile().unwrap();
    let digest = write_model(model, &mut file, source, hash).unwrap();
    std::io::Seek::rewind(&mut file).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).unwrap();
    (bytes, digest)
}

#[test]
fn streamed_models_equal_prost_encoding_and_their_digest() {
    for name in ["mobilenet_v2", "vit_tiny", "unet_small"] {
        let path = root().join("models").join(format!("{name}.onnx"));
        let planned = plan_model(&path, &Options::default()).unwrap();
        let annotated = planned.annotated("t.memplan.json");
        let reference = annotated.encode_to_vec();
        let (streamed, digest) = written(&annotated, None, true);
        assert!(streamed == reference, "{name}: streamed bytes differ");
        assert_eq!(digest, Some(Sha256::digest(&reference).into()), "{name}");
        // The input model decoded from its file, with every payload copied from that file.
        let input = open_model_file(&path).unwrap();
        let decoded = decode_model(&path, input.bytes.clone()).unwrap();
        let (again, digest) = written(&decoded, Some(&input), false);
        assert_eq!(digest, None);
        assert!(
            again == decoded.encode_to_vec(),
            "{name}: input re-encoding differs"
        );
    }
}

#[test]
fn plan_writes_the_encoded_annotated_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = root().join("models/mobilenet_v2.onnx");
    let out = dir.path().join("m.memplan.onnx");
    let run = run_cli(&[
        "plan",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(run.status.success(), "{run:?}");
    let planned = plan_model(&path, &Options::default()).unwrap();
    let reference = planned.annotated("m.memplan.json").encode_to_vec();
    assert!(std::fs::read(&out).unwrap() == reference);
}
