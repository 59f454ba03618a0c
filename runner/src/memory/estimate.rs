//! The estimate itself: from a model's shape, a server's memory flags and the memory of the
//! GPUs it gets, the weights each GPU holds, the budget the server's fraction allows, the KV
//! cache room left in tokens, and the margin. The same arithmetic the servers do, with the
//! runtime's own use (CUDA context, NCCL buffers) as one fixed allowance:
//!
//! - SGLang: the KV pool is what is free after the weights load, less the share of the free
//!   memory before the load that `--mem-fraction-static` leaves out:
//!   `(gpu - runtime) × fraction - weights`; at 0 or less it stops with `ValueError: Loaded
//!   weights leave no GPU memory for the KV cache`.
//! - vLLM: `gpu × --gpu-memory-utilization - runtime - weights`; at 0 or less it stops with
//!   "No available memory for the cache blocks".

use super::flags::{ServerFlags, ServerKind};
use super::model::{ModelShape, dtype_bytes, quant_bits};

/// What the CUDA context, NCCL and the allocator take on each GPU before any weight: an
/// allowance, not a measurement (about what SGLang's "avail mem" shows below the card's size).
pub const RUNTIME_MIB: f64 = 1024.0;

const MIB: f64 = 1024.0 * 1024.0;

/// SGLang's `--mem-fraction-static` when none is given, by tensor-parallel size (its server
/// arguments' defaults: more GPUs, more room for the communication buffers).
pub fn sglang_default_fraction(tp: u64) -> f64 {
    match tp {
        16.. => 0.79,
        8.. => 0.81,
        4.. => 0.85,
        2.. => 0.87,
        _ => 0.88,
    }
}

/// vLLM's `--gpu-memory-utilization` default.
pub const VLLM_DEFAULT_FRACTION: f64 = 0.9;

/// One estimate, per GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub kind: ServerKind,
    pub tp: u64,
    /// The smallest memory of the GPUs the server gets.
    pub gpu_mib: u64,
    pub fraction: f64,
    pub fraction_given: bool,
    /// What the fraction allows for weights and KV cache.
    pub budget_mib: f64,
    pub params: u64,
    /// Weights each GPU holds (the draft model's included).
    pub weights_mib: f64,
    pub draft_weights_mib: f64,
    /// KV cache bytes of one token on each GPU (the draft model's included).
    pub kv_bytes_per_token: f64,
    /// What is left for the KV cache: the margin; negative when the weights do not fit.
    pub kv_mib: f64,
    /// The KV cache room in tokens (0 when the weights do not fit), `--max-total-tokens`
    /// applied.
    pub kv_tokens: u64,
    pub capped_by_max_total: bool,
    /// The context asked for (`--context-length` / `--max-model-len`), else vLLM's default
    /// (the model's own); SGLang's default is not checked (one request rarely fills it).
    pub context: Option<(u64, bool)>,
}

fn gib(mib: f64) -> String {
    format!("{:.2} GiB", mib / 1024.0)
}

impl Estimate {
    /// The estimate for `model` (and its speculative `draft`) served with `flags` on GPUs of
    /// `gpu_mib` each.
    pub fn new(
        model: &ModelShape,
        draft: Option<&ModelShape>,
        flags: &ServerFlags,
        gpu_mib: u64,
    ) -> Result<Self, String> {
        let dtype = match &flags.dtype {
            None => None,
            Some(d) => Some(
                dtype_bytes(d)
                    .ok_or_else(|| format!("`--dtype {d}` is not a dtype gpuflow knows"))?,
            ),
        };
        let quant = match &flags.quantization {
            None => None,
            Some(q) => Some(quant_bits(q, None).ok_or_else(|| {
                format!("`--quantization {q}` is not a method gpuflow knows the size of")
            })?),
        };
        // `auto` serves a float32 checkpoint in 16 bits, as both servers do.
        let served_dtype = |m: &ModelShape| dtype.unwrap_or(m.dtype_bytes.min(2.0));
        let kv_bytes = match &flags.kv_cache_dtype {
            None => served_dtype(model),
            Some(d) => dtype_bytes(d)
                .ok_or_else(|| format!("`--kv-cache-dtype {d}` is not a dtype gpuflow knows"))?,
        };
        let tp = flags.tp.max(1) as f64;
        let weights = |m: &ModelShape| m.weight_bytes(Some(served_dtype(m)), quant) / tp / MIB;
        let draft_weights_mib = draft.map_or(0.0, |d| {
            d.weight_bytes(Some(served_dtype(d)), None) / tp / MIB
        });
        let weights_mib = weights(model) + draft_weights_mib;
        let kv_bytes_per_token = model.kv_bytes_per_token(flags.tp, kv_bytes)
            + draft.map_or(0.0, |d| d.kv_bytes_per_token(flags.tp, kv_bytes));
        let (fraction, fraction_given) = match (flags.fraction, flags.kind) {
            (Some(f), _) => (f, true),
            (None, ServerKind::Sglang) => (sglang_default_fraction(flags.tp), false),
            (None, ServerKind::Vllm) => (VLLM_DEFAULT_FRACTION, false),
        };
        let gpu = gpu_mib as f64;
        let budget_mib = match flags.kind {
            ServerKind::Sglang => (gpu - RUNTIME_MIB) * fraction,
            ServerKind::Vllm => gpu * fraction - RUNTIME_MIB,
        };
        let kv_mib = budget_mib - weights_mib;
        let room = if kv_mib > 0.0 {
            (kv_mib * MIB / kv_bytes_per_token) as u64
        } else {
            0
        };
        let kv_tokens = flags.max_total_tokens.map_or(room, |m| m.min(room));
        let context = match (flags.context, flags.kind) {
            (Some(c), _) => Some((c, true)),
            (None, ServerKind::Vllm) => model.max_context.map(|c| (c, false)),
            (None, ServerKind::Sglang) => None,
        };
        Ok(Self {
            kind: flags.kind,
            tp: flags.tp,
            gpu_mib,
            fraction,
            fraction_given,
            budget_mib,
            params: model.params(),
            weights_mib,
            draft_weights_mib,
            kv_bytes_per_token,
            kv_mib,
            kv_tokens,
            capped_by_max_total: kv_tokens < room,
            context,
        })
    }

    /// Whether the weights fit the budget with room for any KV cache.
    pub fn fits(&self) -> bool {
        self.kv_tokens > 0
    }

    /// The smallest fraction that holds the weights (with nothing for the KV cache).
    pub fn min_fraction(&self) -> f64 {
        let gpu = self.gpu_mib as f64;
        match self.kind {
            ServerKind::Sglang => self.weights_mib / (gpu - RUNTIME_MIB),
            ServerKind::Vllm => (self.weights_mib + RUNTIME_MIB) / gpu,
        }
    }

    /// The numbers, in one paragraph of lines.
    pub fn describe(&self) -> String {
        let flag = self.kind.fraction_flag();
        let given = if self.fraction_given {
            ""
        } else {
            ", the default"
        };
        let draft = if self.draft_weights_mib > 0.0 {
            format!(
                " (the draft model's {} included)",
                gib(self.draft_weights_mib)
            )
        } else {
            String::new()
        };
        let mut s = format!(
            "weights: {} per GPU ({:.2e} parameters over TP {}){draft}\n\
             budget: {} ({flag} {}{given}, of a {} GPU, {} kept for the CUDA runtime)\n",
            gib(self.weights_mib),
            self.params as f64,
            self.tp,
            gib(self.budget_mib),
            self.fraction,
            gib(self.gpu_mib as f64),
            gib(RUNTIME_MIB),
        );
        if self.fits() {
            let cap = if self.capped_by_max_total {
                " (--max-total-tokens)"
            } else {
                ""
            };
            s.push_str(&format!(
                "KV cache room: {} tokens{cap} at {} KiB per token; margin {} over the weights",
                self.kv_tokens,
                (self.kv_bytes_per_token / 1024.0).round(),
                gib(self.kv_mib),
            ));
        } else {
            s.push_str(&format!(
                "the weights alone exceed the budget by {}: no room for the KV cache",
                gib(-self.kv_mib)
            ));
        }
        s
    }

    /// How to make the weights fit, for a refusal.
    pub fn fixes(&self) -> String {
        let flag = self.kind.fraction_flag();
        let need = self.min_fraction();
        let raise = if need < 0.97 {
            format!(
                "raise `{flag}` above {:.2} (and leave room for the KV cache)",
                need
            )
        } else {
            format!(
                "`{flag}` cannot make room on these GPUs ({:.2} would be needed)",
                need
            )
        };
        format!(
            "help: {raise}; or spread the weights over more GPUs (a larger tensor-parallel size, now {}); or serve a smaller dtype (`--quantization fp8`)",
            self.tp
        )
    }

    /// A warning when the KV cache room holds less than the context asked for.
    pub fn context_warning(&self) -> Option<String> {
        let (context, given) = self.context?;
        if !self.fits() || self.kv_tokens >= context {
            return None;
        }
        let source = if given {
            format!("`{}` asks for", self.kind.context_flag())
        } else {
            "the model's context length (vLLM's default `--max-model-len`) is".to_string()
        };
        let consequence = match self.kind {
            ServerKind::Vllm => {
                "vLLM refuses to start when its KV cache cannot hold one request of `--max-model-len` tokens"
            }
            ServerKind::Sglang => "one request of that length will not fit",
        };
        Some(format!(
            "the estimated KV cache room is {} tokens, and {source} {context}: {consequence} (help: raise `{}`, lower `{}`, or use a smaller KV dtype: `--kv-cache-dtype fp8_e4m3`)",
            self.kv_tokens,
            self.kind.fraction_flag(),
            self.kind.context_flag()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::model::tests::LLAMA3_8B;

    fn flags(line: &str) -> ServerFlags {
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        ServerFlags::parse(&words).unwrap().unwrap()
    }

    fn llama() -> ModelShape {
        ModelShape::from_config_json(LLAMA3_8B).unwrap()
    }

    /// An L40S: 46068 MiB.
    const L40S: u64 = 46068;

    #[test]
    fn llama_3_8b_on_an_l40s_at_0_85_has_room_for_about_180k_tokens() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.85"),
            L40S,
        )
        .unwrap();
        assert!((e.weights_mib - 15316.5).abs() < 0.1, "{}", e.weights_mib);
        assert!((e.budget_mib - 45044.0 * 0.85).abs() < 0.01);
        // (38287.4 - 15316.5) MiB / 128 KiB per token.
        assert_eq!(e.kv_tokens, 183_767);
        assert!(e.fits());
        let d = e.describe();
        assert!(
            d.contains("KV cache room: 183767 tokens at 128 KiB per token"),
            "{d}"
        );
        assert!(
            d.contains("--mem-fraction-static 0.85, of a 44.99 GiB GPU"),
            "{d}"
        );
    }

    #[test]
    fn the_weights_exceeding_the_budget_are_refused_with_the_fraction_needed() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.3"),
            L40S,
        )
        .unwrap();
        assert!(!e.fits());
        assert_eq!(e.kv_tokens, 0);
        assert!(
            e.describe()
                .contains("the weights alone exceed the budget by 1.76 GiB"),
            "{}",
            e.describe()
        );
        let fix = e.fixes();
        assert!(
            fix.contains("raise `--mem-fraction-static` above 0.34"),
            "{fix}"
        );
        // Two GPUs halve the weights each holds.
        let tp2 = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.3 --tp 2"),
            L40S,
        )
        .unwrap();
        assert!(tp2.fits());
        // So does fp8.
        let fp8 = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.3 --quantization fp8"),
            L40S,
        )
        .unwrap();
        assert!(fp8.fits());
    }

    #[test]
    fn vllm_warns_when_the_room_is_below_the_models_context() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("vllm serve /m --gpu-memory-utilization 0.37"),
            L40S,
        )
        .unwrap();
        assert!(e.fits());
        let w = e.context_warning().unwrap();
        assert!(
            w.contains("the model's context length (vLLM's default `--max-model-len`) is 8192"),
            "{w}"
        );
        // SGLang checks only a context that was asked for.
        let s = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.357"),
            L40S,
        )
        .unwrap();
        assert!(s.fits() && s.kv_tokens < 8192, "{}", s.kv_tokens);
        assert_eq!(s.context_warning(), None);
        let asked =
            flags("sglang --model-path /m --mem-fraction-static 0.357 --context-length 8192");
        let w = Estimate::new(&llama(), None, &asked, L40S)
            .unwrap()
            .context_warning()
            .unwrap();
        assert!(w.contains("`--context-length` asks for 8192"), "{w}");
    }

    #[test]
    fn max_total_tokens_caps_and_a_draft_model_adds_its_weights_and_kv() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --max-total-tokens 1000"),
            L40S,
        )
        .unwrap();
        assert_eq!(e.kv_tokens, 1000);
        assert!(e.capped_by_max_total);
        assert_eq!(e.fraction, 0.88);
        let plain = Estimate::new(&llama(), None, &flags("sglang --model-path /m"), L40S).unwrap();
        let drafted = Estimate::new(
            &llama(),
            Some(&llama()),
            &flags("sglang --model-path /m"),
            L40S,
        )
        .unwrap();
        assert!((drafted.weights_mib - 2.0 * plain.weights_mib).abs() < 0.01);
        assert_eq!(drafted.kv_bytes_per_token, 2.0 * plain.kv_bytes_per_token);
    }

    #[test]
    fn a_dtype_flag_gpuflow_does_not_know_is_said() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --kv-cache-dtype int3"),
            L40S,
        )
        .unwrap_err();
        assert_eq!(e, "`--kv-cache-dtype int3` is not a dtype gpuflow knows");
    }
}
