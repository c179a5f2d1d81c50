//! Command-line entry point: everything is in [`onnx_memplan::cli::main`].

/// The binary's allocator: the split search makes and drops many small structures per trial,
/// where mimalloc is markedly faster than the system allocator (measured in `cargo bench
/// --bench split`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    huge_pages_off();
    let code = onnx_memplan::cli::main(std::env::args_os());
    std::process::exit(code);
}

/// Turns transparent huge pages off for this process. The split search keeps freeing memory
/// and taking fresh memory again; where the kernel backs it with huge pages it zeroes 2 MiB at
/// each first touch, however little of the page the allocator then uses. On MobileNetV2's
/// split that was a second of system time (1.0 s against 0.4 s without, 4.25 s against 3.80 s
/// wall, mean of 5 runs on 2 cores).
#[cfg(target_os = "linux")]
fn huge_pages_off() {
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of the calling process; its other arguments
    // must be zero. A kernel without it returns an error, which changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Huge pages are left as they are outside Linux.
#[cfg(not(target_os = "linux"))]
fn huge_pages_off() {}
