//! SGLang's own sizing rules, as SGLang 0.5.23 applies them (docs/memory.md):
//!
//! - the default `--mem-fraction-static`, derived from the GPU's size, the chunked-prefill size,
//!   the CUDA-graph batch sizes and the parallel sizes
//!   (`sglang/srt/arg_groups/memory_hook.py`, `handle_gpu_memory_settings` and
//!   `reserve_for_graph_mb`; the prefill capture sizes of `cuda_graph_hook.py`,
//!   `generate_prefill_cuda_graph_batch_sizes`);
//! - the KV pool's cell, the bytes of one token on one GPU
//!   (`model_executor/pool_configurator.py`; KV heads per GPU `max(1, heads // tp)`,
//!   `configs/model_config.py` `get_num_kv_heads`), with the EAGLE draft's share.
//!
//! `runner/tests/memory_oracle.rs` runs SGLang's own functions over a table of GPUs and models
//! and holds these to them.

use super::model::ModelShape;
use super::words::{list, number, value};

/// The flags SGLang's default fraction is derived from, read from its command line.
#[derive(Clone, Debug, PartialEq)]
pub struct SglangSizing {
    /// `--pp-size` / `--pipeline-parallel-size`.
    pub pp: u64,
    /// `--chunked-prefill-size` (`-1` turns chunking off).
    pub chunked_prefill: Option<i64>,
    /// `--max-prefill-tokens` (SGLang's default 16384), the activation size without chunking.
    pub max_prefill_tokens: Option<u64>,
    pub decode_max_bs: Option<u64>,
    pub decode_bs: Option<Vec<u64>>,
    pub prefill_max_bs: Option<u64>,
    pub prefill_bs: Option<Vec<u64>>,
    /// Decode CUDA graphs captured (`--cuda-graph-backend-decode disabled`,
    /// `--disable-cuda-graph` turn them off).
    pub decode_graphs: bool,
    /// Prefill (breakable) CUDA graphs captured, SGLang's default on CUDA.
    pub prefill_graphs: bool,
    pub max_running_requests: Option<u64>,
    /// `--speculative-algorithm` (EAGLE, EAGLE3, STANDALONE size the draft into the cell).
    pub speculative_algorithm: Option<String>,
    /// Flags with which SGLang reserves more than this derivation does (DP attention, DeepEP,
    /// disaggregation, a JSON `--cuda-graph-config`): the derived fraction is then an upper
    /// bound, and said to be.
    pub beyond: Vec<String>,
}

/// SGLang's defaults: no flag given, CUDA graphs for both phases.
impl Default for SglangSizing {
    fn default() -> Self {
        Self {
            pp: 1,
            chunked_prefill: None,
            max_prefill_tokens: None,
            decode_max_bs: None,
            decode_bs: None,
            prefill_max_bs: None,
            prefill_bs: None,
            decode_graphs: true,
            prefill_graphs: true,
            max_running_requests: None,
            speculative_algorithm: None,
            beyond: Vec::new(),
        }
    }
}

/// SGLang's `--max-prefill-tokens` default.
const MAX_PREFILL_TOKENS: u64 = 16384;

impl SglangSizing {
    /// The sizing flags of an SGLang command line; `Err` for a value that is not a number.
    pub fn parse(words: &[String]) -> Result<Self, String> {
        let has = |flag: &str| {
            words
                .iter()
                .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
        };
        let disabled = |flag: &str| value(words, &[flag]) == Some("disabled");
        let all_off = has("--disable-cuda-graph");
        let beyond = [
            "--enable-dp-attention",
            "--attn-dp-size",
            "--attention-data-parallel-size",
            "--moe-a2a-backend",
            "--disaggregation-mode",
            "--cuda-graph-config",
            "--enable-kv-cache-sharding",
        ]
        .into_iter()
        .filter(|f| has(f))
        .map(String::from)
        .collect();
        Ok(Self {
            pp: number(words, &["--pp-size", "--pipeline-parallel-size"])?.unwrap_or(1),
            chunked_prefill: number(words, &["--chunked-prefill-size"])?,
            max_prefill_tokens: number(words, &["--max-prefill-tokens"])?,
            decode_max_bs: number(words, &["--cuda-graph-max-bs-decode"])?,
            decode_bs: list(words, "--cuda-graph-bs-decode")?,
            prefill_max_bs: number(words, &["--cuda-graph-max-bs-prefill"])?,
            prefill_bs: list(words, "--cuda-graph-bs-prefill")?,
            decode_graphs: !(all_off
                || has("--disable-decode-cuda-graph")
                || disabled("--cuda-graph-backend-decode"))
                || matches!(
                    value(words, &["--cuda-graph-backend-decode"]),
                    Some("full" | "breakable")
                ),
            prefill_graphs: !(all_off
                || has("--disable-prefill-cuda-graph")
                || disabled("--cuda-graph-backend-prefill"))
                || matches!(
                    value(words, &["--cuda-graph-backend-prefill"]),
                    Some("full" | "breakable")
                ),
            max_running_requests: number(words, &["--max-running-requests"])?,
            speculative_algorithm: value(words, &["--speculative-algorithm"]).map(String::from),
            beyond,
        })
    }

    /// Whether the draft model is sized into the KV cell as a share of the target's layers.
    pub fn eagle_like(&self) -> bool {
        matches!(
            self.speculative_algorithm
                .as_deref()
                .map(str::to_ascii_uppercase)
                .as_deref(),
            Some("EAGLE" | "EAGLE3" | "STANDALONE" | "NEXTN")
        )
    }
}

/// The token counts SGLang captures prefill CUDA graphs for, up to `max_bs`.
fn prefill_capture_sizes(max_bs: i64) -> usize {
    let steps: [(i64, i64, i64); 6] = [
        (4, 32, 4),
        (48, 256, 16),
        (288, 512, 32),
        (576, 1024, 64),
        (1280, 4096, 256),
        (4608, max_bs, 512),
    ];
    steps
        .iter()
        .flat_map(|&(from, to, step)| (from..=to).step_by(step as usize))
        .filter(|&s| s <= max_bs)
        .count()
}

/// How SGLang's default fraction came out: the fraction and what it reserved.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultFraction {
    pub fraction: f64,
    /// MiB SGLang keeps out of the static pool for activations and CUDA graphs.
    pub reserved_mib: f64,
    pub chunked_prefill: i64,
    pub decode_max_bs: u64,
}

/// SGLang's default `--mem-fraction-static` on GPUs of `gpu_mib` (the smallest, as
/// `nvidia-smi` gives it) at tensor-parallel size `tp`, for a model that uses latent attention
/// when `mla`, served from `model_path`, its pool capped at `max_total_tokens` when given.
pub fn default_fraction(
    s: &SglangSizing,
    gpu_mib: u64,
    tp: u64,
    mla: bool,
    (model_path, max_total_tokens): (&str, Option<u64>),
) -> DefaultFraction {
    let gpu = gpu_mib as f64;
    const GIB: f64 = 1024.0;
    // Larger GPUs get a larger chunk and more decode graphs.
    let (chunk, decode_small_tp, decode_large_tp) = if gpu < 20.0 * GIB {
        (2048, 8, 8)
    } else if gpu < 35.0 * GIB {
        (4096, 48, 160)
    } else if gpu < 60.0 * GIB {
        (4096, 32, 160)
    } else if gpu < 160.0 * GIB {
        (8192, 256, 512)
    } else {
        (16384, 512, 512)
    };
    let chunked = s.chunked_prefill.unwrap_or(chunk);
    let mut decode_max = s.decode_max_bs.unwrap_or(if tp < 4 {
        decode_small_tp
    } else {
        decode_large_tp
    });
    if s.decode_max_bs.is_none()
        && let Some(running) = s.max_running_requests
    {
        decode_max = decode_max.min(running);
    }
    if let Some(bs) = &s.decode_bs
        && let Some(&max) = bs.iter().max()
    {
        decode_max = max;
    }
    let prefill_count = match (&s.prefill_bs, s.prefill_max_bs) {
        (Some(bs), _) => bs.len(),
        (None, Some(max)) => prefill_capture_sizes(max as i64),
        (None, None) => {
            let mut max = if mla { chunked.min(8192) } else { chunked };
            if s.pp > 1 && max > 8192 {
                max = 8192;
            }
            if let Some(total) = max_total_tokens {
                max = max.min(total as i64);
            }
            if model_path.to_lowercase().contains("llama-2") {
                max = max.min(4096);
            }
            prefill_capture_sizes(max)
        }
    };
    let activation_tokens = if chunked > 0 {
        chunked.max(2048) as f64
    } else {
        s.max_prefill_tokens.unwrap_or(MAX_PREFILL_TOKENS).max(2048) as f64
    };
    let mut graphs = 0.0;
    if s.decode_graphs {
        graphs += decode_max as f64 * 2.0;
    }
    if s.prefill_graphs {
        graphs += if mla {
            1.5 * 1024.0
        } else {
            prefill_count as f64 * 8.0
        };
    }
    let mut reserved = 512.0 + activation_tokens * 1.5 + (tp * s.pp) as f64 / 8.0 * 1024.0 + graphs;
    if gpu > 60.0 * GIB {
        reserved = reserved.max(10.0 * GIB);
    }
    DefaultFraction {
        fraction: ((gpu - reserved) / gpu * 1000.0).round() / 1000.0,
        reserved_mib: reserved,
        chunked_prefill: chunked,
        decode_max_bs: decode_max,
    }
}

/// SGLang's KV cell: the bytes one token takes on one GPU, `kv_bytes` per element, the draft's
/// share added (its layers as a share of the target's, as SGLang sizes EAGLE drafts) when
/// `draft_layers` is given.
pub fn cell_bytes(model: &ModelShape, tp: u64, kv_bytes: f64, draft_layers: Option<u64>) -> f64 {
    let cell = model.kv_bytes_per_token(tp, kv_bytes);
    match draft_layers {
        // SGLang truncates the share to whole bytes.
        Some(d) if model.layers > 0 => cell + (cell * d as f64 / model.layers as f64).floor(),
        _ => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(line: &str) -> SglangSizing {
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        SglangSizing::parse(&words).unwrap()
    }

    #[test]
    fn the_capture_sizes_follow_sglangs_steps() {
        // 4..32 by 4 (8), 48..256 by 16 (14), 288..512 by 32 (8), 576..1024 by 64 (8),
        // 1280..4096 by 256 (12).
        assert_eq!(prefill_capture_sizes(4096), 50);
        assert_eq!(prefill_capture_sizes(8192), 50 + 8);
        assert_eq!(prefill_capture_sizes(3), 0);
        assert_eq!(prefill_capture_sizes(-1), 0);
    }

    #[test]
    fn a_large_gpu_keeps_at_least_ten_gib_out_and_a_small_one_its_computed_reserve() {
        // 46068 MiB: chunk 4096, decode 32 → 512 + 6144 + 128 + 64 + 50·8.
        let l40s = default_fraction(&sizing("sglang"), 46068, 1, false, ("/m", None));
        assert_eq!(l40s.reserved_mib, 512.0 + 6144.0 + 128.0 + 64.0 + 400.0);
        assert_eq!(l40s.fraction, 0.843);
        // 143771 MiB at TP 8: chunk 8192, decode 512 → 512 + 12288 + 1024 + 1024 + 58·8.
        let h200 = default_fraction(
            &sizing("sglang --tp-size 8"),
            143_771,
            8,
            false,
            ("/m", None),
        );
        assert_eq!(h200.reserved_mib, 15312.0);
        assert_eq!(h200.fraction, 0.893);
        // Small chunks and few graphs on an 80 GB GPU: the 10 GiB floor.
        let floor = default_fraction(
            &sizing(
                "sglang --chunked-prefill-size 2048 --cuda-graph-max-bs-decode 8 --disable-prefill-cuda-graph",
            ),
            81559,
            1,
            false,
            ("/m", None),
        );
        assert_eq!(floor.reserved_mib, 10240.0);
        assert_eq!(floor.fraction, 0.874);
    }

    #[test]
    fn graphs_turned_off_reserve_nothing_for_them() {
        let off = default_fraction(
            &sizing("sglang --disable-cuda-graph"),
            46068,
            1,
            false,
            ("/m", None),
        );
        assert_eq!(off.reserved_mib, 512.0 + 6144.0 + 128.0);
        let decode_only = sizing("sglang --cuda-graph-backend-prefill disabled");
        assert!(decode_only.decode_graphs && !decode_only.prefill_graphs);
    }
}
