//! Compiles `proto/onnx.proto` with protox (a pure-Rust protobuf compiler), so building needs no
//! system `protoc`. Byte fields become `bytes::Bytes` so tensor payloads are sliced, not copied.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["proto/onnx.proto"], ["proto"])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
