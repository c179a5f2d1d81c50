//! Compiles `proto/onnx.proto` with protox (a pure-Rust protobuf compiler), so building needs no
//! system `protoc`. Byte fields become `bytes::Bytes` so tensor payloads are sliced, not copied.
//! An attribute's single tensor, graph, sparse tensor and type are boxed: inline, they made
//! every `AttributeProto` about two kilobytes, which each node's attributes (a Conv has five)
//! carried and copied whatever their kind, in the model and in every split trial's typed copy.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["proto/onnx.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .boxed(".onnx.AttributeProto.t")
        .boxed(".onnx.AttributeProto.g")
        .boxed(".onnx.AttributeProto.sparse_tensor")
        .boxed(".onnx.AttributeProto.tp")
        .compile_fds(descriptors)?;
    Ok(())
}
