//! A bit-exact port of Go's `math/rand` (the v1 package) generator.
//!
//! Upstream Karpenter's scheduling benchmark draws its pods from
//! `rand.New(rand.NewSource(42))`. To reproduce the same pod sequence we need the same
//! stream of numbers, so this module re-implements, from the behaviour documented by Go,
//! the pieces the benchmark (and upstream tests that shuffle catalogs) use:
//!
//! * the source: an additive lagged Fibonacci generator (Mitchell and Reeds) with a
//!   register of [`RNG_LEN`] = 607 words and a tap distance of [`RNG_TAP`] = 273, every step
//!   computing `vec[feed] = vec[feed] + vec[tap]` (wrapping, 64 bit) after moving both
//!   indices one slot down;
//! * seeding ([`GoRand::new`]): the seed is reduced modulo 2^31 − 1 (a negative remainder
//!   gets 2^31 − 1 added, and 0 becomes 89 482 311), then a Lehmer generator
//!   `x ← 48271·x mod (2^31 − 1)` is stepped 20 times to warm up and three times per
//!   register word: `(x₁ << 40) ^ (x₂ << 20) ^ x₃`, XORed with the fixed seeding table
//!   [`RNG_COOKED`] (607 numbers; Go documents it as the register of a reference run of the
//!   same generator after 7.8·10¹² steps);
//! * the derived draws of Go's `*rand.Rand`: `Int63`, `Uint32`, `Int31`, `Int63n`, `Int31n`,
//!   `Intn`, `Float64`, `Perm` and `Shuffle`, with Go's exact rejection rules (so each call
//!   consumes exactly as many source steps as Go's does).
//!
//! The seeding table was recovered from Go's public API (the first 607 `Uint64` outputs of a
//! seeded source determine its initial register, and XORing out the seed-dependent part
//! leaves the table; several seeds gave the same table) and the unit tests compare this port
//! against vectors printed by a Go program for seeds 42, 1, 0 and −5.

use std::fmt;

mod cooked;

pub use self::cooked::RNG_COOKED;

/// Number of 64-bit words in the generator's feedback register (Go's `rngLen`).
pub const RNG_LEN: usize = 607;

/// Distance between the feed and the tap index (Go's `rngTap`).
pub const RNG_TAP: usize = 273;

/// 2^31 − 1: modulus of the seeding Lehmer generator and Go's `int32max`.
const INT32_MAX: i64 = (1 << 31) - 1;

/// Seed used by Go when the reduced seed is zero.
const ZERO_SEED_REPLACEMENT: i64 = 89_482_311;

/// Mask keeping the low 63 bits (Go's `rngMask`).
const RNG_MASK: u64 = (1 << 63) - 1;

/// One step of the seeding Lehmer generator: `48271·x mod (2^31 − 1)`.
///
/// Go evaluates this with Schrage's method in 32-bit arithmetic; for every `x` in
/// `[0, 2^31 − 1)` that equals the plain modular product computed here in 64 bits.
fn seed_step(x: i64) -> i64 {
    (x * 48_271) % INT32_MAX
}

/// A deterministic generator producing exactly the numbers of Go's
/// `rand.New(rand.NewSource(seed))` (package `math/rand`, v1).
#[derive(Clone, PartialEq, Eq)]
pub struct GoRand {
    /// Index of the tap word (Go's `tap`).
    tap: usize,
    /// Index of the feed word, the one overwritten at each step (Go's `feed`).
    feed: usize,
    /// The feedback register (Go's `vec`), as raw two's-complement words.
    vec: [u64; RNG_LEN],
}

impl fmt::Debug for GoRand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoRand")
            .field("tap", &self.tap)
            .field("feed", &self.feed)
            .finish_non_exhaustive()
    }
}

impl GoRand {
    /// Creates a generator equivalent to Go's `rand.New(rand.NewSource(seed))`.
    ///
    /// Every `i64` is accepted: like Go, the seed is first reduced modulo 2^31 − 1, so seeds
    /// congruent modulo 2^31 − 1 give the same stream (and 0, 2^31 − 1 and 89 482 311 all give
    /// the same stream).
    #[must_use]
    pub fn new(seed: i64) -> Self {
        let mut seed = seed % INT32_MAX;
        if seed < 0 {
            seed += INT32_MAX;
        }
        if seed == 0 {
            seed = ZERO_SEED_REPLACEMENT;
        }
        let mut vec = [0u64; RNG_LEN];
        let mut x = seed;
        for _ in 0..20 {
            x = seed_step(x);
        }
        for (word, cooked) in vec.iter_mut().zip(RNG_COOKED) {
            x = seed_step(x);
            let mut u = x << 40;
            x = seed_step(x);
            u ^= x << 20;
            x = seed_step(x);
            u ^= x;
            *word = (u ^ cooked) as u64;
        }
        Self {
            tap: 0,
            feed: RNG_LEN - RNG_TAP,
            vec,
        }
    }

    /// One step of the source: a full 64-bit word (Go's `Uint64`, which `*rand.Rand`
    /// forwards to the source unchanged).
    pub fn uint64(&mut self) -> u64 {
        self.tap = self.tap.checked_sub(1).unwrap_or(RNG_LEN - 1);
        self.feed = self.feed.checked_sub(1).unwrap_or(RNG_LEN - 1);
        // Both indices stay in 0..RNG_LEN by construction, so `get` never misses; the
        // fallbacks only keep the code free of indexing panics.
        let fed = self.vec.get(self.feed).copied().unwrap_or_default();
        let tapped = self.vec.get(self.tap).copied().unwrap_or_default();
        let x = fed.wrapping_add(tapped);
        if let Some(slot) = self.vec.get_mut(self.feed) {
            *slot = x;
        }
        x
    }

    /// A non-negative 63-bit integer (Go's `Int63`): one source step with the top bit cleared.
    pub fn int63(&mut self) -> i64 {
        // The mask clears bit 63, so the value fits in an i64.
        (self.uint64() & RNG_MASK) as i64
    }

    /// A 32-bit integer (Go's `Uint32`): bits 31..62 of one [`int63`](Self::int63) draw.
    pub fn uint32(&mut self) -> u32 {
        // int63 < 2^63, so the shifted value is < 2^32.
        (self.int63() >> 31) as u32
    }

    /// A non-negative 31-bit integer (Go's `Int31`): the top 31 bits of one
    /// [`int63`](Self::int63) draw.
    pub fn int31(&mut self) -> i32 {
        // int63 < 2^63, so the shifted value is < 2^31.
        (self.int63() >> 32) as i32
    }

    /// A uniform integer in `[0, n)` (Go's `Int63n`).
    ///
    /// A power of two masks one [`int63`](Self::int63) draw; any other `n` rejects draws above
    /// the largest multiple of `n` (minus one) and returns the remainder.
    ///
    /// Go panics when `n <= 0`; this port returns 0 without consuming a draw instead.
    pub fn int63n(&mut self, n: i64) -> i64 {
        if n <= 0 {
            return 0;
        }
        if n & (n - 1) == 0 {
            return self.int63() & (n - 1);
        }
        let n_u = n as u64; // n > 0
        // (1<<63) % n computed in u64, as Go does; the result is < n <= i64::MAX.
        let max = (RNG_MASK - (1u64 << 63) % n_u) as i64;
        let mut v = self.int63();
        while v > max {
            v = self.int63();
        }
        v % n
    }

    /// A uniform integer in `[0, n)` (Go's `Int31n`).
    ///
    /// A power of two masks one [`int31`](Self::int31) draw; any other `n` rejects draws above
    /// `2^31 − 1 − (2^31 mod n)` and returns the remainder.
    ///
    /// Go panics when `n <= 0`; this port returns 0 without consuming a draw instead.
    pub fn int31n(&mut self, n: i32) -> i32 {
        if n <= 0 {
            return 0;
        }
        if n & (n - 1) == 0 {
            return self.int31() & (n - 1);
        }
        let n_u = n as u32; // n > 0
        // The bound is < 2^31, so it fits in an i32.
        let max = (INT32_MAX as u32 - (1u32 << 31) % n_u) as i32;
        let mut v = self.int31();
        while v > max {
            v = self.int31();
        }
        v % n
    }

    /// A uniform integer in `[0, n)` (Go's `Intn` on a 64-bit platform): uses
    /// [`int31n`](Self::int31n) when `n <= 2^31 − 1`, else [`int63n`](Self::int63n).
    ///
    /// Go panics when `n == 0`; this port returns 0 without consuming a draw instead. Go's `int`
    /// cannot exceed `i64::MAX`; larger `n` are treated as `i64::MAX` here.
    pub fn intn(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        match i32::try_from(n) {
            // Results lie in [0, n) and are non-negative, so the conversions are lossless.
            Ok(n31) => self.int31n(n31) as usize,
            Err(_) => self.int63n(i64::try_from(n).unwrap_or(i64::MAX)) as usize,
        }
    }

    /// A float in `[0, 1)` (Go's `Float64`): one [`int63`](Self::int63) draw divided by 2^63,
    /// drawing again in the (rounding-induced) case where the quotient is exactly 1.
    pub fn float64(&mut self) -> f64 {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        loop {
            let f = self.int63() as f64 / TWO_POW_63;
            if f < 1.0 {
                return f;
            }
        }
    }

    /// A pseudo-random permutation of `0..n` (Go's `Perm`): for `i` in `0..n`, draw
    /// `j = intn(i + 1)`, move the value at `j` to `i` and put `i` at `j`.
    ///
    /// Consumes exactly `n` calls of [`intn`](Self::intn) (including `intn(1)`, which still
    /// consumes a draw).
    pub fn perm(&mut self, n: usize) -> Vec<usize> {
        let mut m = vec![0usize; n];
        for i in 0..n {
            let j = self.intn(i + 1);
            // j <= i < n: both indices are in bounds.
            let moved = m.get(j).copied().unwrap_or_default();
            if let Some(slot) = m.get_mut(i) {
                *slot = moved;
            }
            if let Some(slot) = m.get_mut(j) {
                *slot = i;
            }
        }
        m
    }

    /// Go's `Shuffle`: a Fisher–Yates pass from the last index down to 1, calling
    /// `swap(i, j)` with `j` uniform in `[0, i]` (the call is made even when `i == j`).
    ///
    /// Like Go, indices above 2^31 − 2 draw `j` with [`int63n`](Self::int63n) and the rest use
    /// Go's private multiply-and-shift bounded draw on [`uint32`](Self::uint32) (Lemire's
    /// method), which differs from [`int31n`](Self::int31n).
    pub fn shuffle<F: FnMut(usize, usize)>(&mut self, n: usize, mut swap: F) {
        let mut i = n;
        while i > 1 {
            i -= 1;
            let j = self.shuffle_index(i);
            swap(i, j);
        }
    }

    /// Shuffles a slice in place with [`shuffle`](Self::shuffle), as
    /// `rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })` does in Go.
    pub fn shuffle_slice<T>(&mut self, items: &mut [T]) {
        let len = items.len();
        self.shuffle(len, |i, j| items.swap(i, j));
    }

    /// The swap partner drawn by [`shuffle`](Self::shuffle) for index `i` (`i >= 1`).
    fn shuffle_index(&mut self, i: usize) -> usize {
        const LEMIRE_LIMIT: usize = (1 << 31) - 2;
        if i > LEMIRE_LIMIT {
            // i + 1 <= n <= usize::MAX; clamp as in `intn` for sizes Go cannot express.
            let bound = i64::try_from(i).map_or(i64::MAX, |v| v.saturating_add(1));
            self.int63n(bound) as usize
        } else {
            // i + 1 <= 2^31 - 1 here.
            self.bounded_u32((i + 1) as u32) as usize
        }
    }

    /// Go's private `int31n`: a value in `[0, n)` from the high half of
    /// `uint32() · n`, redrawing while the low half falls below `2^32 mod n`
    /// (only checked when the low half is below `n`). Requires `n >= 1`.
    fn bounded_u32(&mut self, n: u32) -> u32 {
        let mut prod = u64::from(self.uint32()) * u64::from(n);
        let mut low = prod as u32;
        if low < n {
            let thresh = n.wrapping_neg() % n;
            while low < thresh {
                prod = u64::from(self.uint32()) * u64::from(n);
                low = prod as u32;
            }
        }
        (prod >> 32) as u32
    }
}

#[cfg(test)]
mod tests;
