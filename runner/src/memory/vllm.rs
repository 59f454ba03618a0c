//! vLLM's own sizing rules, as vLLM 0.32.0 (the version gpuflow pins and tests against)
//! applies them on a CUDA GPU (docs/memory.md):
//!
//! - the budget is `⌈total × gpu_memory_utilization⌉` (`vllm/v1/worker/utils.py`,
//!   `request_memory`), the utilization 0.92 unless given (`vllm/config/cache.py`);
//! - the KV cache gets the budget less what is not KV cache after a profiling forward pass
//!   (weights, the memory outside torch such as the CUDA context and NCCL, the activation
//!   peak) and less the CUDA graphs' estimate (`vllm/v1/worker/gpu_worker.py`,
//!   `determine_available_memory`).
//!
//! The activation peak and the graphs are measured by vLLM on the GPU; here they are an
//! estimate from the model's shape and vLLM's batch limits ([`in_budget_reserve_mib`]), said
//! as such in every message. vLLM 0.34 changed the default to 1.0 with its extensible KV cache
//! (docs/memory.md): against it these rules are low, never a refusal of what runs.

use super::kind::ServerKind;
use super::model::ModelShape;
use super::words::{number, tokens, value};

/// vLLM 0.32.0's `gpu_memory_utilization` default (`CacheConfig`).
pub const DEFAULT_UTILIZATION: f64 = 0.92;

/// How the default is said in messages.
pub const DEFAULT_ORIGIN: &str = "vLLM 0.32's default";

/// The flags that size vLLM's profiling pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VllmSizing {
    /// `--max-num-batched-tokens`: the tokens of the profiling forward pass.
    pub max_num_batched_tokens: Option<u64>,
    /// `--max-num-seqs`: the sequences of the profiling sampler pass.
    pub max_num_seqs: Option<u64>,
    /// `--enforce-eager`: no CUDA graphs.
    pub eager: bool,
    /// `--kv-cache-memory-bytes`: the KV cache's size itself, the utilization ignored
    /// (`vllm/v1/worker/gpu_worker.py`; on CPUs also `VLLM_CPU_KVCACHE_SPACE`, in GiB).
    pub kv_cache_memory_bytes: Option<u64>,
}

impl VllmSizing {
    pub fn parse(words: &[String]) -> Result<Self, String> {
        Ok(Self {
            max_num_batched_tokens: tokens(ServerKind::Vllm, words, &["--max-num-batched-tokens"])?,
            max_num_seqs: number(words, &["--max-num-seqs"])?,
            eager: words.iter().any(|w| w == "--enforce-eager")
                || value(words, &["--enforce-eager"]) == Some("true"),
            // vLLM reads it with the same `human_readable_int` as its token counts.
            kv_cache_memory_bytes: tokens(ServerKind::Vllm, words, &["--kv-cache-memory-bytes"])?,
        })
    }
}

/// vLLM's budget in MiB on a GPU of `gpu_mib` at `utilization`.
pub fn requested_mib(gpu_mib: f64, utilization: f64) -> f64 {
    (gpu_mib * 1024.0 * 1024.0 * utilization).ceil() / (1024.0 * 1024.0)
}

/// vLLM's defaults for the profiling pass by the GPU's memory, for `vllm serve`
/// (`EngineArgs._set_default_max_num_seqs_and_batched_tokens_args`): 16384 tokens and 1024
/// sequences from 160 GiB, 8192 and 1024 from 70 GiB (A100s excepted: vLLM checks the name),
/// else 2048 and 256.
fn profile_defaults(gpu_mib: f64) -> (u64, u64) {
    if gpu_mib >= 160.0 * 1024.0 {
        (16384, 1024)
    } else if gpu_mib >= 70.0 * 1024.0 {
        (8192, 1024)
    } else {
        (2048, 256)
    }
}

/// What vLLM keeps inside its budget beyond weights, in MiB: an ESTIMATE of the activation
/// peak of its profiling pass and of its CUDA graphs, which vLLM measures on the GPU:
/// - the forward pass over `max_num_batched_tokens` tokens: the hidden states (four copies:
///   residual, normed, attention output, MLP output) and the MLP's gate and up projections of
///   this GPU's share (a mixture of experts: its active experts' share), in 16 bits;
/// - the sampler pass over `max_num_seqs` sequences: logits and probabilities in fp32;
/// - CUDA graphs: [`GRAPHS_MIB`] unless `--enforce-eager`.
pub fn in_budget_reserve_mib(model: &ModelShape, s: &VllmSizing, tp: u64, gpu_mib: f64) -> f64 {
    let (tokens, seqs) = profile_defaults(gpu_mib);
    let tokens = s.max_num_batched_tokens.unwrap_or(tokens) as f64;
    let seqs = s.max_num_seqs.unwrap_or(seqs) as f64;
    let tp = tp.max(1) as f64;
    let mlp = match &model.moe {
        Some(moe) => (moe.active * moe.expert_intermediate + moe.shared_intermediate) as f64,
        None => model.intermediate_size as f64,
    };
    let forward = tokens * (4.0 * model.hidden_size as f64 + 2.0 * mlp / tp) * 2.0;
    let sampler = seqs * model.vocab_size as f64 * 4.0 * 2.0;
    let graphs = if s.eager { 0.0 } else { GRAPHS_MIB };
    (forward.max(sampler)) / (1024.0 * 1024.0) + graphs
}

/// The CUDA graphs' allowance: vLLM captures its graphs in a private pool it estimates
/// before the KV cache is sized; a few hundred MiB for the decode sizes up to 512.
pub const GRAPHS_MIB: f64 = 512.0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::model::tests::LLAMA3_8B;

    #[test]
    fn the_budget_is_the_ceiling_of_the_share_in_bytes() {
        // 46068 MiB × 0.92 = 42382.56 MiB, rounded up to a whole byte.
        let r = requested_mib(46068.0, 0.92);
        assert!((r - 42382.56).abs() < 1e-5, "{r}");
    }

    #[test]
    fn the_reserve_grows_with_the_profiled_batch_and_drops_its_graphs_when_eager() {
        let m = ModelShape::from_config_json(LLAMA3_8B).unwrap();
        let words =
            |line: &str| -> Vec<String> { line.split_whitespace().map(String::from).collect() };
        let plain = VllmSizing::parse(&words("vllm serve /m")).unwrap();
        // An L40S: 2048 tokens × (4 × 4096 + 2 × 14336) × 2 bytes = 176 MiB, below the
        // sampler's 256 × 128256 × 8 bytes = 250.5 MiB.
        let r = in_budget_reserve_mib(&m, &plain, 1, 46068.0);
        assert!((r - (250.5 + GRAPHS_MIB)).abs() < 0.1, "{r}");
        let big = VllmSizing::parse(&words("vllm serve /m --max-num-batched-tokens 16k")).unwrap();
        assert_eq!(big.max_num_batched_tokens, Some(16000));
        assert!(in_budget_reserve_mib(&m, &big, 1, 46068.0) > r + 1000.0);
        let eager = VllmSizing::parse(&words("vllm serve /m --enforce-eager")).unwrap();
        assert!((in_budget_reserve_mib(&m, &eager, 1, 46068.0) - 250.5).abs() < 0.1);
    }
}
