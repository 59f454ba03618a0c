//! A model's shape from its Hugging Face `config.json`: what its weights weigh and what one
//! token of KV cache costs. Dense and mixture-of-experts decoders, grouped-query and
//! DeepSeek's latent (MLA) attention; a multimodal config's `text_config` stands for the model
//! (the vision tower is left out: a small part of such models).

use serde_json::Value;

/// The sizes the memory estimate needs, read from `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub hidden_size: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab_size: u64,
    pub intermediate_size: u64,
    pub tied_embeddings: bool,
    /// `torch_dtype` (or `dtype`): bytes per weight as stored, before any quantization.
    pub dtype_bytes: f64,
    /// The checkpoint's quantization (`quantization_config`): bits per linear weight.
    pub quant_bits: Option<f64>,
    pub moe: Option<Moe>,
    pub mla: Option<Mla>,
    /// `max_position_embeddings`: the model's own context length.
    pub max_context: Option<u64>,
}

/// Mixture-of-experts layers.
#[derive(Clone, Debug, PartialEq)]
pub struct Moe {
    pub experts: u64,
    pub expert_intermediate: u64,
    /// Shared experts' total intermediate size (0: none).
    pub shared_intermediate: u64,
    /// Leading layers that stay dense (`first_k_dense_replace`).
    pub dense_layers: u64,
    /// Experts each token goes to (`num_experts_per_tok`, Mixtral's too), for activations.
    pub active: u64,
}

/// DeepSeek's multi-head latent attention.
#[derive(Clone, Debug, PartialEq)]
pub struct Mla {
    pub q_lora_rank: Option<u64>,
    pub kv_lora_rank: u64,
    pub qk_nope_head_dim: u64,
    pub qk_rope_head_dim: u64,
    pub v_head_dim: u64,
}

fn uint(c: &Value, key: &str) -> Option<u64> {
    c.get(key).and_then(Value::as_u64)
}

fn need(c: &Value, key: &str) -> Result<u64, String> {
    uint(c, key).ok_or_else(|| format!("`{key}` is missing or not a whole number"))
}

/// Bytes per element of a torch dtype name (`bfloat16`, `torch.float16`, `fp8_e4m3`, `half`).
pub fn dtype_bytes(name: &str) -> Option<f64> {
    let name = name
        .trim()
        .trim_start_matches("torch.")
        .to_ascii_lowercase();
    Some(match name.as_str() {
        "float32" | "float" | "fp32" => 4.0,
        "bfloat16" | "bf16" | "float16" | "half" | "fp16" => 2.0,
        n if n.starts_with("fp8") || n.starts_with("float8") || n == "int8" => 1.0,
        n if n.starts_with("fp4") || n == "int4" => 0.5,
        _ => return None,
    })
}

/// Bits per weight of a `quantization_config`, or of a server's `--quantization` method.
/// Read where the servers read them: awq/gptq's `bits` (`w_bit`, `weight_bits`);
/// compressed-tensors' `config_groups.*.weights.num_bits` (the widest group, so the estimate
/// never undercounts; vLLM's `compressed_tensors.py`); ModelOpt's `quant_algo`, at the top or
/// under `quantization` (`FP8*`, `MXFP8`: 8 bits; `NVFP4`, `W4A16_NVFP4`: 4; vLLM's
/// `modelopt.py` `LINEAR_ALGOS`; `MIXED_PRECISION` has no one width).
pub fn quant_bits(method: &str, config: Option<&Value>) -> Option<f64> {
    let given = config.and_then(|q| {
        ["bits", "weight_bits", "w_bit"]
            .iter()
            .find_map(|k| q.get(*k).and_then(Value::as_u64))
    });
    if let Some(bits) = given {
        return Some(bits as f64);
    }
    let groups = config
        .and_then(|q| q.get("config_groups"))
        .and_then(Value::as_object)
        .and_then(|groups| {
            groups
                .values()
                .filter_map(|g| g.get("weights")?.get("num_bits")?.as_u64())
                .max()
        });
    if let Some(bits) = groups {
        return Some(bits as f64);
    }
    let algo = config.and_then(|q| {
        q.get("quant_algo")
            .or_else(|| q.get("quantization")?.get("quant_algo"))
            .and_then(Value::as_str)
    });
    if let Some(algo) = algo {
        let algo = algo.to_ascii_uppercase();
        return match algo.as_str() {
            a if a.starts_with("FP8") || a == "MXFP8" => Some(8.0),
            "NVFP4" | "W4A16_NVFP4" => Some(4.0),
            _ => None,
        };
    }
    let method = method.to_ascii_lowercase();
    Some(match method.as_str() {
        m if m.contains("fp8") || m == "w8a8_int8" || m == "int8" => 8.0,
        m if m.contains("fp4") || m.contains("awq") || m.contains("gptq") => 4.0,
        "bitsandbytes" => 4.0,
        _ => return None,
    })
}

impl ModelShape {
    /// Reads `config.json`'s text; every problem says which field.
    pub fn from_config_json(text: &str) -> Result<Self, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let c = match (root.get("hidden_size"), root.get("text_config")) {
            (None, Some(text)) => text,
            _ => &root,
        };
        let hidden_size = need(c, "hidden_size")?;
        let heads = need(c, "num_attention_heads")?;
        if heads == 0 {
            return Err("`num_attention_heads` is 0".into());
        }
        let dtype_name = ["torch_dtype", "dtype"]
            .iter()
            .find_map(|k| c.get(*k).or_else(|| root.get(*k)).and_then(Value::as_str))
            .unwrap_or("bfloat16");
        let quant = root
            .get("quantization_config")
            .or_else(|| c.get("quantization_config"));
        // A quantization whose width is not known is said, never costed at the dtype's (2–4×
        // the checkpoint's size would refuse servers that fit).
        let quant_bits = match quant {
            None => None,
            Some(q) => {
                let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("");
                Some(quant_bits(method, Some(q)).ok_or_else(|| {
                    format!(
                        "the checkpoint's `quantization_config` (`quant_method: {method}`) gives no weight width gpuflow can read"
                    )
                })?)
            }
        };
        let experts = ["n_routed_experts", "num_local_experts", "num_experts"]
            .iter()
            .find_map(|k| uint(c, k))
            .unwrap_or(0);
        let intermediate_size = need(c, "intermediate_size")?;
        let moe = (experts > 0).then(|| Moe {
            experts,
            expert_intermediate: uint(c, "moe_intermediate_size").unwrap_or(intermediate_size),
            shared_intermediate: uint(c, "shared_expert_intermediate_size").unwrap_or_else(|| {
                uint(c, "n_shared_experts").unwrap_or(0)
                    * uint(c, "moe_intermediate_size").unwrap_or(intermediate_size)
            }),
            dense_layers: uint(c, "first_k_dense_replace").unwrap_or(0),
            // Without it, every expert: the activation estimate errs large.
            active: uint(c, "num_experts_per_tok").unwrap_or(experts),
        });
        let mla = uint(c, "kv_lora_rank").map(|kv_lora_rank| Mla {
            q_lora_rank: uint(c, "q_lora_rank"),
            kv_lora_rank,
            qk_nope_head_dim: uint(c, "qk_nope_head_dim").unwrap_or(128),
            qk_rope_head_dim: uint(c, "qk_rope_head_dim").unwrap_or(64),
            v_head_dim: uint(c, "v_head_dim").unwrap_or(128),
        });
        Ok(Self {
            hidden_size,
            layers: need(c, "num_hidden_layers")?,
            heads,
            kv_heads: uint(c, "num_key_value_heads").unwrap_or(heads),
            head_dim: uint(c, "head_dim").unwrap_or(hidden_size / heads),
            vocab_size: need(c, "vocab_size")?,
            intermediate_size,
            tied_embeddings: c
                .get("tie_word_embeddings")
                .or_else(|| root.get("tie_word_embeddings"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            dtype_bytes: dtype_bytes(dtype_name).ok_or_else(|| {
                format!("`torch_dtype` `{dtype_name}` is not a dtype gpuflow knows")
            })?,
            quant_bits,
            moe,
            mla,
            max_context: uint(c, "max_position_embeddings"),
        })
    }

    /// Parameters of the attention of one layer.
    fn attention_params(&self) -> u64 {
        let h = self.hidden_size;
        match &self.mla {
            Some(m) => {
                let qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
                let q = match m.q_lora_rank {
                    Some(r) => h * r + r * self.heads * qk,
                    None => h * self.heads * qk,
                };
                let kv = h * (m.kv_lora_rank + m.qk_rope_head_dim)
                    + m.kv_lora_rank * self.heads * (m.qk_nope_head_dim + m.v_head_dim);
                q + kv + self.heads * m.v_head_dim * h
            }
            None => {
                let q_and_o = 2 * h * self.heads * self.head_dim;
                q_and_o + 2 * h * self.kv_heads * self.head_dim
            }
        }
    }

    /// Parameters of the feed-forward part of every layer together (gated: 3 matrices).
    fn mlp_params(&self) -> u64 {
        let h = self.hidden_size;
        let dense = 3 * h * self.intermediate_size;
        match &self.moe {
            None => self.layers * dense,
            Some(m) => {
                let dense_layers = m.dense_layers.min(self.layers);
                let sparse = m.experts * 3 * h * m.expert_intermediate
                    + 3 * h * m.shared_intermediate
                    + h * m.experts;
                dense_layers * dense + (self.layers - dense_layers) * sparse
            }
        }
    }

    /// The embedding and, unless tied, the output head.
    fn embedding_params(&self) -> u64 {
        let one = self.vocab_size * self.hidden_size;
        if self.tied_embeddings { one } else { 2 * one }
    }

    /// All parameters (norms included).
    pub fn params(&self) -> u64 {
        let norms = (2 * self.layers + 1) * self.hidden_size;
        self.embedding_params() + self.layers * self.attention_params() + self.mlp_params() + norms
    }

    /// Bytes of all weights: linear layers at `quant_bits` (the server's, else the
    /// checkpoint's) when quantized, the rest at `dtype_bytes` (the server's `--dtype`, else
    /// the checkpoint's).
    pub fn weight_bytes(&self, dtype_bytes: Option<f64>, quant_bits: Option<f64>) -> f64 {
        let dtype = dtype_bytes.unwrap_or(self.dtype_bytes);
        let rest = (self.embedding_params() + (2 * self.layers + 1) * self.hidden_size) as f64;
        let linear = (self.params() as f64) - rest;
        let linear_bytes = match quant_bits.or(self.quant_bits) {
            Some(bits) => bits / 8.0,
            None => dtype,
        };
        rest * dtype + linear * linear_bytes
    }

    /// Bytes of KV cache one token takes on each of `tp` GPUs at `kv_bytes` per element. Key
    /// and value heads are split across the GPUs as both servers count them,
    /// `max(1, heads // tp)` (SGLang's and vLLM's `get_num_kv_heads`: one each when there are
    /// fewer heads than GPUs); MLA's latent is one vector per layer, on every GPU.
    pub fn kv_bytes_per_token(&self, tp: u64, kv_bytes: f64) -> f64 {
        let per_layer = match &self.mla {
            Some(m) => (m.kv_lora_rank + m.qk_rope_head_dim) as f64,
            None => {
                let heads = (self.kv_heads / tp.max(1)).max(1);
                (2 * heads * self.head_dim) as f64
            }
        };
        per_layer * self.layers as f64 * kv_bytes
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn quantized_checkpoints_are_read_as_the_servers_read_them() {
        let shape = |quant: &str| {
            ModelShape::from_config_json(&format!(
                r#"{{"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 1000, "intermediate_size": 14336, "quantization_config": {quant}}}"#
            ))
            .map(|m| m.quant_bits)
        };
        // compressed-tensors: the widest of its config groups' weights.
        assert_eq!(
            shape(
                r#"{"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}}}"#
            ),
            Ok(Some(8.0))
        );
        assert_eq!(
            shape(
                r#"{"quant_method": "compressed-tensors", "config_groups": {"a": {"weights": {"num_bits": 4}}, "b": {"weights": {"num_bits": 8}}}}"#
            ),
            Ok(Some(8.0))
        );
        // ModelOpt: its algorithm, at the top or under `quantization`.
        assert_eq!(
            shape(r#"{"quant_method": "modelopt", "quant_algo": "NVFP4"}"#),
            Ok(Some(4.0))
        );
        assert_eq!(
            shape(
                r#"{"quant_method": "modelopt", "quantization": {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}}"#
            ),
            Ok(Some(8.0))
        );
        assert_eq!(
            shape(r#"{"quant_method": "awq", "bits": 4}"#),
            Ok(Some(4.0))
        );
        // A width it cannot read is said, not costed at 16 bits.
        let unknown = shape(r#"{"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}"#);
        assert!(
            unknown
                .as_ref()
                .is_err_and(|e| e.contains("quant_method: modelopt")),
            "{unknown:?}"
        );
    }

    /// meta-llama/Meta-Llama-3-8B's config.json, as published.
    pub(crate) const LLAMA3_8B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
      "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
      "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
      "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
      "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
      "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0", "use_cache": true,
      "vocab_size": 128256
    }"#;

    /// deepseek-ai/DeepSeek-V3's config.json, the fields that size it.
    const DEEPSEEK_V3: &str = r#"{
      "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
      "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
      "n_shared_experts": 1, "n_routed_experts": 256, "first_k_dense_replace": 3,
      "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
      "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
      "max_position_embeddings": 163840, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16",
      "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
        "quant_method": "fp8", "weight_block_size": [128, 128]}
    }"#;

    /// Qwen/Qwen3-30B-A3B's config.json, the fields that size it.
    const QWEN3_30B_A3B: &str = r#"{
      "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
      "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
      "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
      "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "max_position_embeddings": 40960
    }"#;

    fn near(got: f64, want: f64, within: f64) -> bool {
        ((got - want) / want).abs() < within
    }

    #[test]
    fn llama_3_8b_has_8_billion_parameters_and_its_kv_per_token() {
        let m = ModelShape::from_config_json(LLAMA3_8B).unwrap();
        assert_eq!(m.params(), 8_030_261_248);
        assert_eq!(m.weight_bytes(None, None), 2.0 * 8_030_261_248.0);
        // 32 layers × (K and V) × 8 heads × 128 × 2 bytes.
        assert_eq!(m.kv_bytes_per_token(1, 2.0), 131_072.0);
        // Split over 2 GPUs; over 16, each GPU still holds one head.
        assert_eq!(m.kv_bytes_per_token(2, 2.0), 65_536.0);
        assert_eq!(m.kv_bytes_per_token(16, 2.0), 16_384.0);
        assert_eq!(m.max_context, Some(8192));
        // Heads TP does not divide: both servers floor (`max(1, heads // tp)`), so 6 heads
        // over 4 GPUs are 1 each, not 2.
        let six = ModelShape { kv_heads: 6, ..m };
        assert_eq!(six.kv_bytes_per_token(4, 2.0), 16_384.0);
    }

    #[test]
    fn deepseek_v3_has_671_billion_parameters_in_fp8() {
        let m = ModelShape::from_config_json(DEEPSEEK_V3).unwrap();
        assert!(near(m.params() as f64, 671e9, 0.01), "{}", m.params());
        assert_eq!(m.quant_bits, Some(8.0));
        // About 1 byte per weight, the embeddings in bf16.
        let gb = m.weight_bytes(None, None) / 1e9;
        assert!((670.0..690.0).contains(&gb), "{gb}");
        // MLA: (512 + 64) × 61 layers, the same on every GPU.
        assert_eq!(m.kv_bytes_per_token(8, 2.0), 576.0 * 61.0 * 2.0);
    }

    #[test]
    fn qwen3_30b_a3b_has_30_billion_parameters() {
        let m = ModelShape::from_config_json(QWEN3_30B_A3B).unwrap();
        assert!(near(m.params() as f64, 30.5e9, 0.01), "{}", m.params());
    }

    #[test]
    fn a_missing_field_and_an_unknown_dtype_are_named() {
        let e = ModelShape::from_config_json(r#"{"hidden_size": 8}"#).unwrap_err();
        assert!(e.contains("`num_attention_heads`"), "{e}");
        let e =
            ModelShape::from_config_json(&LLAMA3_8B.replace("bfloat16", "float64")).unwrap_err();
        assert!(e.contains("`float64`"), "{e}");
        assert!(
            ModelShape::from_config_json("{")
                .unwrap_err()
                .starts_with("not valid JSON")
        );
    }

    #[test]
    fn a_multimodal_config_is_read_through_its_text_config() {
        let wrapped = format!(r#"{{"model_type": "x", "text_config": {LLAMA3_8B}}}"#);
        let m = ModelShape::from_config_json(&wrapped).unwrap();
        assert_eq!(m.params(), 8_030_261_248);
    }
}
