//! The simulated GPU memory (--model-path and the memory flags): the model's `config.json` is
//! read and memory allocated by the estimate's own arithmetic ([`crate::memory`]), so what the
//! simulator prints is what gpuflow's estimate predicts for those flags, and the load fails
//! where a real server's would:
//!
//! - weights larger than the GPU: CUDA out of memory while loading them;
//! - weights larger than the share (`--mem-fraction-static` too low): SGLang's `ValueError:
//!   Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=…` (its
//!   `Not enough memory.` when a share left over rounds to 0 tokens), or vLLM's "No available
//!   memory for the cache blocks";
//! - the rest of the GPU smaller than --activation-mib (the share too high): CUDA out of
//!   memory while capturing CUDA graphs.

use super::config::SimConfig;
use crate::memory::{Estimate, ModelShape, ServerFlags, ServerKind};

/// vLLM's default `--block-size` on CUDA, in tokens: its KV cache is a whole number of blocks.
const VLLM_BLOCK_TOKENS: u64 = 16;

/// What the load allocates, and how it fails if it does.
#[derive(Clone, Debug)]
pub struct MemoryPlan {
    pub estimate: Estimate,
    /// The KV cache size printed: the estimate's, in whole vLLM blocks for vLLM.
    pub kv_tokens: u64,
    /// Where in the load (a fraction of it) it fails, and the traceback.
    pub failure: Option<(f64, String)>,
    max_model_len: u32,
}

fn read_model(path: &std::path::Path) -> Result<ModelShape, String> {
    let file = path.join("config.json");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read the model's config `{}`: {e}", file.display()))?;
    ModelShape::from_config_json(&text).map_err(|e| format!("`{}`: {e}", file.display()))
}

/// The plan for `config`; `None` without --model-path. `Err` when a config cannot be read.
pub fn plan(config: &SimConfig) -> Result<Option<MemoryPlan>, String> {
    let Some(path) = &config.model_path else {
        return Ok(None);
    };
    let model = read_model(path)?;
    let draft = config
        .speculative_draft_model_path
        .as_deref()
        .map(read_model)
        .transpose()?;
    let kind = if config.gpu_memory_utilization.is_some() {
        ServerKind::Vllm
    } else {
        ServerKind::Sglang
    };
    let flags = ServerFlags {
        kind,
        model: path.display().to_string(),
        draft_model: None,
        tp: config.tp_size,
        fraction: config.gpu_memory_utilization.or(config.mem_fraction_static),
        max_total_tokens: config.max_total_tokens,
        context: None,
        dtype: None,
        kv_cache_dtype: config.kv_cache_dtype.clone(),
        quantization: None,
        sglang: Default::default(),
        vllm: Default::default(),
        overhead_mib: None,
    };
    let estimate = Estimate::new(&model, draft.as_ref(), &flags, config.gpu_memory_mib)?;
    let kv_tokens = match kind {
        ServerKind::Sglang => estimate.kv_tokens,
        ServerKind::Vllm => estimate.kv_tokens / VLLM_BLOCK_TOKENS * VLLM_BLOCK_TOKENS,
    };
    let failure = failure(&estimate, config);
    Ok(Some(MemoryPlan {
        estimate,
        kv_tokens,
        failure,
        max_model_len: config.max_model_len,
    }))
}

fn gib(mib: f64) -> f64 {
    mib / 1024.0
}

fn torch_oom(tried_mib: f64, e: &Estimate, free_mib: f64) -> String {
    format!(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {:.2} GiB. GPU 0 has a total capacity of {:.2} GiB of which {:.2} GiB is free.\n",
        gib(tried_mib),
        gib(e.gpu_mib as f64),
        gib(free_mib.max(0.0))
    )
}

/// SGLang 0.5.23's error when the loaded weights exceed `--mem-fraction-static`
/// (sglang/srt/mem_cache/kv_cache_configurator.py:3042-3058): `pre_gib` is the free memory
/// before the load, `available_gib` after it.
pub fn sglang_no_kv_room(fraction: f64, pre_gib: f64, available_gib: f64) -> String {
    let minimum = 1.0 - available_gib / pre_gib;
    let suggested = (minimum * 1000.0).ceil() / 1000.0;
    // `{fraction}` prints like Python's float repr for the values a flag gives (0.55, 0.3).
    format!(
        "ValueError: Loaded weights leave no GPU memory for the KV cache under \
         --mem-fraction-static={fraction}. Raise --mem-fraction-static above {suggested:.3} \
         (minimum viable = 1 - available/pre = {minimum:.4}). If using speculative decoding, \
         draft weights are now counted."
    )
}

/// The scheduler's traceback around SGLang's `exception` line.
pub fn sglang_scheduler_traceback(
    file: &str,
    line: u32,
    function: &str,
    exception: &str,
) -> String {
    let raised = exception.split(':').next().unwrap_or("RuntimeError");
    format!(
        "Scheduler hit an exception: Traceback (most recent call last):\n  \
         File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 6370, in run_scheduler_process\n    \
         scheduler = Scheduler(\n  \
         File \"/sgl-workspace/sglang/python/sglang/srt/{file}\", line {line}, in {function}\n    \
         raise {raised}(\n{exception}\n"
    )
}

fn failure(e: &Estimate, config: &SimConfig) -> Option<(f64, String)> {
    let gpu = e.gpu_mib as f64;
    let preload = e.runtime_mib;
    if e.weights_mib > gpu - preload {
        let message = format!(
            "Traceback (most recent call last):\n  File \"model_loader/loader.py\", line 412, in load_model\n{}",
            torch_oom(1024.0, e, gpu - preload - e.weights_mib + 1024.0)
        );
        return Some((0.25, message));
    }
    if !e.fits() {
        let message = match e.kind {
            // The weights took the whole share: the common case.
            ServerKind::Sglang if e.kv_mib <= 0.0 => {
                let pre = gib(gpu - preload);
                sglang_scheduler_traceback(
                    "mem_cache/kv_cache_configurator.py",
                    3051,
                    "_profile_available_bytes",
                    &sglang_no_kv_room(e.fraction, pre, pre - gib(e.weights_mib)),
                )
            }
            // A share left over, too small for one token (pool_configurator.py:95-99).
            ServerKind::Sglang => sglang_scheduler_traceback(
                "model_executor/pool_configurator.py",
                97,
                "__post_init__",
                &format!(
                    "RuntimeError: Not enough memory. Please try to increase \
                     --mem-fraction-static. Current value: mem_fraction_static={}",
                    e.fraction
                ),
            ),
            ServerKind::Vllm => "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py\", line 686, in check_enough_kv_cache_memory\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n".to_owned(),
        };
        return Some((0.7, message));
    }
    let outside = match e.kind {
        ServerKind::Sglang => (gpu - preload) * (1.0 - e.fraction),
        ServerKind::Vllm => gpu * (1.0 - e.fraction),
    };
    let activation = config.activation_mib as f64;
    if outside < activation {
        let message = format!(
            "Exception: Capture cuda graph failed: {}(gpuflow-sim: the {:.2} GiB outside the share are less than --activation-mib {})\n",
            torch_oom(activation, e, outside),
            gib(outside),
            config.activation_mib
        );
        return Some((0.9, message));
    }
    None
}

impl MemoryPlan {
    /// The memory lines of the load, each with the fraction of the load after which it comes,
    /// in the server's words.
    pub fn lines(&self) -> Vec<(f64, String)> {
        let e = &self.estimate;
        let avail = gib(e.gpu_mib as f64 - e.runtime_mib);
        let after = avail - gib(e.weights_mib);
        let kv_gb = self.kv_tokens as f64 * e.kv_bytes_per_token / f64::from(1u32 << 30);
        match e.kind {
            ServerKind::Sglang => vec![
                (0.0, format!("Load weight begin. avail mem={avail:.2} GB")),
                (
                    0.6,
                    format!(
                        "Load weight end. type=SimulatedForCausalLM, dtype=torch.bfloat16, avail mem={after:.2} GB, mem usage={:.2} GB.",
                        gib(e.weights_mib)
                    ),
                ),
                (
                    0.7,
                    format!(
                        "KV Cache is allocated. #tokens: {}, K size: {:.2} GB, V size: {:.2} GB",
                        self.kv_tokens,
                        kv_gb / 2.0,
                        kv_gb / 2.0
                    ),
                ),
            ],
            ServerKind::Vllm => vec![
                (0.0, "Starting to load model (simulated)...".to_owned()),
                (
                    0.6,
                    format!(
                        "Model loading took {:.4} GiB and 0.000000 seconds",
                        gib(e.weights_mib)
                    ),
                ),
                (
                    0.7,
                    format!("Available KV cache memory: {:.2} GiB", gib(e.kv_mib)),
                ),
                (
                    0.7,
                    format!("GPU KV cache size: {} tokens", thousands(self.kv_tokens)),
                ),
                (
                    0.7,
                    format!(
                        "Maximum concurrency for {} tokens per request: {:.2}x",
                        thousands(u64::from(self.max_model_len)),
                        self.kv_tokens as f64 / f64::from(self.max_model_len)
                    ),
                ),
            ],
        }
    }
}

/// `1,234,567`, as vLLM writes token counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::reported::kv_tokens;

    fn with_model(args: impl FnOnce(&mut SimConfig)) -> (tempfile::TempDir, SimConfig) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            crate::memory::model::tests::LLAMA3_8B,
        )
        .unwrap();
        let mut config = SimConfig {
            model_path: Some(dir.path().to_path_buf()),
            gpu_memory_mib: 46068,
            ..SimConfig::default()
        };
        args(&mut config);
        (dir, config)
    }

    /// The printed KV line, read back as gpuflow reads a server's.
    fn printed(plan: &MemoryPlan) -> Option<u64> {
        plan.lines().iter().find_map(|(_, l)| kv_tokens(l))
    }

    #[test]
    fn sglang_prints_the_estimates_kv_cache_and_loads() {
        let (_dir, config) = with_model(|c| c.mem_fraction_static = Some(0.85));
        let plan = plan(&config).unwrap().unwrap();
        assert_eq!(plan.failure, None);
        assert_eq!(printed(&plan), Some(183_767));
        assert_eq!(printed(&plan), Some(plan.estimate.kv_tokens));
    }

    #[test]
    fn vllm_prints_whole_blocks() {
        let (_dir, config) = with_model(|c| c.gpu_memory_utilization = Some(0.85));
        let plan = plan(&config).unwrap().unwrap();
        let got = printed(&plan).unwrap();
        assert_eq!(got % 16, 0);
        assert!(plan.estimate.kv_tokens - got < 16);
        assert!(
            plan.lines()
                .iter()
                .any(|(_, l)| l.starts_with("GPU KV cache size: "))
        );
    }

    #[test]
    fn too_low_a_share_is_not_enough_memory_and_too_high_a_cuda_oom() {
        let (_dir, config) = with_model(|c| c.mem_fraction_static = Some(0.3));
        let (at, message) = plan(&config).unwrap().unwrap().failure.unwrap();
        assert_eq!(at, 0.7);
        assert!(message.contains("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. Raise --mem-fraction-static above 0.341 (minimum viable = 1 - available/pre = 0.3400)."), "{message}");
        // The cause gpuflow shows for it.
        let cause = crate::steps::causes::recognise(&message.lines().collect::<Vec<_>>()).unwrap();
        assert_eq!(cause.kind, crate::steps::causes::CauseKind::NotEnoughMemory);
        let (_dir, config) = with_model(|c| c.mem_fraction_static = Some(0.97));
        let (at, message) = plan(&config).unwrap().unwrap().failure.unwrap();
        assert_eq!(at, 0.9);
        assert!(
            message.contains("torch.OutOfMemoryError: CUDA out of memory."),
            "{message}"
        );
        // Where the boundary lies is a flag.
        let (_dir, config) = with_model(|c| {
            c.mem_fraction_static = Some(0.97);
            c.activation_mib = 512;
        });
        assert_eq!(plan(&config).unwrap().unwrap().failure, None);
        let (_dir, config) = with_model(|c| {
            c.mem_fraction_static = Some(0.85);
            c.gpu_memory_mib = 8192;
        });
        let (at, message) = plan(&config).unwrap().unwrap().failure.unwrap();
        assert_eq!(at, 0.25);
        assert!(message.contains("CUDA out of memory"), "{message}");
    }

    #[test]
    fn a_missing_config_is_said_with_its_path() {
        let config = SimConfig {
            model_path: Some("/nonexistent/model".into()),
            ..SimConfig::default()
        };
        let e = plan(&config).unwrap_err();
        assert!(
            e.starts_with("cannot read the model's config `/nonexistent/model/config.json`"),
            "{e}"
        );
        assert!(plan(&SimConfig::default()).unwrap().is_none());
        assert_eq!(thousands(4_455_808), "4,455,808");
    }
}
