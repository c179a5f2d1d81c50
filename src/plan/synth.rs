//! Seeded synthetic problems shaped like neural-network inference, for tests and benchmarks.

use super::problem::{Buffer, Problem};
use super::rng::Rng;

/// `n` buffers over about `n` steps, like the activations of a deep network: buffer `i` is
/// produced near step `i`; most live one to three steps, some up to twenty, and a few (skip
/// connections) hundreds; sizes are log-uniform between 64 B and 4 MiB, multiples of 64.
pub fn network_like(n: usize, seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let buffers = (0..n)
        .map(|i| {
            let start = i as u32 + rng.below(2) as u32;
            let roll = rng.below(100);
            let length = match roll {
                0..=74 => 1 + rng.below(3),
                75..=96 => 4 + rng.below(17),
                _ => 50 + rng.below(450),
            } as u32;
            let log_size = 6.0 + rng.unit() * 16.0;
            let size = (2f64.powf(log_size) as u64).div_ceil(64) * 64;
            Buffer {
                size,
                start,
                end: start + length,
            }
        })
        .collect();
    Problem {
        buffers,
        alignment: 64,
    }
}

/// `n` buffers with random sizes in `1..=max_size` and random lifetimes inside `0..steps`
/// (some empty, some of size zero when `max_size` allows); for property tests.
pub fn random(n: usize, steps: u32, max_size: u64, alignment: u64, seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let buffers = (0..n)
        .map(|_| {
            let a = rng.below(u64::from(steps) + 1) as u32;
            let b = rng.below(u64::from(steps) + 1) as u32;
            Buffer {
                size: rng.below(max_size + 1),
                start: a.min(b),
                end: a.max(b),
            }
        })
        .collect();
    Problem { buffers, alignment }
}
