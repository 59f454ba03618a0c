//! The actions shipped in `actions/` (`sglang-server`, `vllm-server`, `openai-bench`), run by
//! `gpuflow run` on the local engine with the simulator image standing in for the server:
//! each server action's `command` input starts `gpuflow-sim` instead of SGLang or vLLM, and
//! everything else (the published port, the ready line, `/health`, the outputs, the
//! benchmark's defaults and outputs) is the action's own. These run `gpuflow run`, which
//! sweeps orphans: nextest's `docker-sweep` group.

use std::path::Path;

use crate::support::images;
use crate::support::{Workspace, free_port, shipped};

/// A git repository holding the shipped actions (copied from this checkout) and `w.yml`;
/// `None` only when Docker tests are skipped knowingly.
async fn repository(yaml: &str) -> Option<Workspace> {
    repository_with(yaml, images::SIM).await
}

/// [`repository`], for a workflow that uses the test image `image`.
async fn repository_with(yaml: &str, image: &str) -> Option<Workspace> {
    images::docker_with(&[image]).await?;
    let mut dir = Workspace::repository().file("w.yml", yaml);
    for name in [
        "sglang-server",
        "vllm-server",
        "llamacpp-server",
        "openai-bench",
    ] {
        let path = format!("actions/{name}/action.yml");
        dir = dir.file(&path, &shipped(&path));
    }
    Some(dir.committed("workflow"))
}

fn run(dir: &Workspace) -> (i32, String) {
    run_args(dir, &[], &[])
}

/// `gpuflow run --plain w.yml ARGS` with the environment variables `env`.
fn run_args(dir: &Workspace, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = dir
        .gpuflow()
        .envs(env.iter().copied())
        .args(["run", "--plain", "w.yml"])
        .args(args)
        .output();
    (out.code().unwrap_or(-1), out.all())
}

/// A server action started with the simulator, then `openai-bench` against its `url`, then a
/// line with the outputs of both.
fn server_and_bench(action: &str, port: u16) -> String {
    format!(
        r#"
on: workflow_dispatch
jobs:
  bench:
    steps:
      - id: server
        uses: ./actions/{action}
        with:
          model: /models/simulated
          image: gpuflow-sim:test
          gpus: 0
          port: {port}
          command: gpuflow-sim --host 0.0.0.0 --port {port} --startup-delay 1s --ttft 10ms --tokens-per-second 400
          timeout: 1m
      - id: bench
        uses: ./actions/openai-bench
        with:
          url: ${{{{ steps.server.outputs.url }}}}
          output-tokens: 16
          runs: 2
      - run: >-
          echo "url=${{{{ steps.server.outputs.url }}}}
          container=${{{{ steps.server.outputs.container }}}}
          ready=${{{{ steps.server.outputs.ready-after > 0 }}}}
          tok/s=${{{{ steps.bench.outputs.output_tok_s > 0 }}}}
          errors=${{{{ steps.bench.outputs.errors }}}}
          result=${{{{ steps.bench.outputs.result-file != '' }}}}"
"#
    )
}

async fn server_action_serves_the_benchmark(action: &str) {
    let port = free_port();
    let Some(dir) = repository(&server_and_bench(action, port)).await else {
        return;
    };
    let (code, out) = run(&dir);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "url=http://127.0.0.1:{port} container=server ready=true tok/s=true errors=0 result=true"
        )),
        "{out}"
    );
    // The benchmark was recorded: 2 measured runs (the warm-up not counted) of single-stream's
    // 3 requests, one decode-speed sample each.
    let store = gpuflow::store::ResultStore::open(&dir.path().join(".gpuflow/results.db")).unwrap();
    let results = store
        .find(&gpuflow::store::ResultFilter {
            metric: "output_tok_s".into(),
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(results.len(), 1);
    let metric = results[0].metric("output_tok_s").unwrap();
    assert_eq!(metric.samples.len(), 6, "{metric:?}");
    // The fingerprint holds the server command the action ran.
    let command = &results[0].fingerprint.identity.server_command;
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--tokens-per-second", "400"]),
        "{command:?}"
    );
}

#[tokio::test]
async fn vllm_server_then_openai_bench_against_the_simulator() {
    server_action_serves_the_benchmark("vllm-server").await;
}

#[tokio::test]
async fn sglang_server_then_openai_bench_against_the_simulator() {
    server_action_serves_the_benchmark("sglang-server").await;
}

/// A server that runs out of memory while loading fails the action at once, with the
/// recognised cause, not after the action's 30-minute timeout.
#[tokio::test]
async fn a_server_that_dies_while_loading_fails_the_action_with_the_cause() {
    let port = free_port();
    let Some(dir) = repository(&format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - uses: ./actions/vllm-server
        with:
          model: /models/too-big
          image: gpuflow-sim:test
          gpus: 0
          port: {port}
          command: gpuflow-sim --host 0.0.0.0 --port {port} --oom-at-start --oom-style torch --startup-delay 1s
"#
    ))
    .await
    else {
        return;
    };
    let (code, out) = run(&dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CUDA out of memory"), "{out}");
    assert!(!out.contains("timed out"), "{out}");
}

/// vLLM prints no ready line of its own, and uvicorn's `Application startup complete.` is
/// gone with `--uvicorn-log-level warning`: a server that never prints it (here the simulator,
/// its output sent to a file) is ready as soon as its /health answers, not after the action's
/// timeout.
#[tokio::test]
async fn vllm_server_is_ready_without_a_ready_line() {
    let port = free_port();
    let Some(dir) = repository(&format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: ./actions/vllm-server
        with:
          model: /models/quiet
          image: gpuflow-sim:test
          gpus: 0
          port: {port}
          command: sh -c "exec gpuflow-sim --host 0.0.0.0 --port {port} --startup-delay 1s > /tmp/sim.log"
          timeout: 40s
      - run: echo "ready=${{{{ steps.server.outputs.ready-after > 0 }}}}"
      - container: server
        run: wget -q -O - http://127.0.0.1:{port}/v1/models
"#
    ))
    .await
    else {
        return;
    };
    let started = std::time::Instant::now();
    let (code, out) = run(&dir);
    let took = started.elapsed();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ready=true"), "{out}");
    assert!(out.contains("gpuflow-sim"), "the models list: {out}");
    assert!(!out.contains("Application startup complete"), "{out}");
    // Ready about 1 s after its start, far from the 40 s a wait for the line would take.
    assert!(
        took < std::time::Duration::from_secs(30),
        "took {took:?}:\n{out}"
    );
}

/// The command line the SGLang action gives the server, seen by a stand-in `python3` that
/// writes its arguments down and starts the simulator: `--enable-metrics` is on it (SGLang
/// serves /metrics only with it), before the user's `args`.
#[tokio::test]
async fn sglang_server_passes_enable_metrics_to_the_server() {
    let port = free_port();
    let bin = Workspace::empty().file(
        "python3",
        // No help of its own: preflight's `--help` of the server gets none (a warning) instead
        // of a stand-in server that never ends.
        "#!/bin/sh\n\
         case \" $* \" in *\" --help \"*) echo 'a stand-in without a help' >&2; exit 2;; esac\n\
         echo \"python3 $*\" > /tmp/argv\n\
         port=30000; previous=\n\
         for a in \"$@\"; do [ \"$previous\" = --port ] && port=$a; previous=$a; done\n\
         exec gpuflow-sim --host 0.0.0.0 --port \"$port\"\n",
    );
    let script = bin.path().join("python3");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let Some(dir) = repository(&format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: ./actions/sglang-server
        with:
          model: org/model
          args: --tp-size 2 --cuda-graph-max-bs-decode 128
          image: gpuflow-sim:test
          gpus: 0
          port: {port}
          volumes: {script}:/bin/python3:ro
          timeout: 1m
      - container: server
        run: cat /tmp/argv
"#,
        script = script.display(),
    ))
    .await
    else {
        return;
    };
    let (code, out) = run(&dir);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "python3 -m sglang.launch_server --model-path org/model --host 0.0.0.0 --port {port} --enable-metrics --tp-size 2 --cuda-graph-max-bs-decode 128"
        )),
        "{out}"
    );
}

/// The inputs a real GPU node needs, through the SGLang action to its container: the host's
/// model folder read-only at /models, the Hugging Face cache read-write with `HF_HOME` there,
/// `env` lines (an NCCL setting, a secret that stays masked) and `shm-size`.
#[tokio::test]
async fn server_actions_pass_models_hf_cache_env_and_shm_size_to_the_server() {
    let port = free_port();
    let models = Workspace::empty();
    std::fs::create_dir(models.path().join("Qwen3-235B")).unwrap();
    let cache = Workspace::empty();
    let Some(dir) = repository(&format!(
        r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: ./actions/sglang-server
        with:
          models: {models}
          model: /models/Qwen3-235B
          hf-cache: {cache}
          env: |
            NCCL_DEBUG=INFO
            HF_TOKEN=${{{{ secrets.HF_TOKEN }}}}
          shm-size: 256m
          image: gpuflow-sim:test
          gpus: 0
          port: {port}
          command: gpuflow-sim --host 0.0.0.0 --port {port}
          timeout: 1m
      - container: server
        run: |
          echo "token=$HF_TOKEN hf=$HF_HOME nccl=$NCCL_DEBUG"
          echo "models: $(ls /models)"
          touch /models/x 2>/dev/null && echo "models writable" || echo "models read-only"
          touch "$HF_HOME/downloaded"
          echo "shm=$(df -k /dev/shm | awk 'NR==2 {{ print $2 }}')k"
"#,
        models = models.path().display(),
        cache = cache.path().display(),
    ))
    .await
    else {
        return;
    };
    let (code, out) = run_args(
        &dir,
        &["--secret", "HF_TOKEN"],
        &[("HF_TOKEN", "hf_sEcReT1234")],
    );
    assert_eq!(code, 0, "{out}");
    for expected in [
        "token=*** hf=/root/.cache/huggingface nccl=INFO",
        "models: Qwen3-235B",
        "models read-only",
        "shm=262144k",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert!(!out.contains("hf_sEcReT1234"), "the secret leaked:\n{out}");
    // The cache is the host's folder.
    assert!(cache.path().join("downloaded").exists());
}

/// The folder `images/llamacpp/llama-server.sh` prints (`bin/llama-server`, `models/`); built
/// with the image by `make test-images`, so here it returns at once.
fn llama_server_folder() -> std::path::PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/llamacpp/llama-server.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "images/llamacpp/llama-server.sh failed (run `make test-images`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// llama.cpp's real `llama-server` (gpuflow-llamacpp:test) serving the tiny random-weight model
/// from the host's model folder: the model is found by preflight, /health goes 503 → 200, and a
/// completion comes back with the tokens asked for.
#[tokio::test]
async fn llamacpp_server_serves_the_tiny_model_from_the_models_folder() {
    let port = free_port();
    let yaml = |models: &Path| {
        format!(
            r#"
on: workflow_dispatch
jobs:
  serve:
    steps:
      - id: server
        uses: ./actions/llamacpp-server
        with:
          image: gpuflow-llamacpp:test
          models: {models}
          model: /models/tiny.gguf
          port: {port}
          args: -c 512 -np 1
          timeout: 1m
      - container: server
        run: >-
          wget -q -O - --header 'Content-Type: application/json'
          --post-data '{{"prompt":"hello","max_tokens":8}}'
          http://127.0.0.1:{port}/v1/completions
      - run: >-
          echo "url=${{{{ steps.server.outputs.url }}}}
          ready=${{{{ steps.server.outputs.ready-after >= 0 }}}}"
"#,
            models = models.display()
        )
    };
    let models = llama_server_folder().join("models");
    let Some(dir) = repository_with(&yaml(&models), images::LLAMACPP).await else {
        return;
    };
    let (code, out) = run(&dir);
    assert_eq!(code, 0, "{out}");
    for expected in [
        "preflight: 1 check".to_string(),
        format!("url=http://127.0.0.1:{port} ready=true"),
        "\"finish_reason\":\"length\"".to_string(),
        "\"completion_tokens\":8".to_string(),
    ] {
        assert!(out.contains(&expected), "missing {expected:?} in:\n{out}");
    }

    // The same with a folder lacking the model: preflight stops it before the server starts.
    let empty = Workspace::empty();
    std::fs::write(dir.path().join("w.yml"), yaml(empty.path())).unwrap();
    let (code, out) = run(&dir);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("`/models/tiny.gguf` does not exist in container `server`"),
        "{out}"
    );
    assert!(!out.contains("container server started"), "{out}");
}

/// `workflows/llamacpp.yml` as shipped, end to end on CPU: the model folder given as an input,
/// llama-server started and waited for, benchmarked, compared with the previous run, reported.
#[tokio::test]
async fn the_llamacpp_workflow_runs_the_whole_loop_on_cpu() {
    let workflow = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../workflows/llamacpp.yml"),
    )
    .unwrap();
    let models = llama_server_folder().join("models");
    let Some(dir) = repository_with(&workflow, images::LLAMACPP).await else {
        return;
    };
    let models_input = format!("models={}", models.display());
    let args = [
        "--input",
        models_input.as_str(),
        "--input",
        "model=tiny.gguf",
        "--input",
        "output-tokens=16",
        // Two runs on a shared 2-core machine may differ by more than the tolerance.
        "--input",
        "fail-on=never",
    ];
    for run_no in 1..=2 {
        let (code, out) = run_args(&dir, &args, &[]);
        assert_eq!(code, 0, "run {run_no}:\n{out}");
        for expected in [
            "container server started (gpuflow-llamacpp:test)",
            "ready after",
            "recorded as result",
            "write the report: success",
        ] {
            assert!(
                out.contains(expected),
                "run {run_no}: missing {expected:?} in:\n{out}"
            );
        }
        // The second run has the first as its baseline.
        if run_no == 2 {
            assert!(!out.contains("no-baseline"), "{out}");
        }
    }
}
