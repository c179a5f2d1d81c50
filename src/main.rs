//! Command-line entry point: everything is in [`onnx_memplan::cli::main`].

fn main() {
    let code = onnx_memplan::cli::main(std::env::args_os());
    std::process::exit(code);
}
