//! Command-line entry point: everything is in [`onnx_memplan::cli::main`].

/// The binary's allocator: the split search makes and drops many small structures per trial,
/// where mimalloc is markedly faster than the system allocator (measured in `cargo bench
/// --bench split`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = onnx_memplan::cli::main(std::env::args_os());
    std::process::exit(code);
}
