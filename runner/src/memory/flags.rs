//! A server's memory flags read from its command line: SGLang's (`--mem-fraction-static`,
//! `--max-total-tokens`, `--context-length`, `--speculative-draft-model-path`) and vLLM's
//! (`--gpu-memory-utilization`, `--max-model-len`), with the tensor-parallel size, the model's
//! folder, the dtypes and the quantization. Both `--flag value` and `--flag=value`.
//! `gpuflow-sim` takes SGLang's flags, so it is read as SGLang.

pub use super::kind::ServerKind;
use super::sglang::SglangSizing;
use super::vllm::VllmSizing;
use super::words::{number, tokens, value};

/// What the memory estimate reads from a server's command line.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerFlags {
    pub kind: ServerKind,
    /// The model's folder (`--model-path`, `--model`, or `vllm serve PATH` / `sglang serve PATH`).
    pub model: String,
    /// The speculative draft model's folder: SGLang's `--speculative-draft-model-path`, vLLM's
    /// `--speculative-config` `model` or `--spec-model`.
    pub draft_model: Option<String>,
    pub tp: u64,
    /// `--mem-fraction-static` / `--gpu-memory-utilization`, when given.
    pub fraction: Option<f64>,
    pub max_total_tokens: Option<u64>,
    /// `--context-length` / `--max-model-len`, when given.
    pub context: Option<u64>,
    /// `--dtype` (none for `auto`).
    pub dtype: Option<String>,
    /// `--kv-cache-dtype` (none for `auto`).
    pub kv_cache_dtype: Option<String>,
    /// `--quantization`.
    pub quantization: Option<String>,
    /// What SGLang derives its default `--mem-fraction-static` from (defaults for vLLM).
    pub sglang: SglangSizing,
    /// What sizes vLLM's profiling pass (defaults for SGLang).
    pub vllm: VllmSizing,
    /// The memory each GPU loses before the weights load (CUDA context, NCCL and all-reduce
    /// buffers), when the step says it (`start-container`'s `preload-overhead`).
    pub overhead_mib: Option<f64>,
}

/// The draft model of a vLLM speculative config: `--speculative-config '{"model": …}'`
/// (`-sc`), else `--spec-model`.
fn vllm_draft(words: &[String]) -> Option<String> {
    let config = value(words, &["--speculative-config", "-sc"])
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .and_then(|c| c.get("model").and_then(|m| m.as_str()).map(String::from));
    config.or_else(|| value(words, &["--spec-model"]).map(String::from))
}

fn auto(v: Option<&str>) -> Option<String> {
    v.filter(|v| *v != "auto").map(String::from)
}

/// The kind of server `words` starts, when it is one gpuflow knows the memory rules of.
fn kind_of(words: &[String]) -> Option<ServerKind> {
    let has = |flag: &str| {
        words
            .iter()
            .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
    };
    let mentions = |what: &str| words.iter().any(|w| w.contains(what));
    if mentions("sglang") || mentions("gpuflow-sim") || has("--mem-fraction-static") {
        Some(ServerKind::Sglang)
    } else if mentions("vllm") || has("--gpu-memory-utilization") {
        Some(ServerKind::Vllm)
    } else {
        None
    }
}

impl ServerFlags {
    /// The memory flags of the server `words` starts: `Ok(None)` for a command that is not an
    /// SGLang or vLLM server or names no model; `Err` for a flag whose value is not a number.
    pub fn parse(words: &[String]) -> Result<Option<Self>, String> {
        let Some(kind) = kind_of(words) else {
            return Ok(None);
        };
        let serve_arg = words
            .iter()
            .position(|w| w == "serve")
            .and_then(|i| words.get(i + 1))
            .filter(|w| !w.starts_with('-'))
            .map(String::as_str);
        // `vllm serve MODEL` and `sglang serve MODEL` both take it first.
        let model = match kind {
            ServerKind::Sglang => value(words, &["--model-path", "--model"]).or(serve_arg),
            ServerKind::Vllm => value(words, &["--model"]).or(serve_arg),
        };
        let Some(model) = model else {
            return Ok(None);
        };
        // `--tp` is not a declared SGLang flag: argparse accepts it as the only abbreviation of
        // `--tp-size`, and older workflows still write it, so it is read as well.
        let tp = number(
            words,
            &["--tp-size", "--tp", "--tensor-parallel-size", "-tp"],
        )?;
        if tp == Some(0) {
            return Err("the tensor-parallel size is 0".into());
        }
        let (fraction, context) = match kind {
            ServerKind::Sglang => (
                number(words, &["--mem-fraction-static"])?,
                tokens(kind, words, &["--context-length"])?,
            ),
            ServerKind::Vllm => (
                number(
                    words,
                    &["--gpu-memory-utilization", "--device-memory-utilization"],
                )?,
                tokens(kind, words, &["--max-model-len"])?,
            ),
        };
        if let Some(f) = fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return Err(format!(
                "`{}` is {f}; it is a share of the GPU's memory, above 0 and at most 1",
                kind.fraction_flag()
            ));
        }
        Ok(Some(Self {
            kind,
            model: model.to_string(),
            draft_model: match kind {
                ServerKind::Sglang => value(
                    words,
                    &[
                        "--speculative-draft-model-path",
                        "--speculative-draft-model",
                    ],
                )
                .map(String::from),
                ServerKind::Vllm => vllm_draft(words),
            },
            tp: tp.unwrap_or(1),
            fraction,
            max_total_tokens: tokens(kind, words, &["--max-total-tokens"])?,
            context,
            dtype: auto(value(words, &["--dtype"])),
            kv_cache_dtype: auto(value(words, &["--kv-cache-dtype"])),
            quantization: value(words, &["--quantization", "-q"]).map(String::from),
            sglang: match kind {
                ServerKind::Sglang => SglangSizing::parse(words)?,
                ServerKind::Vllm => SglangSizing::default(),
            },
            vllm: match kind {
                ServerKind::Vllm => VllmSizing::parse(words)?,
                ServerKind::Sglang => VllmSizing::default(),
            },
            overhead_mib: None,
        }))
    }

    /// The model's `config.json` in the container, when the model is a folder there (not a
    /// Hugging Face id, which the server downloads).
    pub fn config_path(model: &str) -> Option<String> {
        model
            .starts_with('/')
            .then(|| format!("{}/config.json", model.trim_end_matches('/')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::words::token_count;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test_case::test_case(ServerKind::Vllm, "32k", Some(Some(32_000)) ; "vllm decimal k")]
    #[test_case::test_case(ServerKind::Vllm, "32K", Some(Some(32_768)) ; "vllm binary K")]
    #[test_case::test_case(ServerKind::Vllm, "25.6k", Some(Some(25_600)) ; "vllm decimal fraction")]
    #[test_case::test_case(ServerKind::Vllm, "1M", Some(Some(1_048_576)) ; "vllm binary M")]
    #[test_case::test_case(ServerKind::Vllm, "1.5K", None ; "vllm no decimals with binary")]
    #[test_case::test_case(ServerKind::Vllm, "auto", Some(None) ; "vllm auto")]
    #[test_case::test_case(ServerKind::Vllm, "-1", Some(None) ; "vllm minus one")]
    #[test_case::test_case(ServerKind::Sglang, "128k", Some(Some(128_000)) ; "sglang si k")]
    #[test_case::test_case(ServerKind::Sglang, "1M", Some(Some(1_000_000)) ; "sglang si M")]
    #[test_case::test_case(ServerKind::Sglang, "128Ki", Some(Some(131_072)) ; "sglang iec Ki")]
    #[test_case::test_case(ServerKind::Sglang, "128K", None ; "sglang case sensitive")]
    #[test_case::test_case(ServerKind::Sglang, "auto", None ; "sglang has no auto")]
    #[test_case::test_case(ServerKind::Sglang, "32768", Some(Some(32_768)) ; "plain")]
    fn token_counts_as_the_servers_read_them(
        kind: ServerKind,
        text: &str,
        expected: Option<Option<u64>>,
    ) {
        assert_eq!(token_count(kind, text), expected);
    }

    #[test]
    fn every_form_the_servers_take_is_read() {
        let f = ServerFlags::parse(&words(
            "sglang serve /models/qwen --context-length 128k --max-total-tokens 1M",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(f.model, "/models/qwen");
        assert_eq!(
            (f.context, f.max_total_tokens),
            (Some(128_000), Some(1_000_000))
        );
        let f = ServerFlags::parse(&words(
            "vllm serve /models/qwen --max-model-len 32K --device-memory-utilization 0.8 -q fp8 \
             --speculative-config {\"method\":\"eagle3\",\"model\":\"/models/eagle\",\"num_speculative_tokens\":3}",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(f.context, Some(32_768));
        assert_eq!(f.fraction, Some(0.8));
        assert_eq!(f.quantization.as_deref(), Some("fp8"));
        assert_eq!(f.draft_model.as_deref(), Some("/models/eagle"));
        let f = ServerFlags::parse(&words("vllm serve /m --max-model-len auto --spec-model /d"))
            .unwrap()
            .unwrap();
        assert_eq!((f.context, f.draft_model.as_deref()), (None, Some("/d")));
    }

    #[test]
    fn sglang_flags_in_both_forms() {
        let f = ServerFlags::parse(&words(
            "python3 -m sglang.launch_server --model-path /models/qwen --tp 8 \
             --mem-fraction-static=0.55 --context-length 32768 --max-total-tokens 100000 \
             --kv-cache-dtype fp8_e4m3 --dtype auto --speculative-draft-model-path /models/eagle",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(f.kind, ServerKind::Sglang);
        assert_eq!(f.model, "/models/qwen");
        assert_eq!(f.draft_model.as_deref(), Some("/models/eagle"));
        assert_eq!((f.tp, f.fraction), (8, Some(0.55)));
        assert_eq!(
            (f.context, f.max_total_tokens),
            (Some(32768), Some(100_000))
        );
        assert_eq!(f.kv_cache_dtype.as_deref(), Some("fp8_e4m3"));
        assert_eq!(f.dtype, None);
    }

    #[test]
    fn vllm_serve_takes_the_model_as_its_argument() {
        let f = ServerFlags::parse(&words(
            "vllm serve /models/llama --tensor-parallel-size=2 --gpu-memory-utilization 0.8 --max-model-len=8192",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(f.kind, ServerKind::Vllm);
        assert_eq!(f.model, "/models/llama");
        assert_eq!((f.tp, f.fraction, f.context), (2, Some(0.8), Some(8192)));
    }

    #[test]
    fn other_commands_and_servers_without_a_model_are_not_read() {
        assert_eq!(ServerFlags::parse(&words("sleep 600")).unwrap(), None);
        assert_eq!(
            ServerFlags::parse(&words("gpuflow-sim --port 30000")).unwrap(),
            None
        );
        assert_eq!(ServerFlags::parse(&[]).unwrap(), None);
    }

    #[test]
    fn bad_numbers_are_said_with_the_flag() {
        let e = ServerFlags::parse(&words("sglang --model-path /m --mem-fraction-static x"))
            .unwrap_err();
        assert_eq!(e, "`--mem-fraction-static` is `x`, not a number");
        let e =
            ServerFlags::parse(&words("vllm serve /m --gpu-memory-utilization 1.5")).unwrap_err();
        assert!(e.contains("at most 1"), "{e}");
    }

    #[test]
    fn a_model_folder_has_a_config_and_an_id_has_none() {
        assert_eq!(
            ServerFlags::config_path("/models/x/").as_deref(),
            Some("/models/x/config.json")
        );
        assert_eq!(ServerFlags::config_path("meta-llama/Llama-3-8B"), None);
    }
}
