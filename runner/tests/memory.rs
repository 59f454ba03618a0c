//! The memory preflight of model servers (docs/memory.md), on the real Docker engine with the
//! simulator image: a `config.json` (Llama-3-8B's) in the workspace, mounted at /models, and
//! the shipped stand-in inventory (NVIDIA L40S, 46068 MiB) as the job's GPUs. A share too
//! small for the weights is refused before anything starts, with the estimate; one that fits
//! runs, and the estimate is recorded beside the KV cache size the simulator reports. The
//! simulator itself, as a process, allocates by the same numbers and fails like SGLang.
//!
//! Image: `gpuflow-sim:test` (`make test-images`, rebuilt by `bash images/sim/build.sh`).

use gpuflow::engine::JobResult;

use crate::support::sim::SimProcess;
use crate::support::{Ran, Workspace, engine, repo_root};

/// meta-llama/Meta-Llama-3-8B's config.json (its sizing fields).
pub(crate) const LLAMA3_8B: &str = r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
"intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
"num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
"tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}"#;

/// A one-GPU job serving the model with `--mem-fraction-static FRACTION`, then waiting for it
/// and echoing what `wait-for-health` recorded. The container gets no device (`gpus: []`): the
/// stand-in GPUs are not real.
fn workflow(fraction: &str) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    gpus: 1
    steps:
      - name: server
        uses: start-container
        with:
          name: server
          image: gpuflow-sim:test
          gpus: []
          volumes: ['${{{{ github.workspace }}}}/models:/models:ro']
          command: gpuflow-sim --host 0.0.0.0 --port 30000 --startup-delay 1s --model-path /models/llama3-8b --gpu-memory-mib 46068 --mem-fraction-static {fraction}
      - id: ready
        uses: wait-for-health
        with:
          url: http://server:30000/health
          container: server
          timeout: 60s
      - run: echo "reported=${{{{ steps.ready.outputs.kv-cache-tokens }}}} estimated=${{{{ steps.ready.outputs.kv-cache-tokens-estimate }}}}"
"#
    )
}

async fn run(fraction: &str) -> Option<Ran> {
    engine::workflow(&workflow(fraction))
        .files(&[("models/llama3-8b/config.json", LLAMA3_8B)])
        .stand_in_gpus(repo_root().join("examples/stand-in-8gpu-pcie.toml"))
        .on_docker()
        .await
}

#[tokio::test]
async fn weights_over_the_share_are_refused_in_preflight_with_the_estimate() {
    let Some(ran) = run("0.3").await else {
        return;
    };
    let m = &ran.refused_in_preflight("server");
    for expected in [
        "the weights of `/models/llama3-8b` do not fit the memory `--mem-fraction-static 0.3` leaves on 1 × NVIDIA L40S of 46068 MiB, stand-in: container `server` would fail its load with no memory left for the KV cache",
        "weights: 14.96 GiB per GPU (8.03e9 parameters over TP 1)",
        "budget: 13.20 GiB (--mem-fraction-static 0.3; of a 44.99 GiB GPU, 1.00 GiB lost before the weights load (the default allowance; `preload-overhead` sets it))",
        "the weights alone exceed the budget by 1.76 GiB: no room for the KV cache (beyond the estimate's confidence margin of 0.50 GiB, 2% of the budget)",
        "help: raise `--mem-fraction-static` above 0.34",
        "a larger tensor-parallel size, now 1",
        // The step's `command:` (line 14, column 20).
        ":14:20 (the step `server`)",
    ] {
        assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
    }
}

#[tokio::test]
async fn a_server_that_fits_records_its_estimate_beside_the_kv_cache_it_reports() {
    let Some(ran) = run("0.85").await else {
        return;
    };
    assert_eq!(ran.report.result, JobResult::Success, "{:#?}", ran.events);
    assert!(ran.report.preflight.passed());
    let said = ran.said();
    for expected in [
        // Preflight's estimate, on the GPUs the job will lease.
        "memory estimate on 1 × NVIDIA L40S of 46068 MiB, stand-in: weights 14.96 GiB per GPU, budget 37.39 GiB (--mem-fraction-static 0.85), KV cache room 183767 tokens, margin 22.43 GiB",
        // What the simulator printed, with the same arithmetic.
        "KV Cache is allocated. #tokens: 183767, K size: 11.22 GB, V size: 11.22 GB",
        "estimated KV room 183767 tokens, server allocated 183767 (+0.0%)",
        "reported=183767 estimated=183767",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in:\n{said}");
    }
}

/// A model folder holding Llama-3-8B's config.
fn model_folder() -> Workspace {
    Workspace::empty().file("config.json", LLAMA3_8B)
}

#[test]
fn the_simulator_allocates_what_the_estimate_says_and_fails_like_sglang() {
    let model = model_folder();
    let path = model.path().display().to_string();
    let base = ["--model-path", &path, "--gpu-memory-mib", "46068"];
    let sim = SimProcess::start(&[&base[..], &["--mem-fraction-static", "0.85"]].concat());
    let line = sim.line_with("KV Cache is allocated.");
    assert!(
        line.ends_with("#tokens: 183767, K size: 11.22 GB, V size: 11.22 GB"),
        "{line}"
    );
    drop(sim);

    let sim = SimProcess::spawn(&[&base[..], &["--mem-fraction-static", "0.3"]].concat());
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.3. Raise --mem-fraction-static above "),
        "{stderr}"
    );
    // Above the share the rest of the GPU cannot hold the activations: CUDA out of memory.
    let sim = SimProcess::spawn(&[&base[..], &["--mem-fraction-static", "0.99"]].concat());
    let (code, stderr) = sim.exit();
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("torch.OutOfMemoryError: CUDA out of memory."),
        "{stderr}"
    );
}

/// An estimate gpuflow cannot make is no refusal: a `--quantization` method whose size it does
/// not know (SGLang's and vLLM's `modelopt`) leaves the server unestimated, with a warning
/// that says what it could not read, and preflight passes.
#[tokio::test]
async fn a_method_whose_size_is_not_known_is_not_estimated_and_not_refused() {
    let Some(ran) = engine::workflow(&workflow("0.3 --quantization modelopt"))
        .files(&[("models/llama3-8b/config.json", LLAMA3_8B)])
        .stand_in_gpus(repo_root().join("examples/stand-in-8gpu-pcie.toml"))
        .options(|o| o.preflight_only = true)
        .on_docker()
        .await
    else {
        return;
    };
    assert!(ran.report.preflight.passed(), "{:#?}", ran.events);
    let warned = ran.events.iter().any(|e| {
        matches!(&e.kind, gpuflow::events::EventKind::Warning { message, .. }
            if message.contains("the memory of the server is not estimated: `--quantization modelopt` is not a method gpuflow knows the size of"))
    });
    assert!(warned, "{:#?}", ran.events);
}
