//! Recognising why a server died from the last lines it printed: CUDA out of memory, SGLang's
//! "Not enough memory", a port already in use, a missing model path, NCCL errors, and otherwise
//! the last exception of a Python traceback.
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
    /// The line that gave it away, trimmed.
    pub line: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    CudaOutOfMemory,
    NotEnoughMemory,
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
            Self::CudaOutOfMemory => "CUDA out of memory",
            Self::NotEnoughMemory => "not enough GPU memory for the model and its KV cache",
            Self::AddressInUse => "the port is already in use",
            Self::MissingPath => "a file or model path does not exist",
            Self::Nccl => "an NCCL (multi-GPU communication) error",
            Self::PythonException => "a Python exception",
        }
    }

    /// What to try.
    pub fn hint(self) -> &'static str {
        match self {
            Self::CudaOutOfMemory => {
                "free the GPUs (`nvidia-smi` shows other processes), use more GPUs (tensor \
                 parallelism), or lower the memory the server takes (a smaller \
                 `--mem-fraction-static`, `--gpu-memory-utilization`, max batch or context length)"
            }
            Self::NotEnoughMemory => {
                "leave the memory fraction to the server's own detection or raise it \
                 (`--mem-fraction-static`), lower `--cuda-graph-max-bs` or the context length, \
                 or check that no other process holds GPU memory"
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

/// Most specific first: an OOM traceback also ends in a Python exception line.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |kind, pattern: &str| Rule {
        kind,
        pattern: Regex::new(pattern).expect("the built-in patterns are valid"),
    };
    vec![
        rule(
            CauseKind::CudaOutOfMemory,
            r"(?i)CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation",
        ),
        rule(
            CauseKind::NotEnoughMemory,
            r"(?i)not enough memory|insufficient (gpu )?memory|No available memory for the cache blocks",
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

/// The last line of a Python traceback: `SomeError: message` at the start of a line.
static EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)|AssertionError|KeyError)(: .*)?$",
    )
    .expect("the built-in pattern is valid")
});

/// The cause the lines show, if one is recognised. Later lines win within a kind (the last
/// message is closest to the exit); kinds are tried most specific first.
pub fn recognise<S: AsRef<str>>(lines: &[S]) -> Option<Cause> {
    for rule in RULES.iter() {
        if let Some(line) = lines
            .iter()
            .rev()
            .map(AsRef::as_ref)
            .find(|l| rule.pattern.is_match(l))
        {
            return Some(Cause {
                kind: rule.kind,
                line: line.trim().to_string(),
            });
        }
    }
    let traceback = lines
        .iter()
        .any(|l| l.as_ref().contains("Traceback (most recent call last)"));
    if !traceback {
        return None;
    }
    lines
        .iter()
        .rev()
        .map(|l| l.as_ref().trim_end())
        .find(|l| EXCEPTION.is_match(l))
        .map(|line| Cause {
            kind: CauseKind::PythonException,
            line: line.to_string(),
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

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
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

    #[test]
    fn every_kind_has_a_summary_and_a_hint() {
        for kind in [
            CauseKind::CudaOutOfMemory,
            CauseKind::NotEnoughMemory,
            CauseKind::AddressInUse,
            CauseKind::MissingPath,
            CauseKind::Nccl,
            CauseKind::PythonException,
        ] {
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
