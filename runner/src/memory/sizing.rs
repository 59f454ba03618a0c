//! The pieces of an estimate as each server sizes them (docs/memory.md): the widths it stores
//! weights and KV cache at, the KV bytes of one token with a draft's share, the fraction it
//! uses (given, or its own default), the budget that leaves and the KV cache's room in it.
//! [`super::Estimate`] puts them together and says them.

use super::flags::{ServerFlags, ServerKind};
use super::model::{ModelShape, dtype_bytes, quant_bits};
use super::{sglang, vllm};

pub(super) const MIB: f64 = 1024.0 * 1024.0;

/// MiB as GiB with two decimals, for messages.
pub(super) fn gib(mib: f64) -> String {
    format!("{:.2} GiB", mib / 1024.0)
}

/// Bytes per element of a KV cache dtype whose cost is one element per value: 16-bit, fp8
/// (`fp8`, `fp8_e4m3`, `fp8_e5m2`) and float32. Block-scaled and per-head formats (SGLang's
/// `nvfp4`, `mxfp8`, `fp4_mx_block16`; vLLM's `int8_per_token_head`, `turboquant_*`) carry
/// scale buffers the servers size by their own rules: not known here.
fn kv_dtype_bytes(name: &str) -> Option<f64> {
    let lower = name.trim().to_ascii_lowercase();
    let plain = matches!(lower.as_str(), "fp8" | "fp8_e4m3" | "fp8_e5m2")
        || matches!(dtype_bytes(&lower), Some(b) if b >= 2.0);
    plain.then(|| dtype_bytes(&lower)).flatten()
}

/// The widths the server stores things at: `--dtype` (none for the checkpoint's), the
/// linear layers' bits when quantized, and the KV cache's bytes per element.
pub(super) struct Widths {
    pub dtype: Option<f64>,
    pub quant_bits: Option<f64>,
    pub kv_bytes: f64,
}

impl Widths {
    pub(super) fn of(model: &ModelShape, flags: &ServerFlags) -> Result<Self, String> {
        let dtype = match &flags.dtype {
            None => None,
            Some(d) => Some(
                dtype_bytes(d)
                    .ok_or_else(|| format!("`--dtype {d}` is not a dtype gpuflow knows"))?,
            ),
        };
        // A quantized checkpoint's own width wins (`--quantization awq_marlin` or
        // `compressed-tensors` on such a checkpoint only names the kernel); else the method's.
        let quant_bits = match &flags.quantization {
            None => None,
            Some(q) => Some(
                model
                    .quant_bits
                    .or_else(|| quant_bits(q, None))
                    .ok_or_else(|| {
                        format!("`--quantization {q}` is not a method gpuflow knows the size of")
                    })?,
            ),
        };
        let mut widths = Self {
            dtype,
            quant_bits,
            kv_bytes: 0.0,
        };
        widths.kv_bytes = match &flags.kv_cache_dtype {
            None => widths.served(model),
            Some(d) => kv_dtype_bytes(d)
                .ok_or_else(|| format!("`--kv-cache-dtype {d}` is not a dtype gpuflow knows"))?,
        };
        Ok(widths)
    }

    /// Bytes per weight `m` is served at: `auto` serves a float32 checkpoint in 16 bits, as
    /// both servers do.
    pub(super) fn served(&self, m: &ModelShape) -> f64 {
        self.dtype.unwrap_or(m.dtype_bytes.min(2.0))
    }
}

/// The KV cache bytes of one token on each GPU, the draft's included: SGLang sizes an
/// EAGLE-style draft as a share of the target's cell; otherwise the draft's layers get their
/// own KV cache of their own shape.
pub(super) fn kv_per_token(
    model: &ModelShape,
    draft: Option<&ModelShape>,
    flags: &ServerFlags,
    kv_bytes: f64,
) -> f64 {
    match (flags.kind, draft) {
        (ServerKind::Sglang, Some(d)) if flags.sglang.eagle_like() => {
            sglang::cell_bytes(model, flags.tp, kv_bytes, Some(d.layers))
        }
        _ => {
            model.kv_bytes_per_token(flags.tp, kv_bytes)
                + draft.map_or(0.0, |d| d.kv_bytes_per_token(flags.tp, kv_bytes))
        }
    }
}

/// The fraction the server uses, whether it was given, and how a default came about; notes
/// what the derivation leaves out.
pub(super) fn fraction_of(
    model: &ModelShape,
    flags: &ServerFlags,
    gpu_mib: u64,
    notes: &mut Vec<String>,
) -> (f64, bool, String) {
    match (flags.fraction, flags.kind) {
        (Some(f), _) => (f, true, String::new()),
        (None, ServerKind::Sglang) => {
            let d = sglang::default_fraction(
                &flags.sglang,
                gpu_mib,
                flags.tp,
                model.mla.is_some(),
                (&flags.model, flags.max_total_tokens),
            );
            if !flags.sglang.beyond.is_empty() {
                notes.push(format!(
                    "with {} SGLang keeps more memory back than its plain default; the estimate is high",
                    flags.sglang.beyond.join(", ")
                ));
            }
            let origin = format!(
                "SGLang's default for this GPU: {} kept for activations and CUDA graphs (chunked prefill {}, decode graphs up to {})",
                gib(d.reserved_mib),
                d.chunked_prefill,
                d.decode_max_bs
            );
            (d.fraction, false, origin)
        }
        (None, ServerKind::Vllm) if flags.vllm.kv_cache_memory_bytes.is_some() => (
            1.0,
            false,
            "ignored: `--kv-cache-memory-bytes` sizes the KV cache".to_string(),
        ),
        (None, ServerKind::Vllm) => (
            vllm::DEFAULT_UTILIZATION,
            false,
            vllm::DEFAULT_ORIGIN.to_string(),
        ),
    }
}

/// What the fraction allows for weights and KV cache, and (vLLM) the activations and graphs
/// estimated inside it.
pub(super) fn budget_of(
    model: &ModelShape,
    flags: &ServerFlags,
    gpu: f64,
    (fraction, preload): (f64, f64),
) -> (f64, f64) {
    match flags.kind {
        ServerKind::Sglang => ((gpu - preload) * fraction, 0.0),
        ServerKind::Vllm => {
            let reserve = vllm::in_budget_reserve_mib(model, &flags.vllm, flags.tp, gpu);
            // `--kv-cache-memory-bytes` sizes the KV cache itself and vLLM ignores the
            // utilization: the weights then have the whole GPU.
            let requested = match flags.vllm.kv_cache_memory_bytes {
                Some(_) => gpu,
                None => vllm::requested_mib(gpu, fraction),
            };
            (requested - preload - reserve, reserve)
        }
    }
}

/// The KV cache's MiB: what the budget leaves after the weights, or what vLLM's
/// `--kv-cache-memory-bytes` asks for when the weights fit (noted when the GPU lacks it).
pub(super) fn kv_room(flags: &ServerFlags, left: f64, notes: &mut Vec<String>) -> f64 {
    let asked = match flags.kind {
        ServerKind::Vllm => flags.vllm.kv_cache_memory_bytes.map(|b| b as f64 / MIB),
        ServerKind::Sglang => None,
    };
    match asked {
        Some(asked) if left > 0.0 => {
            if asked > left {
                notes.push(format!(
                    "`--kv-cache-memory-bytes` asks for {} of KV cache, {} more than the GPU has left after the weights: its allocation will fail",
                    gib(asked),
                    gib(asked - left)
                ));
            }
            asked
        }
        _ => left,
    }
}
