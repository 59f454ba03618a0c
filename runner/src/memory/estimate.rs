//! The estimate itself: from a model's shape, a server's memory flags and the memory of the
//! GPUs it gets, the weights each GPU holds, the budget the server's fraction allows, the KV
//! cache room left in tokens, and the margin. The servers' own arithmetic (docs/memory.md),
//! with what only a GPU can measure taken as stated allowances:
//!
//! - SGLang: the KV pool is what is free after the weights load, less the share of the free
//!   memory before the load that `--mem-fraction-static` leaves out:
//!   `(gpu - preload) × fraction - weights`; at 0 or less it stops with `ValueError: Loaded
//!   weights leave no GPU memory for the KV cache`. Its default fraction is derived from the
//!   GPU ([`super::sglang::default_fraction`]); its cell from its own rules
//!   ([`super::sglang::cell_bytes`]).
//! - vLLM: `⌈gpu × --gpu-memory-utilization⌉ - preload - weights - activations and CUDA graphs`
//!   ([`super::vllm`]); at 0 or less it stops with "No available memory for the cache blocks".
//!
//! `preload` is what each GPU loses before the weights load (CUDA context, NCCL and all-reduce
//! buffers): [`PRELOAD_MIB`] unless the step says (`start-container`'s `preload-overhead`).

use super::flags::{ServerFlags, ServerKind};
use super::model::ModelShape;
use super::sizing::{MIB, Widths, budget_of, fraction_of, gib, kv_per_token, kv_room};

/// What each GPU loses before any weight (the CUDA context, NCCL and all-reduce buffers),
/// unless the step says: an allowance, not a measurement (about what SGLang's first
/// "avail mem" shows below the card's size on one GPU; more GPUs take more for NCCL).
pub const PRELOAD_MIB: f64 = 1024.0;

/// The estimate's confidence margin: a server is refused only when its weights exceed the
/// budget by more than this share of the budget (at least [`MARGIN_FLOOR_MIB`]). It covers
/// what the estimate cannot see: the pre-load overhead being lower than its allowance, norms
/// and quantization scales, and rounding in the servers' own arithmetic.
pub const MARGIN_SHARE: f64 = 0.02;
pub const MARGIN_FLOOR_MIB: f64 = 512.0;

/// One estimate, per GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub kind: ServerKind,
    pub tp: u64,
    /// The smallest memory of the GPUs the server gets.
    pub gpu_mib: u64,
    pub fraction: f64,
    pub fraction_given: bool,
    /// How a default fraction came about (SGLang's derivation, vLLM's default), for messages.
    pub fraction_origin: String,
    /// What each GPU loses before the weights load, and whether the step said it.
    pub runtime_mib: f64,
    pub runtime_given: bool,
    /// vLLM's activation peak and CUDA graphs, which it takes inside its budget (estimated;
    /// 0 for SGLang, whose fraction leaves them out).
    pub reserve_mib: f64,
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
    /// What the estimate leaves out for this command line (flags with which the server keeps
    /// more memory back than the estimate does).
    pub notes: Vec<String>,
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
        let widths = Widths::of(model, flags)?;
        let tp = flags.tp.max(1) as f64;
        let draft_weights_mib = draft.map_or(0.0, |d| {
            d.weight_bytes(Some(widths.served(d)), None) / tp / MIB
        });
        let weights_mib =
            model.weight_bytes(Some(widths.served(model)), widths.quant_bits) / tp / MIB
                + draft_weights_mib;
        let kv_bytes_per_token = kv_per_token(model, draft, flags, widths.kv_bytes);
        let gpu = gpu_mib as f64;
        let runtime_mib = flags.overhead_mib.unwrap_or(PRELOAD_MIB);
        let mut notes = Vec::new();
        let (fraction, fraction_given, fraction_origin) =
            fraction_of(model, flags, gpu_mib, &mut notes);
        let (budget_mib, reserve_mib) = budget_of(model, flags, gpu, (fraction, runtime_mib));
        let kv_mib = kv_room(flags, budget_mib - weights_mib, &mut notes);
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
            fraction_origin,
            runtime_mib,
            runtime_given: flags.overhead_mib.is_some(),
            reserve_mib,
            budget_mib,
            params: model.params(),
            weights_mib,
            draft_weights_mib,
            kv_bytes_per_token,
            kv_mib,
            kv_tokens,
            capped_by_max_total: kv_tokens < room,
            context,
            notes,
        })
    }

    /// The confidence margin of a refusal, in MiB (see [`MARGIN_SHARE`]).
    pub fn margin_mib(&self) -> f64 {
        (self.budget_mib.abs() * MARGIN_SHARE).max(MARGIN_FLOOR_MIB)
    }

    /// Whether the estimate is sure the server cannot load: its weights exceed the budget by
    /// more than the confidence margin. Short of that, a server that does not fit by the
    /// estimate is too close to call, and runs.
    pub fn sure_not_to_fit(&self) -> bool {
        -self.kv_mib > self.margin_mib()
    }

    /// Whether the weights fit the budget with room for any KV cache.
    pub fn fits(&self) -> bool {
        self.kv_tokens > 0
    }

    /// The smallest fraction that holds the weights (with nothing for the KV cache).
    pub fn min_fraction(&self) -> f64 {
        let gpu = self.gpu_mib as f64;
        match self.kind {
            ServerKind::Sglang => self.weights_mib / (gpu - self.runtime_mib),
            ServerKind::Vllm => (self.weights_mib + self.runtime_mib + self.reserve_mib) / gpu,
        }
    }

    /// Where the budget comes from, in words: the fraction and its origin, the GPU, what is
    /// lost before the load and (vLLM) what is kept inside the budget.
    fn budget_terms(&self) -> String {
        let flag = self.kind.fraction_flag();
        let origin = if self.fraction_given {
            String::new()
        } else {
            format!(", {}", self.fraction_origin)
        };
        let preload = if self.runtime_given {
            "as `preload-overhead` says"
        } else {
            "the default allowance; `preload-overhead` sets it"
        };
        let reserve = if self.reserve_mib > 0.0 {
            format!(
                ", and {} estimated for activations and CUDA graphs",
                gib(self.reserve_mib)
            )
        } else {
            String::new()
        };
        format!(
            "{flag} {}{origin}; of a {} GPU, {} lost before the weights load ({preload}){reserve}",
            self.fraction,
            gib(self.gpu_mib as f64),
            gib(self.runtime_mib),
        )
    }

    /// The numbers, in one paragraph of lines.
    pub fn describe(&self) -> String {
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
             budget: {} ({})\n",
            gib(self.weights_mib),
            self.params as f64,
            self.tp,
            gib(self.budget_mib),
            self.budget_terms(),
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
            let sure = if self.sure_not_to_fit() {
                "beyond"
            } else {
                "within"
            };
            s.push_str(&format!(
                "the weights alone exceed the budget by {}: no room for the KV cache ({sure} the estimate's confidence margin of {}, {}% of the budget)",
                gib(-self.kv_mib),
                gib(self.margin_mib()),
                MARGIN_SHARE * 100.0,
            ));
        }
        for note in &self.notes {
            s.push_str(&format!("\nnote: {note}"));
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
            d.contains("--mem-fraction-static 0.85; of a 44.99 GiB GPU, 1.00 GiB lost before the weights load (the default allowance; `preload-overhead` sets it)"),
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
            // 17275.5 MiB less 1 GiB before the load and 762.5 MiB of activations and
            // graphs leaves 173 MiB past the weights: about 1400 tokens.
            &flags("vllm serve /m --gpu-memory-utilization 0.375"),
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
        // SGLang's derived default on an L40S, its prefill graphs capped at the 1000 tokens
        // (37 capture sizes, not 50: see the default-fraction test below).
        assert_eq!(e.fraction, 0.845);
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
    fn sglangs_default_fraction_is_derived_from_the_gpu_and_said() {
        let e = Estimate::new(&llama(), None, &flags("sglang serve /m"), L40S).unwrap();
        // 7248 MiB kept out of 46068: round(38820 / 46068, 3).
        assert_eq!(e.fraction, 0.843);
        assert!(!e.fraction_given);
        let d = e.describe();
        assert!(
            d.contains("--mem-fraction-static 0.843, SGLang's default for this GPU: 7.08 GiB kept for activations and CUDA graphs (chunked prefill 4096, decode graphs up to 32)"),
            "{d}"
        );
        // A larger chunk keeps more out.
        let chunked = Estimate::new(
            &llama(),
            None,
            &flags("sglang serve /m --chunked-prefill-size 8192"),
            L40S,
        )
        .unwrap();
        assert!(chunked.fraction < e.fraction, "{}", chunked.fraction);
        // Flags with which SGLang keeps more back are noted.
        let dp = Estimate::new(
            &llama(),
            None,
            &flags("sglang serve /m --tp-size 2 --enable-dp-attention"),
            L40S,
        )
        .unwrap();
        assert!(
            dp.describe().contains(
                "note: with --enable-dp-attention SGLang keeps more memory back than its plain default"
            ),
            "{}",
            dp.describe()
        );
    }

    #[test]
    fn the_preload_overhead_the_step_gives_replaces_the_allowance() {
        let mut f = flags("sglang --model-path /m --mem-fraction-static 0.85");
        f.overhead_mib = Some(3072.0);
        let e = Estimate::new(&llama(), None, &f, L40S).unwrap();
        assert_eq!(e.budget_mib, (46068.0 - 3072.0) * 0.85);
        assert!(
            e.describe()
                .contains("3.00 GiB lost before the weights load (as `preload-overhead` says)"),
            "{}",
            e.describe()
        );
    }

    #[test]
    fn a_refusal_needs_the_weights_past_the_confidence_margin() {
        // 0.3 leaves 13.20 GiB for 14.96 GiB of weights: 1.76 GiB short, past 2% of the
        // budget (0.5 GiB, the floor).
        let short = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.3"),
            L40S,
        )
        .unwrap();
        assert!(short.sure_not_to_fit());
        assert!(
            short
                .describe()
                .contains("beyond the estimate's confidence margin of 0.50 GiB")
        );
        // 0.34 leaves 14.96 GiB - 0.2 GiB: not enough by the estimate, but within its margin.
        let close = Estimate::new(
            &llama(),
            None,
            &flags("sglang --model-path /m --mem-fraction-static 0.336"),
            L40S,
        )
        .unwrap();
        assert!(
            !close.fits() && !close.sure_not_to_fit(),
            "{}",
            close.kv_mib
        );
        assert!(
            close
                .describe()
                .contains("within the estimate's confidence margin")
        );
    }

    #[test]
    fn an_eagle_draft_adds_its_share_of_the_targets_cell() {
        let one_layer = ModelShape {
            layers: 1,
            ..llama()
        };
        let e = Estimate::new(
            &llama(),
            Some(&one_layer),
            &flags("sglang --model-path /m --speculative-algorithm EAGLE3 --speculative-draft-model-path /d"),
            L40S,
        )
        .unwrap();
        // 128 KiB for 32 layers, plus 1/32 of it.
        assert_eq!(e.kv_bytes_per_token, 131_072.0 + 4096.0);
        // Without an EAGLE-style algorithm the draft's own layers are counted (vLLM's way).
        let v = Estimate::new(
            &llama(),
            Some(&one_layer),
            &flags("vllm serve /m --spec-model /d"),
            L40S,
        )
        .unwrap();
        assert_eq!(v.kv_bytes_per_token, 131_072.0 + 4096.0);
    }

    #[test]
    fn vllms_explicit_kv_cache_bytes_size_the_cache_whatever_the_utilization() {
        let e = Estimate::new(
            &llama(),
            None,
            &flags("vllm serve /m --kv-cache-memory-bytes 8G"),
            L40S,
        )
        .unwrap();
        // 8 GiB (vLLM's `G` is binary) at 128 KiB a token.
        assert_eq!(e.kv_tokens, 65_536);
        assert!(
            e.describe()
                .contains("ignored: `--kv-cache-memory-bytes` sizes the KV cache")
        );
        let too_much = Estimate::new(
            &llama(),
            None,
            &flags("vllm serve /m --kv-cache-memory-bytes 40G"),
            L40S,
        )
        .unwrap();
        assert!(
            too_much.describe().contains("its allocation will fail"),
            "{}",
            too_much.describe()
        );
    }

    #[test]
    fn every_form_the_servers_take_that_gpuflow_cannot_size_is_not_estimated_with_its_reason() {
        for (line, reason) in [
            (
                "sglang --model-path /m --kv-cache-dtype nvfp4",
                "`--kv-cache-dtype nvfp4` is not a dtype gpuflow knows",
            ),
            (
                "sglang --model-path /m --kv-cache-dtype mxfp8",
                "`--kv-cache-dtype mxfp8` is not a dtype gpuflow knows",
            ),
            (
                "sglang --model-path /m --kv-cache-dtype fp4_mx_block16",
                "`--kv-cache-dtype fp4_mx_block16` is not a dtype gpuflow knows",
            ),
            (
                "vllm serve /m --kv-cache-dtype int8_per_token_head",
                "`--kv-cache-dtype int8_per_token_head` is not a dtype gpuflow knows",
            ),
            (
                "vllm serve /m --kv-cache-dtype turboquant_3bit",
                "`--kv-cache-dtype turboquant_3bit` is not a dtype gpuflow knows",
            ),
            (
                "vllm serve /m -q modelopt",
                "`--quantization modelopt` is not a method gpuflow knows the size of",
            ),
            (
                "vllm serve /m --quantization compressed-tensors",
                "`--quantization compressed-tensors` is not a method gpuflow knows the size of",
            ),
            (
                "vllm serve /m --quantization gguf",
                "`--quantization gguf` is not a method gpuflow knows the size of",
            ),
            (
                "sglang --model-path /m --quantization moe_wna16",
                "`--quantization moe_wna16` is not a method gpuflow knows the size of",
            ),
            (
                "vllm serve /m --quantization quark",
                "`--quantization quark` is not a method gpuflow knows the size of",
            ),
        ] {
            let e = Estimate::new(&llama(), None, &flags(line), L40S).unwrap_err();
            assert_eq!(e, reason, "{line}");
        }
        // The plain ones are known.
        for dtype in ["fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"] {
            let line = format!("vllm serve /m --kv-cache-dtype {dtype}");
            assert!(
                Estimate::new(&llama(), None, &flags(&line), L40S).is_ok(),
                "{dtype}"
            );
        }
        // A method that only names the kernel for a checkpoint that says its width is sized
        // by the checkpoint.
        let mut fp8_checkpoint = llama();
        fp8_checkpoint.quant_bits = Some(8.0);
        let e = Estimate::new(
            &fp8_checkpoint,
            None,
            &flags("vllm serve /m --quantization compressed-tensors"),
            L40S,
        )
        .unwrap();
        assert!(e.weights_mib < 9000.0, "{}", e.weights_mib);
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
