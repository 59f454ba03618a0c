//! Recognising why a server died from the last lines it printed: flags the server's argparse
//! refused, CUDA out of memory, SGLang's and vLLM's "no memory for the KV cache" errors, a
//! context too long for the KV cache, a port already in use, a missing model path, NCCL errors,
//! and otherwise the root exception of a Python traceback.
//!
//! Pure text in, a [`Cause`] out: it knows nothing of containers or steps. The patterns are the
//! messages real servers print (SGLang, vLLM, PyTorch, NCCL), so a user sees "CUDA out of
//! memory" and what to change instead of scrolling a traceback.

use std::sync::LazyLock;

use regex::Regex;

/// A recognised reason for a crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub kind: CauseKind,
    /// The line that gave it away, trimmed, without vLLM's log prefix.
    pub line: String,
    /// A line printed before it that the user needs beside it: argparse's `usage:` line for a
    /// refused flag (which program refused it, and how it wants to be called).
    pub context: Option<String>,
}

impl Cause {
    /// `cause: SUMMARY: `LINE``, the usage line under it when there is one, then `help: HINT`:
    /// what the failure messages of `wait-for-health` and `benchmark` print.
    pub fn explain(&self) -> String {
        let mut text = format!("cause: {}: `{}`", self.kind.summary(), self.line);
        if let Some(context) = &self.context {
            text.push_str(&format!("\n  the server printed: `{context}`"));
        }
        text.push_str(&format!("\nhelp: {}", self.kind.hint()));
        text
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    /// The server's argument parser refused its command line (argparse's `error:` line).
    RefusedFlags,
    CudaOutOfMemory,
    NotEnoughMemory,
    /// vLLM: one request of the model's whole context needs more KV cache than there is.
    ContextTooLong,
    AddressInUse,
    MissingPath,
    Nccl,
    /// A Python exception no more specific pattern matched.
    PythonException,
}

impl CauseKind {
    /// What happened, in a few words.
    pub fn summary(self) -> &'static str {
        match self {
            Self::RefusedFlags => "the server refused its flags",
            Self::CudaOutOfMemory => "CUDA out of memory",
            Self::NotEnoughMemory => "not enough GPU memory for the model and its KV cache",
            Self::ContextTooLong => {
                "the KV cache cannot hold one request of the model's whole context length"
            }
            Self::AddressInUse => "the port is already in use",
            Self::MissingPath => "a file or model path does not exist",
            Self::Nccl => "an NCCL (multi-GPU communication) error",
            Self::PythonException => "a Python exception",
        }
    }

    /// What to try.
    pub fn hint(self) -> &'static str {
        match self {
            Self::RefusedFlags => {
                "fix the flag the error names (the server's `--help` in its image lists today's \
                 flags; a `check-cli-interface` step checks them before the load). Flags get \
                 renamed upstream, and argparse reads a removed flag that is the start of others \
                 as ambiguous: SGLang 0.5.20 replaced `--cuda-graph-max-bs` with \
                 `--cuda-graph-max-bs-decode`, and neither SGLang nor vLLM has \
                 `--enable-custom-all-reduce` (custom all-reduce is the default; \
                 `--disable-custom-all-reduce` turns it off)"
            }
            Self::CudaOutOfMemory => {
                "free the GPUs (`nvidia-smi` shows other processes), use more GPUs (tensor \
                 parallelism), or lower the memory the server takes (a smaller \
                 `--mem-fraction-static`, `--gpu-memory-utilization`, max batch or context length)"
            }
            Self::NotEnoughMemory => {
                "leave the memory fraction to the server's own detection or raise it \
                 (SGLang `--mem-fraction-static`, whose error names the least that works; vLLM \
                 `--gpu-memory-utilization`), use more GPUs, lower \
                 `--cuda-graph-max-bs-decode` or the context length, or check that no other \
                 process holds GPU memory"
            }
            Self::ContextTooLong => {
                "lower `--max-model-len` (vLLM's message gives the largest length that fits), \
                 raise `--gpu-memory-utilization`, or use more GPUs (tensor parallelism)"
            }
            Self::AddressInUse => {
                "another process (or a container of an earlier run) listens on that port: stop \
                 it, or give the server another `--port`"
            }
            Self::MissingPath => {
                "check the path and that its folder is mounted into the container (`volumes`)"
            }
            Self::Nccl => {
                "set `NCCL_DEBUG=INFO` for details; check shared memory (`shm-size`, `ipc: host`) \
                 and that every GPU of the job is visible"
            }
            Self::PythonException => "the exception above is the server's own error",
        }
    }
}

struct Rule {
    kind: CauseKind,
    pattern: Regex,
}

/// Most specific first: an OOM traceback also ends in a Python exception line. The patterns are
/// unanchored, so they match vLLM's prefixed log lines as well as raw tracebacks.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |kind, pattern: &str| Rule {
        kind,
        pattern: Regex::new(pattern).expect("the built-in patterns are valid"),
    };
    vec![
        // argparse's `PROG: error: MESSAGE` (Lib/argparse.py `error`), printed under the usage
        // before the server does anything else. Only argparse's own messages, so that another
        // program's `error:` line is not taken for a refused flag.
        rule(
            CauseKind::RefusedFlags,
            r"^\S[^:]*: error: (unrecognized arguments: |ambiguous option: |the following arguments are required: |one of the arguments .* is required|argument \S+: (invalid |expected |not allowed |ignored explicit ))",
        ),
        rule(
            CauseKind::CudaOutOfMemory,
            r"(?i)CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation",
        ),
        // Before the memory rule: vLLM's message says "KV cache memory" too, but the fix is
        // the context length.
        rule(
            CauseKind::ContextTooLong,
            r"To serve at least one request with the model's max seq len",
        ),
        // SGLang ≥ 0.5.23: `ValueError: Loaded weights leave no GPU memory for the KV cache
        // under --mem-fraction-static=…` (mem_cache/kv_cache_configurator.py); its older and
        // now rare `Not enough memory.` (a budget that rounds to 0 tokens); vLLM's `No available
        // memory for the cache blocks`.
        rule(
            CauseKind::NotEnoughMemory,
            r"(?i)not enough memory|insufficient (gpu )?memory|No available memory for the cache blocks|leave no GPU memory for the KV cache",
        ),
        rule(
            CauseKind::AddressInUse,
            r"(?i)address already in use|EADDRINUSE|port \d+ is (already )?in use",
        ),
        rule(
            CauseKind::Nccl,
            r"NCCL error|ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage|NCCL WARN",
        ),
        rule(
            CauseKind::MissingPath,
            r"(?i)No such file or directory|FileNotFoundError|does not appear to have a file named|is not a (local folder|valid model identifier)|Repository Not Found|HFValidationError|model path .* (does not exist|not found)",
        ),
    ]
});

/// The last line of a Python traceback: `SomeError: message` at the start of a line (after
/// vLLM's log prefix, see [`VLLM_PREFIX`]).
static EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)|AssertionError|KeyError)(: .*)?$",
    )
    .expect("the built-in pattern is valid")
});

/// vLLM's log prefix, `(EngineCore_DP0 pid=123) ERROR 12-03 10:00:00 [core.py:1510] `
/// (vllm/logger.py `_FORMAT`, after an optional `VLLM_LOGGING_PREFIX`). A traceback vLLM logs
/// carries it on every line (the formatter joins them with `\r\n` + the prefix), so without
/// it the exception line would not start the line.
static VLLM_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^.*?\([\w.-]+ pid=\d+\) (DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \[[^\]]*\] ",
    )
    .expect("the built-in pattern is valid")
});

/// vLLM's front end, when an engine process died while starting: the cause is the exception
/// above it (v1/engine/utils.py), so this line never is.
const SEE_ROOT_CAUSE_ABOVE: &str = "See root cause above";

/// A line without vLLM's log prefix and surrounding whitespace (the `\r` of vLLM's joined
/// lines included).
fn clean(line: &str) -> &str {
    let line = line.trim();
    match VLLM_PREFIX.find(line) {
        Some(prefix) => line[prefix.end()..].trim(),
        None => line,
    }
}

/// The cause the lines show, if one is recognised. Later lines win within a kind (the last
/// message is closest to the exit); kinds are tried most specific first.
pub fn recognise<S: AsRef<str>>(lines: &[S]) -> Option<Cause> {
    let lines: Vec<&str> = lines.iter().map(|l| clean(l.as_ref())).collect();
    for rule in RULES.iter() {
        if let Some(at) = lines.iter().rposition(|l| rule.pattern.is_match(l)) {
            let context = (rule.kind == CauseKind::RefusedFlags)
                .then(|| usage_line(&lines[..at]))
                .flatten();
            return Some(Cause {
                kind: rule.kind,
                line: lines[at].to_string(),
                context,
            });
        }
    }
    let traceback = lines
        .iter()
        .any(|l| l.contains("Traceback (most recent call last)"));
    if !traceback {
        return None;
    }
    let exceptions: Vec<&str> = lines
        .iter()
        .rev()
        .copied()
        .filter(|l| EXCEPTION.is_match(l))
        .collect();
    // The last exception is closest to the exit, unless it only points at an earlier one.
    exceptions
        .iter()
        .find(|l| !l.contains(SEE_ROOT_CAUSE_ABOVE))
        .or(exceptions.first())
        .map(|line| Cause {
            kind: CauseKind::PythonException,
            line: line.to_string(),
            context: None,
        })
}

/// argparse's usage line (its first line: `usage: sglang serve [-h] [--model-path …]`), the
/// last one printed before `lines` end.
fn usage_line(lines: &[&str]) -> Option<String> {
    const LONGEST: usize = 200;
    let line = lines.iter().rev().find(|l| l.starts_with("usage: "))?;
    Some(match line.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{} …", &line[..cut]),
        None => line.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use test_case::test_case;

    const SGLANG_NOT_ENOUGH: &str = r#"[2026-02-27 08:40:12 TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=21.71 GB, mem usage=72.29 GB.
[2026-02-27 08:40:12 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2532, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1301, in init_memory_pool
    raise RuntimeError(
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.
[2026-02-27 08:40:13] Received sigquit from a child process. It usually means the child failed."#;

    const TORCH_OOM: &str = r#"Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/worker/worker.py", line 230, in determine_num_available_blocks
    self.model_runner.profile_run()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB of which 1.12 GiB is free."#;

    const PORT: &str = r#"[2026-02-27 09:01:00] server_args=ServerArgs(model_path='/models/Qwen3', port=30000)
ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"#;

    const MISSING_MODEL: &str = r#"Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/transformers/utils/hub.py", line 402, in cached_file
huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/Qwen3-235B'.
OSError: Incorrect path_or_model_id: '/models/Qwen3-235B'. Please provide either the path to a local folder or the repo_id of a model on the Hub."#;

    const FILE_NOT_FOUND: &str = r#"python3: can't open file '/tmp/benchmark_eagle3.py': [Errno 2] No such file or directory"#;

    const NCCL: &str = r#"[rank3]: Traceback (most recent call last):
[rank3]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error."#;

    const TRACEBACK: &str = r#"Traceback (most recent call last):
  File "/app/server.py", line 12, in <module>
    import flash_attn
ModuleNotFoundError: No module named 'flash_attn'
"#;

    /// SGLang 0.5.23 when the weights exceed `--mem-fraction-static`
    /// (sglang/srt/mem_cache/kv_cache_configurator.py:3051-3058, inside the scheduler's
    /// `Scheduler hit an exception`).
    const SGLANG_NO_KV_ROOM: &str = r#"[2026-12-03 10:02:11 TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=4.12 GB, mem usage=74.20 GB.
[2026-12-03 10:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 6370, in run_scheduler_process
    scheduler = Scheduler(
  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 3051, in _profile_available_bytes
    raise ValueError(
ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.55. Raise --mem-fraction-static above 0.579 (minimum viable = 1 - available/pre = 0.5781). If using speculative decoding, draft weights are now counted.
[2026-12-03 10:02:12] Received sigquit from a child process. It usually means the child failed."#;

    /// vLLM's engine process logs its traceback (each line prefixed, joined with `\r\n`:
    /// vllm/logging_utils/formatter.py), `multiprocessing` prints it raw, then the front end
    /// dies with its own traceback and a RuntimeError that points above (v1/engine/utils.py).
    fn vllm_engine_failed(root: &str) -> String {
        let prefix = "(EngineCore_DP0 pid=4242) ERROR 12-03 10:15:02 [core.py:1510] ";
        let logged = [
            "EngineCore failed to start.",
            "Traceback (most recent call last):",
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 1499, in run_engine_core",
            "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
            "  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py\", line 1030, in check_enough_kv_cache_memory",
            "    raise ValueError(",
            root,
        ]
        .iter()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\r\n");
        format!(
            r#"(APIServer pid=1) INFO 12-03 10:14:40 [api_server.py:1352] vLLM API server version 0.34.0
{logged}
Process EngineCore_DP0:
Traceback (most recent call last):
  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap
    self.run()
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 1030, in check_enough_kv_cache_memory
    raise ValueError(
{root}
Traceback (most recent call last):
  File "/usr/local/bin/vllm", line 10, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", line 73, in main
    args.dispatch_function(args)
  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/serve.py", line 60, in cmd
    uvloop.run(run_server(args))
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{'EngineCore_DP0': 1}}"#
        )
    }

    /// vLLM 0.34.0, v1/core/kv_cache_utils.py:1031-1039 (check_enough_kv_cache_memory).
    const VLLM_MAX_SEQ_LEN: &str = "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.53 GiB). Based on the available memory, the estimated maximum model length is 79936. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.";

    /// SGLang 0.5.23's parser on gpuflow's old flags: argparse prints the usage (wrapped at 80
    /// columns, hundreds of lines for SGLang) and `PROG: error: MESSAGE`, and exits with 2.
    fn argparse_refused(error: &str) -> String {
        format!(
            "usage: sglang serve [-h] [--model-path MODEL_PATH]\n\
             \x20                   [--tokenizer-path TOKENIZER_PATH]\n\
             \x20                   [--tp-size TP_SIZE] [--cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE]\n\
             {error}"
        )
    }

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn sglang_weights_leaving_no_kv_room_is_not_enough_memory() {
        let cause = recognise(&lines(SGLANG_NO_KV_ROOM)).expect("a cause");
        assert_eq!(cause.kind, CauseKind::NotEnoughMemory);
        assert!(
            cause
                .line
                .starts_with("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.55."),
            "{}",
            cause.line
        );
    }

    /// The cause is the engine's error, never the front end's "See root cause above", and it
    /// shows without vLLM's log prefix.
    #[test]
    fn vllm_max_seq_len_beyond_the_kv_cache_is_the_context_cause() {
        let log = vllm_engine_failed(VLLM_MAX_SEQ_LEN);
        let cause = recognise(&lines(&log)).expect("a cause");
        assert_eq!(cause.kind, CauseKind::ContextTooLong);
        assert_eq!(cause.line, VLLM_MAX_SEQ_LEN);
        assert!(cause.kind.hint().contains("--max-model-len"));
        // Only the logged (prefixed) copy: still recognised, the prefix and `\r` gone.
        let logged_only: Vec<&str> = lines(&log)
            .into_iter()
            .filter(|l| l.starts_with("(EngineCore_DP0"))
            .collect();
        let cause = recognise(&logged_only).expect("a cause");
        assert_eq!(cause.kind, CauseKind::ContextTooLong);
        assert_eq!(cause.line, VLLM_MAX_SEQ_LEN);
    }

    #[test]
    fn vllm_engine_failure_shows_the_root_exception_not_the_front_ends() {
        let root = "ValueError: Unknown quantization method: fp9. Must be one of ['awq', 'fp8'].";
        let log = vllm_engine_failed(root);
        let cause = recognise(&lines(&log)).expect("a cause");
        assert_eq!(cause.kind, CauseKind::PythonException);
        assert_eq!(cause.line, root);
        // Only in the engine's logged lines (the raw copy scrolled away): still the root.
        let without_raw: Vec<&str> = lines(&log)
            .into_iter()
            .filter(|l| !l.starts_with("ValueError"))
            .collect();
        assert_eq!(recognise(&without_raw).unwrap().line, root);
        // The front end's line alone is all there is to show.
        let front_end_only: Vec<&str> = lines(&log)
            .into_iter()
            .filter(|l| !l.contains("ValueError"))
            .collect();
        assert!(
            recognise(&front_end_only)
                .unwrap()
                .line
                .starts_with("RuntimeError: Engine core initialization failed.")
        );
    }

    #[test_case("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"; "ambiguous option")]
    #[test_case("sglang serve: error: unrecognized arguments: --enable-custom-all-reduce"; "unrecognized arguments")]
    #[test_case("sglang serve: error: argument --tp-size: invalid int value: 'x'"; "invalid value")]
    #[test_case("vllm serve: error: argument --max-model-len: expected one argument"; "missing value")]
    #[test_case("launch_server.py: error: the following arguments are required: --model-path"; "required")]
    fn argparse_errors_are_refused_flags_with_the_usage(error: &str) {
        let log = argparse_refused(error);
        let cause = recognise(&lines(&log)).expect("a cause");
        assert_eq!(cause.kind, CauseKind::RefusedFlags);
        assert_eq!(cause.line, error);
        assert_eq!(
            cause.context.as_deref(),
            Some("usage: sglang serve [-h] [--model-path MODEL_PATH]")
        );
        let shown = cause.explain();
        assert!(
            shown.starts_with(&format!("cause: the server refused its flags: `{error}`")),
            "{shown}"
        );
        assert!(shown.contains("usage: sglang serve [-h]"), "{shown}");
        // Without the usage above it (scrolled away), the error alone.
        assert_eq!(recognise(&[error]).unwrap().context, None);
    }

    #[test]
    fn other_programs_error_lines_are_not_refused_flags() {
        for line in [
            "curl: error: could not resolve host",
            "[2026-12-03 10:00:00] error: something went wrong",
            "ERROR:    Exception in ASGI application",
        ] {
            assert_eq!(recognise(&[line]), None, "{line}");
        }
    }

    /// The hints name today's flags: SGLang ≥ 0.5.20 reads `--cuda-graph-max-bs` as an
    /// ambiguous option.
    #[test]
    fn hints_name_todays_flags() {
        let stale = ["--cuda-graph-max-bs", "--enable-custom-all-reduce"];
        for kind in KINDS {
            let hint = kind.hint();
            let flags: Vec<&str> = hint
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|f| f.starts_with("--"))
                .collect();
            for flag in flags {
                if kind == CauseKind::RefusedFlags {
                    continue; // names the old spellings on purpose, as what was replaced
                }
                assert!(!stale.contains(&flag), "{kind:?} names `{flag}`");
            }
        }
        assert!(
            CauseKind::NotEnoughMemory
                .hint()
                .contains("`--cuda-graph-max-bs-decode`")
        );
    }

    #[test_case(SGLANG_NOT_ENOUGH, CauseKind::NotEnoughMemory, "RuntimeError: Not enough memory"; "sglang not enough memory")]
    #[test_case(TORCH_OOM, CauseKind::CudaOutOfMemory, "torch.OutOfMemoryError: CUDA out of memory"; "torch cuda oom")]
    #[test_case(PORT, CauseKind::AddressInUse, "ERROR:    [Errno 98]"; "address in use")]
    #[test_case(MISSING_MODEL, CauseKind::MissingPath, "huggingface_hub.errors.HFValidationError"; "missing model path")]
    #[test_case(FILE_NOT_FOUND, CauseKind::MissingPath, "python3: can't open file"; "file not found")]
    #[test_case(NCCL, CauseKind::Nccl, "[rank3]: ncclSystemError"; "nccl")]
    #[test_case(TRACEBACK, CauseKind::PythonException, "ModuleNotFoundError: No module named 'flash_attn'"; "python traceback")]
    fn recognises(text: &str, kind: CauseKind, starts: &str) {
        let cause = recognise(&lines(text)).expect("a cause");
        assert_eq!(cause.kind, kind);
        assert!(cause.line.starts_with(starts), "{}", cause.line);
    }

    #[test]
    fn a_clean_log_has_no_cause() {
        let log = [
            "[2026-11-30 08:00:00] Load weight begin. avail mem=78.50 GB",
            "[2026-11-30 08:01:00] The server is fired up and ready to roll!",
        ];
        assert_eq!(recognise(&log), None);
        // An exception-looking line without a traceback is not taken for one.
        assert_eq!(recognise(&["ValueError: x"]), None);
    }

    const KINDS: [CauseKind; 8] = [
        CauseKind::RefusedFlags,
        CauseKind::CudaOutOfMemory,
        CauseKind::NotEnoughMemory,
        CauseKind::ContextTooLong,
        CauseKind::AddressInUse,
        CauseKind::MissingPath,
        CauseKind::Nccl,
        CauseKind::PythonException,
    ];

    #[test]
    fn every_kind_has_a_summary_and_a_hint() {
        for kind in KINDS {
            assert!(!kind.summary().is_empty() && !kind.hint().is_empty());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = recognise(&text.lines().collect::<Vec<_>>());
        }
    }
}
