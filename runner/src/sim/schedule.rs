//! When each chunk of one response is due, as offsets from the moment its generation starts.
//!
//! Offsets are absolute (chunk k is due at ttft + k·gap), never "gap after the previous write",
//! so a late wake-up delays one chunk and not every chunk after it. Jitter draws each gap from
//! ±jitter·gap around its nominal length with a generator seeded per request number, so a run
//! can be repeated exactly. This file knows nothing of HTTP, clocks or the record.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// One chunk still to send: its position, how many tokens it carries and when it is due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannedChunk {
    pub index: u32,
    pub tokens: u32,
    /// Offset from the start of generation.
    pub due: Duration,
}

/// The chunks of one response, produced lazily so a long completion takes no memory up front.
#[derive(Clone, Debug)]
pub struct TokenSchedule {
    remaining: u32,
    tokens_per_chunk: u32,
    next_index: u32,
    ttft_ns: f64,
    gap_ns: f64,
    jitter: f64,
    /// Sum of the jittered gaps so far; without jitter offsets are computed from the index.
    elapsed_ns: f64,
    rng: Xoshiro256PlusPlus,
}

impl TokenSchedule {
    /// The schedule of `tokens` tokens; `request_number` picks this request's jitter draws.
    pub fn new(
        tokens: u32,
        tokens_per_chunk: u32,
        ttft: Duration,
        gap: Duration,
        jitter: f64,
        seed: u64,
        request_number: u64,
    ) -> Self {
        // Spread request numbers over the seed space so neighbouring requests are unrelated.
        let stream = seed ^ request_number.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self {
            remaining: tokens,
            tokens_per_chunk: tokens_per_chunk.max(1),
            next_index: 0,
            ttft_ns: ttft.as_nanos() as f64,
            gap_ns: gap.as_nanos() as f64,
            jitter,
            elapsed_ns: 0.0,
            rng: Xoshiro256PlusPlus::seed_from_u64(stream),
        }
    }

    /// How many chunks `tokens` tokens take.
    pub fn chunk_count(tokens: u32, tokens_per_chunk: u32) -> u32 {
        tokens.div_ceil(tokens_per_chunk.max(1))
    }

    fn factor(&mut self) -> f64 {
        if self.jitter == 0.0 {
            1.0
        } else {
            1.0 + self.rng.random_range(-self.jitter..=self.jitter)
        }
    }
}

impl Iterator for TokenSchedule {
    type Item = PlannedChunk;

    fn next(&mut self) -> Option<PlannedChunk> {
        if self.remaining == 0 {
            return None;
        }
        let index = self.next_index;
        let step = if index == 0 {
            self.ttft_ns
        } else {
            self.gap_ns
        };
        let due_ns = if self.jitter == 0.0 {
            self.ttft_ns + f64::from(index) * self.gap_ns
        } else {
            self.elapsed_ns += step * self.factor();
            self.elapsed_ns
        };
        let tokens = self.remaining.min(self.tokens_per_chunk);
        self.remaining -= tokens;
        self.next_index += 1;
        Some(PlannedChunk {
            index,
            tokens,
            due: Duration::from_nanos(due_ns.round() as u64),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = Self::chunk_count(self.remaining, self.tokens_per_chunk) as usize;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use test_case::test_case;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test_case(10, 4, &[4, 4, 2] ; "remainder in the last chunk")]
    #[test_case(8, 4, &[4, 4] ; "exact multiple")]
    #[test_case(1, 4, &[1] ; "fewer tokens than a chunk")]
    #[test_case(3, 1, &[1, 1, 1] ; "one token per chunk")]
    fn chunks_carry_tokens_per_chunk(tokens: u32, per_chunk: u32, expected: &[u32]) {
        let got: Vec<u32> = TokenSchedule::new(tokens, per_chunk, ms(50), ms(10), 0.0, 0, 0)
            .map(|c| c.tokens)
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn offsets_are_absolute_without_jitter() {
        let dues: Vec<Duration> =
            TokenSchedule::new(4, 1, ms(50), Duration::from_nanos(11_111_111), 0.0, 0, 0)
                .map(|c| c.due)
                .collect();
        assert_eq!(
            dues,
            [50_000_000, 61_111_111, 72_222_222, 83_333_333].map(Duration::from_nanos)
        );
    }

    #[test]
    fn the_same_seed_and_request_repeat_and_others_differ() {
        let dues = |seed, request| -> Vec<Duration> {
            TokenSchedule::new(20, 1, ms(50), ms(10), 0.2, seed, request)
                .map(|c| c.due)
                .collect()
        };
        assert_eq!(dues(7, 3), dues(7, 3));
        assert_ne!(dues(7, 3), dues(7, 4));
        assert_ne!(dues(7, 3), dues(8, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn every_token_is_sent_once_in_order(
            tokens in 1u32..2000,
            per_chunk in 1u32..16,
            ttft_us in 0u64..200_000,
            gap_us in 1u64..100_000,
            jitter in 0.0f64..0.99,
            seed: u64,
            request: u64,
        ) {
            let gap = Duration::from_micros(gap_us);
            let chunks: Vec<PlannedChunk> = TokenSchedule::new(
                tokens, per_chunk, Duration::from_micros(ttft_us), gap, jitter, seed, request,
            ).collect();
            prop_assert_eq!(chunks.len() as u32, TokenSchedule::chunk_count(tokens, per_chunk));
            prop_assert_eq!(chunks.iter().map(|c| c.tokens).sum::<u32>(), tokens);
            prop_assert!(chunks.iter().all(|c| c.tokens >= 1 && c.tokens <= per_chunk));
            for (i, pair) in chunks.windows(2).enumerate() {
                prop_assert_eq!(pair[0].index as usize, i);
                let between = pair[1].due.saturating_sub(pair[0].due).as_nanos() as f64;
                let nominal = gap.as_nanos() as f64;
                // Each gap stays within its jitter band (plus rounding to whole nanoseconds).
                prop_assert!(between >= nominal * (1.0 - jitter) - 2.0);
                prop_assert!(between <= nominal * (1.0 + jitter) + 2.0);
            }
        }
    }
}
