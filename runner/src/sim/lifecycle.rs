//! What the simulated server prints over its life, shaped like SGLang's own output so log
//! probes and failure recognition are exercised on realistic text: loading progress lines, the
//! exact ready line, and the tracebacks of its crash modes.
//!
//! Progress and the ready line go to stdout, flushed line by line (a log probe must see them
//! at once, not when a buffer fills); tracebacks are returned for stderr. This file knows
//! nothing of HTTP or timing.

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use super::config::{OomStyle, SimConfig};
use super::memory::MemoryPlan;

/// SGLang's ready line, printed once the server answers requests.
pub const READY_LINE: &str = "The server is fired up and ready to roll!";

/// Prints one log line with SGLang's `[YYYY-MM-DD HH:MM:SS]` prefix, flushed.
pub fn log(message: &str) {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    // `2026-01-02T03:04:05Z` → `2026-01-02 03:04:05`
    let stamp = stamp.trim_end_matches('Z').replacen('T', " ", 1);
    let mut out = std::io::stdout().lock();
    // A closed stdout (the reader went away) must not take the server down with it.
    let _ = writeln!(out, "[{stamp}] {message}").and_then(|()| out.flush());
}

/// The lines printed while the model "loads", each with the fraction of the load after which
/// it appears; with a memory plan, its lines in place of the fixed memory lines.
pub fn loading_lines(
    config: &SimConfig,
    addr: SocketAddr,
    memory: Option<&MemoryPlan>,
) -> Vec<(f64, String)> {
    let model = &config.model_name;
    let pid = std::process::id();
    let mut lines = vec![
        (
            0.0,
            format!(
                "server_args=ServerArgs(model_path='{model}', served_model_name='{model}', \
                 host='{}', port={}, simulated=True)",
                addr.ip(),
                addr.port()
            ),
        ),
        (0.0, "Load weight begin. avail mem=78.50 GB".to_owned()),
        (
            0.25,
            "Loading safetensors checkpoint shards:  50% Completed | 1/2".to_owned(),
        ),
        (
            0.5,
            "Loading safetensors checkpoint shards: 100% Completed | 2/2".to_owned(),
        ),
        (
            0.6,
            "Load weight end. type=SimulatedForCausalLM, dtype=torch.bfloat16, avail mem=62.10 GB"
                .to_owned(),
        ),
        (
            0.7,
            "KV Cache is allocated. #tokens: 1048576, K size: 8.00 GB, V size: 8.00 GB".to_owned(),
        ),
        (
            0.8,
            "Capture cuda graph begin. This can take up to several minutes.".to_owned(),
        ),
        (0.95, "Capture cuda graph end.".to_owned()),
        (1.0, format!("INFO:     Started server process [{pid}]")),
        (1.0, "INFO:     Waiting for application startup.".to_owned()),
        (1.0, "INFO:     Application startup complete.".to_owned()),
        (
            1.0,
            format!("INFO:     Uvicorn running on http://{addr} (Press CTRL+C to quit)"),
        ),
    ];
    if let Some(plan) = memory {
        let fixed = ["Load weight", "KV Cache is allocated"];
        lines.retain(|(_, l)| !fixed.iter().any(|f| l.starts_with(f)));
        lines.extend(plan.lines());
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    lines
}

/// When each loading line is due, from the load time and its fraction.
pub fn line_offset(load: Duration, fraction: f64) -> Duration {
    load.mul_f64(fraction.clamp(0.0, 1.0))
}

/// The traceback --oom-at-start prints to stderr, in the chosen server's words.
pub fn oom_traceback(style: OomStyle) -> String {
    match style {
        // Weights of 72.30 of the 78.50 GB free before the load, over a share of 0.88.
        OomStyle::Sglang => super::memory::sglang_scheduler_traceback(
            "mem_cache/kv_cache_configurator.py",
            3051,
            "_profile_available_bytes",
            &super::memory::sglang_no_kv_room(0.88, 78.50, 6.20),
        ),
        OomStyle::Torch => "\
Traceback (most recent call last):
  File \"/usr/local/lib/python3.12/dist-packages/vllm/worker/model_runner.py\", line 1121, in load_model
    self.model = get_model(vllm_config=self.vllm_config)
  File \"/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py\", line 1340, in to
    return self._apply(convert)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free. Of the allocated memory 76.80 GiB is allocated by PyTorch, and 312.00 MiB is reserved by PyTorch but unallocated.
"
        .to_owned(),
    }
}

/// The traceback --crash-after-requests prints to stderr.
pub fn crash_traceback(requests: u64) -> String {
    format!(
        "\
Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 1089, in event_loop_overlap
    batch_result = self.run_batch(batch)
  File \"/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py\", line 733, in replay
    self.graphs[self.bs].replay()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
(gpuflow-sim: crashed on purpose after {requests} answered requests, --crash-after-requests)
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_messages_are_the_ones_real_servers_print() {
        assert!(oom_traceback(OomStyle::Sglang).contains(
            "ValueError: Loaded weights leave no GPU memory for the KV cache under \
             --mem-fraction-static=0.88. Raise --mem-fraction-static above 0.922 (minimum viable \
             = 1 - available/pre = 0.9210). If using speculative decoding, draft weights are now \
             counted.\n"
        ));
        assert!(
            oom_traceback(OomStyle::Torch)
                .contains("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
        );
    }

    #[test]
    fn loading_lines_end_with_the_bound_address_and_are_in_order() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let lines = loading_lines(&SimConfig::default(), addr, None);
        assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(lines.last().unwrap().1.contains("http://127.0.0.1:4321"));
        assert_eq!(
            line_offset(Duration::from_secs(60), 0.25),
            Duration::from_secs(15)
        );
    }
}
