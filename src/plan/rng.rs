//! A tiny seeded pseudo-random generator (SplitMix64): deterministic, fast, no dependency.

/// SplitMix64's finaliser: a well-mixed 64-bit function of one value (also used for hashing).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64 (Steele, Lea and Flood 2014): a 64-bit state advanced by a constant and mixed.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence depends only on `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// A uniform integer in `[0, n)`; `n` must be positive.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the bias is below 2^-32 for the sizes used here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform index into a slice of length `n` (which must be positive).
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// A uniform float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
