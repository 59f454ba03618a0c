//! The simulator's settings: every flag of `gpuflow-sim`, with its `GPUFLOW_SIM_*` environment
//! twin, and the checks that make a setting usable before anything starts.
//!
//! This file knows nothing of HTTP or timing; the other files read a finished [`SimConfig`].

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// How the simulated server looks, how fast it generates and how it fails.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "gpuflow-sim",
    version,
    about = "A simulated OpenAI-compatible LLM server: the stand-in for SGLang or vLLM in tests, \
             demos and dry runs (docs/simulator.md)"
)]
pub struct SimConfig {
    /// Address to listen on: loopback unless asked (`0.0.0.0` in a container, whose port is
    /// published: the image passes it).
    #[arg(long, env = "GPUFLOW_SIM_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,

    /// Port to listen on; 0 picks a free one (the bound address is printed).
    #[arg(long, env = "GPUFLOW_SIM_PORT", default_value_t = 30000)]
    pub port: u16,

    /// The model name served at `/v1/models` and echoed in responses.
    #[arg(long, env = "GPUFLOW_SIM_MODEL_NAME", default_value = "gpuflow-sim")]
    pub model_name: String,

    /// Simulated model load: the port is open but `/health` answers 503 until it has passed.
    #[arg(long, env = "GPUFLOW_SIM_STARTUP_DELAY", default_value = "0s", value_parser = parse_duration)]
    pub startup_delay: Duration,

    /// Time to first token, counted from the moment a request gets a generation slot.
    #[arg(long, env = "GPUFLOW_SIM_TTFT", default_value = "50ms", value_parser = parse_duration)]
    pub ttft: Duration,

    /// Decode rate in tokens per second, after the first chunk.
    #[arg(
        long,
        env = "GPUFLOW_SIM_TOKENS_PER_SECOND",
        default_value_t = 90.0,
        value_parser = parse_rate
    )]
    pub tokens_per_second: f64,

    /// Tokens per streamed event, as with speculative decoding (EAGLE-3 accepts several tokens
    /// per step); the gap between events is tokens-per-chunk / tokens-per-second.
    #[arg(
        long,
        env = "GPUFLOW_SIM_TOKENS_PER_CHUNK",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=4096)
    )]
    pub tokens_per_chunk: u32,

    /// Draft tokens per speculative step, as vLLM's `num_speculative_tokens`: what `/metrics`
    /// reports as drafted. Each chunk is one step whose tokens beyond the first are the
    /// accepted drafts, so the acceptance length served is --tokens-per-chunk; lowering
    /// --tokens-per-chunk below this + 1 is an acceptance collapse. Default: tokens-per-chunk
    /// − 1 (0: no speculative decoding, and no speculative series in `/metrics`).
    #[arg(
        long,
        env = "GPUFLOW_SIM_NUM_SPECULATIVE_TOKENS",
        value_parser = clap::value_parser!(u32).range(0..=4095)
    )]
    pub num_speculative_tokens: Option<u32>,

    /// Tokens the KV cache holds: `/metrics` reports the prompt and generated tokens of the
    /// running requests as a share of it (vLLM's `kv_cache_usage_perc`, SGLang's
    /// `token_usage`), at most 1.
    #[arg(
        long,
        env = "GPUFLOW_SIM_KV_CACHE_TOKENS",
        default_value_t = 262_144,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub kv_cache_tokens: u64,

    /// Random jitter of each gap (and of the time to first token), as a fraction: 0.1 draws
    /// each gap uniformly within ±10% of its nominal length. Must be below 1.
    #[arg(long, env = "GPUFLOW_SIM_JITTER", default_value_t = 0.0, value_parser = parse_jitter)]
    pub jitter: f64,

    /// Seed of the jitter; the same seed gives every request number the same gaps.
    #[arg(long, env = "GPUFLOW_SIM_SEED", default_value_t = 0)]
    pub seed: u64,

    /// Requests generated at once; more wait in a queue (or are refused, see
    /// --reject-when-busy). Unlimited when not given.
    #[arg(
        long,
        env = "GPUFLOW_SIM_MAX_CONCURRENCY",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_concurrency: Option<u32>,

    /// Answer 503 instead of queueing when --max-concurrency requests are already running.
    #[arg(
        long,
        env = "GPUFLOW_SIM_REJECT_WHEN_BUSY",
        requires = "max_concurrency"
    )]
    pub reject_when_busy: bool,

    /// Completion length when a request gives neither `max_tokens` nor `max_completion_tokens`.
    #[arg(
        long,
        env = "GPUFLOW_SIM_DEFAULT_MAX_TOKENS",
        default_value_t = 128,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub default_max_tokens: u32,

    /// Context length: prompt plus completion tokens beyond it are refused with 400, as vLLM
    /// does (see --stop-at-context-limit for llama-server's way). Also bounds the memory one
    /// request can take.
    #[arg(
        long,
        visible_alias = "context-length",
        env = "GPUFLOW_SIM_MAX_MODEL_LEN",
        default_value_t = 131_072,
        value_parser = clap::value_parser!(u32).range(1..=16_777_216)
    )]
    pub max_model_len: u32,

    /// Stop at this many tokens with `finish_reason: "stop"`, as if the model emitted its
    /// end-of-sequence token, unless the request sets `ignore_eos`.
    #[arg(long, env = "GPUFLOW_SIM_EOS_AFTER", value_parser = clap::value_parser!(u32).range(1..))]
    pub eos_after: Option<u32>,

    /// Never send `usage`, like servers that ignore `stream_options.include_usage`.
    #[arg(long, env = "GPUFLOW_SIM_NO_USAGE")]
    pub no_usage: bool,

    /// Where a stream's `usage` goes: `separate` sends it in its own `"choices": []` event
    /// after the finish_reason chunk (OpenAI, llama-server); `final` puts it on the
    /// finish_reason chunk itself.
    #[arg(long, env = "GPUFLOW_SIM_USAGE_CHUNK", value_enum, default_value_t = UsageChunk::Separate)]
    pub usage_chunk: UsageChunk,

    /// With --max-model-len N, behave like llama-server instead of vLLM: a prompt of N tokens
    /// or more gets a 400 `exceed_context_size_error`; a prompt that fits generates until the
    /// context is full, then stops with `finish_reason: "length"`.
    #[arg(long, env = "GPUFLOW_SIM_STOP_AT_CONTEXT_LIMIT")]
    pub stop_at_context_limit: bool,

    /// Remember the prompts seen: the leading tokens a new prompt shares with an earlier one
    /// are cached, the time to first token is charged only for the rest, and
    /// `usage.prompt_tokens_details.cached_tokens` reports the cached count.
    #[arg(long, env = "GPUFLOW_SIM_PREFIX_CACHE")]
    pub prefix_cache: bool,

    /// Like llama-server: streams say `Connection: keep-alive`, yet the connection is closed
    /// about 0.75 ms after a stream's last byte, without reading another request on it.
    #[arg(long, env = "GPUFLOW_SIM_CLOSE_AFTER_STREAM")]
    pub close_after_stream: bool,

    /// Fail the model load with an out-of-memory error like the real servers print, then exit
    /// with status 1 (after --startup-delay, or --crash-after-delay when given).
    #[arg(long, env = "GPUFLOW_SIM_OOM_AT_START")]
    pub oom_at_start: bool,

    /// Which server's out-of-memory message --oom-at-start prints.
    #[arg(long, env = "GPUFLOW_SIM_OOM_STYLE", value_enum, default_value_t = OomStyle::Sglang)]
    pub oom_style: OomStyle,

    /// With --oom-at-start: fail this long after start instead of at the end of the load.
    #[arg(
        long,
        env = "GPUFLOW_SIM_CRASH_AFTER_DELAY",
        value_parser = parse_duration,
        requires = "oom_at_start"
    )]
    pub crash_after_delay: Option<Duration>,

    /// Crash with a CUDA-error traceback and exit status 1 once this many requests have been
    /// answered.
    #[arg(
        long,
        env = "GPUFLOW_SIM_CRASH_AFTER_REQUESTS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub crash_after_requests: Option<u64>,

    /// The model's folder, as SGLang's `--model-path`: with it, the load allocates memory like
    /// SGLang (or vLLM, with --gpu-memory-utilization) from its `config.json` and the flags
    /// below, prints the KV cache size it got, and fails the load when the weights do not fit
    /// (docs/simulator.md, "Memory").
    #[arg(long, env = "GPUFLOW_SIM_MODEL_PATH")]
    pub model_path: Option<PathBuf>,

    /// The memory of each simulated GPU, in MiB (an H100 80GB's by default).
    #[arg(long, env = "GPUFLOW_SIM_GPU_MEMORY_MIB", default_value_t = 81_559,
          value_parser = clap::value_parser!(u64).range(1024..))]
    pub gpu_memory_mib: u64,

    /// SGLang's share of the GPU's memory for weights and KV cache (its default for the
    /// tensor-parallel size when not given).
    #[arg(long, env = "GPUFLOW_SIM_MEM_FRACTION_STATIC", value_parser = parse_fraction)]
    pub mem_fraction_static: Option<f64>,

    /// vLLM's share of the GPU's memory: allocate and speak like vLLM instead of SGLang.
    #[arg(long, env = "GPUFLOW_SIM_GPU_MEMORY_UTILIZATION", value_parser = parse_fraction,
          conflicts_with = "mem_fraction_static")]
    pub gpu_memory_utilization: Option<f64>,

    /// Tensor-parallel size: the weights and KV heads are split over this many GPUs.
    #[arg(long, visible_aliases = ["tp", "tensor-parallel-size"], env = "GPUFLOW_SIM_TP_SIZE",
          default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub tp_size: u64,

    /// At most this many tokens of KV cache, as SGLang's flag.
    #[arg(long, env = "GPUFLOW_SIM_MAX_TOTAL_TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_total_tokens: Option<u64>,

    /// The KV cache's dtype (`fp8_e4m3`, `bfloat16`); `auto` is the model's.
    #[arg(long, env = "GPUFLOW_SIM_KV_CACHE_DTYPE")]
    pub kv_cache_dtype: Option<String>,

    /// A speculative draft model's folder: its weights and KV cache take memory too.
    #[arg(long, env = "GPUFLOW_SIM_SPECULATIVE_DRAFT_MODEL_PATH")]
    pub speculative_draft_model_path: Option<PathBuf>,

    /// Memory the server needs outside its share (activations, CUDA graphs), in MiB. When the
    /// rest of the GPU is smaller (the share set too high), the load fails with CUDA out of
    /// memory while capturing CUDA graphs.
    #[arg(long, env = "GPUFLOW_SIM_ACTIVATION_MIB", default_value_t = 2048)]
    pub activation_mib: u64,

    /// Append the server-side record (one JSON object per line: start, ready, each request
    /// with the time each chunk was sent) to this file.
    #[arg(long, env = "GPUFLOW_SIM_RECORD")]
    pub record: Option<PathBuf>,

    /// Chunks kept in memory for `GET /sim/record`; the oldest requests are dropped beyond it
    /// (the --record file keeps everything).
    #[arg(long, env = "GPUFLOW_SIM_RECORD_MEMORY", default_value_t = 1_000_000)]
    pub record_memory: usize,

    /// Write the moment the server became ready (JSON: `mono_ns`, `unix_ns`) to this file.
    #[arg(long, env = "GPUFLOW_SIM_READY_FILE")]
    pub ready_file: Option<PathBuf>,

    /// Worker threads; 0 means one per CPU this process may run on (so `taskset` pins it).
    #[arg(long, env = "GPUFLOW_SIM_WORKER_THREADS", default_value_t = 0)]
    pub worker_threads: usize,

    /// On SIGTERM or SIGINT, how long running requests may go on before they are cut.
    #[arg(long, env = "GPUFLOW_SIM_SHUTDOWN_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
}

/// Where --usage-chunk puts a stream's `usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UsageChunk {
    /// An extra event `{"choices": [], "usage": {…}}` after the finish_reason chunk, as
    /// OpenAI and llama-server send when `stream_options.include_usage` is set.
    Separate,
    /// On the finish_reason chunk itself; no extra event.
    Final,
}

/// The out-of-memory message printed by --oom-at-start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OomStyle {
    /// SGLang's `ValueError: Loaded weights leave no GPU memory for the KV cache under
    /// --mem-fraction-static=0.88. …`
    Sglang,
    /// PyTorch's `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …`
    Torch,
}

impl Default for SimConfig {
    /// The documented defaults, ignoring the environment (so tests are not steered by it).
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 30000,
            model_name: "gpuflow-sim".to_owned(),
            startup_delay: Duration::ZERO,
            ttft: Duration::from_millis(50),
            tokens_per_second: 90.0,
            tokens_per_chunk: 1,
            num_speculative_tokens: None,
            kv_cache_tokens: 262_144,
            jitter: 0.0,
            seed: 0,
            max_concurrency: None,
            reject_when_busy: false,
            default_max_tokens: 128,
            max_model_len: 131_072,
            eos_after: None,
            no_usage: false,
            usage_chunk: UsageChunk::Separate,
            stop_at_context_limit: false,
            prefix_cache: false,
            close_after_stream: false,
            oom_at_start: false,
            oom_style: OomStyle::Sglang,
            crash_after_delay: None,
            crash_after_requests: None,
            model_path: None,
            gpu_memory_mib: 81_559,
            mem_fraction_static: None,
            gpu_memory_utilization: None,
            tp_size: 1,
            max_total_tokens: None,
            kv_cache_dtype: None,
            speculative_draft_model_path: None,
            activation_mib: 2048,
            record: None,
            record_memory: 1_000_000,
            ready_file: None,
            worker_threads: 0,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl SimConfig {
    /// A server for tests: loopback, a free port, no load time.
    pub fn local() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            ..Self::default()
        }
    }

    /// The nominal gap between two chunks: tokens-per-chunk tokens at tokens-per-second.
    pub fn chunk_gap(&self) -> Duration {
        let seconds = f64::from(self.tokens_per_chunk) / self.tokens_per_second;
        Duration::try_from_secs_f64(seconds).unwrap_or(MAX_DURATION)
    }

    /// Draft tokens per speculative step: --num-speculative-tokens, or tokens-per-chunk − 1.
    pub fn speculative_tokens(&self) -> u32 {
        self.num_speculative_tokens
            .unwrap_or(self.tokens_per_chunk.saturating_sub(1))
    }

    /// The checks the flags' parsers make, for a config built in code: every problem, one per
    /// line, or nothing.
    pub fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Err(err) = check_rate(self.tokens_per_second) {
            problems.push(format!("`tokens_per_second`: {err}"));
        }
        if let Err(err) = check_jitter(self.jitter) {
            problems.push(format!("`jitter`: {err}"));
        }
        if !(1..=16_777_216).contains(&self.max_model_len) {
            problems.push("`max_model_len`: expected 1 to 16777216 tokens".to_owned());
        }
        if self.tokens_per_chunk == 0 {
            problems.push("`tokens_per_chunk`: expected at least 1".to_owned());
        }
        if let Some(drafts) = self.num_speculative_tokens
            && self.tokens_per_chunk > drafts + 1
        {
            problems.push(format!(
                "`num_speculative_tokens`: {drafts} draft tokens cannot give {} tokens per chunk \
                 (at most {} per step: the drafts and one token of the target model's own)",
                self.tokens_per_chunk,
                drafts + 1
            ));
        }
        if self.kv_cache_tokens == 0 {
            problems.push("`kv_cache_tokens`: expected at least 1".to_owned());
        }
        let durations = [
            ("startup_delay", Some(self.startup_delay)),
            ("ttft", Some(self.ttft)),
            ("crash_after_delay", self.crash_after_delay),
            ("shutdown_grace", Some(self.shutdown_grace)),
        ];
        for (name, duration) in durations {
            if let Some(Err(err)) = duration.map(check_duration) {
                problems.push(format!("`{name}`: {err}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    /// How long the simulated load lasts before the server is ready or fails.
    pub fn load_time(&self) -> Duration {
        match (self.oom_at_start, self.crash_after_delay) {
            (true, Some(delay)) => delay,
            _ => self.startup_delay,
        }
    }
}

/// Longer waits are refused: a year is far beyond any model load, and the bound keeps every
/// deadline (start + ttft + k·gap) far from the clock's range.
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text.trim()).map_err(|err| {
        format!("{err} (write a number with a unit, e.g. `500ms`, `60s` or `2m`)")
    })?;
    check_duration(duration)
}

fn check_duration(duration: Duration) -> Result<Duration, String> {
    if duration > MAX_DURATION {
        return Err("expected at most a year (`365days`)".to_owned());
    }
    Ok(duration)
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(
            "expected a share of the GPU's memory above 0 and at most 1, e.g. `0.85`".to_owned(),
        ),
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| RATE_EXPECTED.to_owned())
        .and_then(check_rate)
}

const RATE_EXPECTED: &str =
    "expected a number of tokens per second from 0.001 to 1000000000, e.g. `90`";

fn check_rate(rate: f64) -> Result<f64, String> {
    if (0.001..=1e9).contains(&rate) {
        Ok(rate)
    } else {
        Err(RATE_EXPECTED.to_owned())
    }
}

fn parse_jitter(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| JITTER_EXPECTED.to_owned())
        .and_then(check_jitter)
}

const JITTER_EXPECTED: &str = "expected a fraction from 0 up to (not including) 1, e.g. `0.1`";

fn check_jitter(jitter: f64) -> Result<f64, String> {
    if (0.0..1.0).contains(&jitter) {
        Ok(jitter)
    } else {
        Err(JITTER_EXPECTED.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn parse(args: &[&str]) -> Result<SimConfig, clap::Error> {
        SimConfig::try_parse_from(std::iter::once("gpuflow-sim").chain(args.iter().copied()))
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        SimConfig::command().debug_assert();
    }

    #[test]
    fn flags_set_the_documented_fields() {
        let config = parse(&[
            "--port=0",
            "--startup-delay=60s",
            "--ttft=20ms",
            "--tokens-per-second=200",
            "--tokens-per-chunk=4",
            "--max-concurrency=2",
            "--reject-when-busy",
            "--oom-at-start",
            "--crash-after-delay=3s",
            "--usage-chunk=final",
            "--stop-at-context-limit",
            "--prefix-cache",
            "--close-after-stream",
        ])
        .unwrap();
        assert_eq!(config.usage_chunk, UsageChunk::Final);
        assert!(config.stop_at_context_limit && config.prefix_cache && config.close_after_stream);
        assert_eq!(config.port, 0);
        assert_eq!(config.startup_delay, Duration::from_secs(60));
        assert_eq!(config.ttft, Duration::from_millis(20));
        assert_eq!(config.chunk_gap(), Duration::from_millis(20));
        assert_eq!(config.max_concurrency, Some(2));
        assert!(config.reject_when_busy);
        assert_eq!(config.load_time(), Duration::from_secs(3));
    }

    #[test]
    fn no_flags_give_the_default() {
        let parsed = parse(&[]).unwrap();
        let default = SimConfig::default();
        assert_eq!(format!("{parsed:?}"), format!("{default:?}"));
    }

    #[test]
    fn a_config_built_in_code_is_checked_like_flags() {
        assert_eq!(SimConfig::default().check(), Ok(()));
        let bad = SimConfig {
            tokens_per_second: 0.0,
            jitter: 1.5,
            ttft: Duration::MAX,
            ..SimConfig::default()
        };
        let problems = bad.check().unwrap_err();
        assert_eq!(problems.lines().count(), 3, "{problems}");
        assert!(
            problems.contains("`ttft`: expected at most a year"),
            "{problems}"
        );
    }

    #[test_case(&["--ttft=5"], "write a number with a unit" ; "duration without unit")]
    #[test_case(&["--ttft=1000years"], "at most a year" ; "duration beyond a year")]
    #[test_case(&["--tokens-per-second=0"], "from 0.001 to 1000000000" ; "zero rate")]
    #[test_case(&["--tokens-per-second=inf"], "tokens per second" ; "infinite rate")]
    #[test_case(&["--tokens-per-second=NaN"], "tokens per second" ; "not a number")]
    #[test_case(&["--jitter=1"], "up to (not including) 1" ; "jitter of one")]
    #[test_case(&["--tokens-per-chunk=0"], "0" ; "zero tokens per chunk")]
    #[test_case(&["--crash-after-delay=1s"], "--oom-at-start" ; "crash delay needs oom")]
    #[test_case(&["--reject-when-busy"], "--max-concurrency" ; "reject needs a limit")]
    #[test_case(&["--mem-fraction-static=1.2"], "at most 1" ; "fraction above one")]
    #[test_case(&["--mem-fraction-static=0.8", "--gpu-memory-utilization=0.8"], "cannot be used with" ; "two servers' fractions")]
    fn bad_values_are_refused_with_a_reason(args: &[&str], expected: &str) {
        let err = parse(args).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
}
