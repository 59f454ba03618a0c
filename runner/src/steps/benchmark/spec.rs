//! `benchmark`: the built-in load generator for OpenAI-compatible servers, or a user's
//! benchmark script whose metrics are read from its output.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

const fn input(
    name: &'static str,
    ty: InputType,
    default: Option<&'static str>,
    doc: &'static str,
) -> InputSpec {
    InputSpec {
        name,
        ty,
        required: false,
        default,
        doc,
    }
}

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "benchmark",
    summary: "Measure an OpenAI-compatible server with the built-in load generator (single-stream, closed or open loop), or run a benchmark script and read its metrics. The result is recorded in the results store (`.gpuflow/results.db`) with the environment fingerprint, for `compare-to-baseline` and `gpuflow history`. Metric definitions and the result format: docs/benchmark.md.",
    inputs: &[
        input(
            "target",
            InputType::String,
            None,
            "The server's base URL (`http://localhost:30000`). Required unless `command` is given.",
        ),
        input(
            "endpoint",
            InputType::Enum(&["completions", "chat"]),
            Some("completions"),
            "`completions` (`/v1/completions`) or `chat` (`/v1/chat/completions`); both streamed.",
        ),
        input(
            "model",
            InputType::String,
            None,
            "The model name sent in requests. Defaults to the first of `/v1/models`.",
        ),
        input(
            "mode",
            InputType::Enum(&["single-stream", "concurrency", "request-rate"]),
            None,
            "`single-stream`: one request at a time (decode speed); `concurrency`: a closed loop of N users; `request-rate`: an open loop at a given arrival rate. Default: `request-rate` when `request-rate` is given, `concurrency` when `concurrency` is, otherwise `single-stream`.",
        ),
        input(
            "concurrency",
            InputType::IntegerOrList,
            None,
            "For `concurrency`: the number of requests in flight; a list sweeps (`[1, 8, 64]`). For `request-rate`: one number, the most requests in flight (vLLM's `--max-concurrency`).",
        ),
        input(
            "request-rate",
            InputType::Number,
            None,
            "For `request-rate`: requests per second.",
        ),
        input(
            "arrival",
            InputType::Enum(&["poisson", "constant", "gamma"]),
            Some("poisson"),
            "For `request-rate`: how arrivals are spaced.",
        ),
        input(
            "burstiness",
            InputType::Number,
            Some("1.0"),
            "For `gamma` arrivals: the shape factor (1.0 is Poisson; lower is burstier).",
        ),
        input(
            "seed",
            InputType::Integer,
            None,
            "Seed of the synthetic prompts and the arrival schedule. Without it, each run salts its prompts afresh (the salt is recorded as `prompt_seed`), so a server's prefix cache cannot serve a second run; give the recorded `prompt_seed` to send exactly the same prompts again.",
        ),
        input(
            "requests",
            InputType::Integer,
            None,
            "Requests per run (after warm-up). Either this or `duration`; without both, 3 for `single-stream`, otherwise 100 (at least 4 × the largest concurrency).",
        ),
        input(
            "duration",
            InputType::Duration,
            None,
            "How long each run sends requests (`2m`); requests in flight at the end finish and count. Either this or `requests`.",
        ),
        input(
            "runs",
            InputType::Integer,
            Some("1"),
            "Repetitions; the result reports each run, the median, a 95% interval and the variation.",
        ),
        input(
            "warmup",
            InputType::Integer,
            Some("1"),
            "Warm-up requests (or script runs) before measuring, excluded from every metric.",
        ),
        input(
            "prompts",
            InputType::Enum(&["synthetic", "jsonl", "sharegpt"]),
            Some("synthetic"),
            "Where prompts come from: synthetic text of exactly `input-tokens` tokens, or `prompt-file` (JSONL or ShareGPT format).",
        ),
        input(
            "prompt-file",
            InputType::String,
            None,
            "The prompt file for `prompts: jsonl` or `sharegpt`.",
        ),
        input(
            "input-tokens",
            InputType::Integer,
            Some("128"),
            "Length of synthetic prompts, in tokens.",
        ),
        input(
            "output-tokens",
            InputType::Integer,
            Some("128"),
            "Tokens to generate per request (with `ignore_eos` for synthetic prompts, so every request generates exactly this many).",
        ),
        input(
            "ignore-eos",
            InputType::Bool,
            None,
            "Ask the server to ignore end-of-sequence. Defaults to `true` for synthetic prompts.",
        ),
        input(
            "request-timeout",
            InputType::Duration,
            Some("10m"),
            "A request taking longer counts as a timeout error.",
        ),
        input(
            "idle-timeout",
            InputType::Duration,
            Some("1m"),
            "A stream silent for longer counts as a timeout error.",
        ),
        input(
            "max-error-rate",
            InputType::Percent,
            Some("0%"),
            "Fail the step when more requests than this fail.",
        ),
        input(
            "slo",
            InputType::Map,
            None,
            "Service-level objectives for `request_goodput`, in milliseconds: `ttft_ms`, `tpot_ms`, `e2el_ms` (`{ttft_ms: 500, tpot_ms: 50}`). A request is good when it meets every one given.",
        ),
        input(
            "server-metrics",
            InputType::String,
            Some("true"),
            "Scrape the server's Prometheus `/metrics` before, during and after each run: `true` (the target's `/metrics`), `false`, or its URL. Records `spec_accept_length`, `prefix_cache_hit_rate`, `queue_len` and `kv_cache_usage` where the server reports them (docs/benchmark.md, \"Server-side metrics\"). A server without `/metrics` is said once; it never fails the benchmark.",
        ),
        input(
            "server-metric-names",
            InputType::List,
            None,
            "More `/metrics` series to record, as `server.<name>`: a counter's increase over the run, a gauge's mean during it. `name`, `name{label=\"value\"}` to pick series, and `higher` or `lower` after it to say which is better (`vllm:num_preemptions_total lower`).",
        ),
        input(
            "fresh",
            InputType::Bool,
            Some("false"),
            "Measure a freshly started server: the job's `start-container` step starts its server anew instead of adopting one an earlier cell or run left running (docs/campaigns.md). A result's fingerprint says whether its server was warm either way.",
        ),
        input(
            "command",
            InputType::String,
            None,
            "Run this benchmark script instead of the built-in generator (`runs` and `warmup` repeat it).",
        ),
        input(
            "container",
            InputType::String,
            None,
            "Run `command` inside this container (the `name` a `start-container` step of the job gave it); on the host, in the workspace, when absent.",
        ),
        input(
            "gpu-idle",
            InputType::Bool,
            Some("false"),
            "Before timing: the job's GPUs must run no process (docs/gpus.md, \"Before timing\").",
        ),
        input(
            "gpu-min-free-memory",
            InputType::ByteSize,
            None,
            "Before timing: each of the job's GPUs must have this much memory free (`40g`).",
        ),
        input(
            "gpu-max-ecc-errors",
            InputType::Integer,
            None,
            "Before timing: at most this many uncorrected (volatile) ECC errors per GPU (`0`).",
        ),
        input(
            "gpu-persistence-mode",
            InputType::Bool,
            Some("false"),
            "Before timing: the job's GPUs must be in persistence mode.",
        ),
        input(
            "gpu-min-sm-clock",
            InputType::Percent,
            None,
            "Before timing: each GPU's SM clock must be at least this share of its maximum (`90%`).",
        ),
        input(
            "gpu-check-fails",
            InputType::Enum(&["fail", "wait"]),
            Some("fail"),
            "What a failed before-timing check does: `fail` the step at once, or `wait` (checking every 5 s) until the checks pass or `gpu-check-timeout` has passed.",
        ),
        input(
            "gpu-check-timeout",
            InputType::Duration,
            Some("10m"),
            "With `gpu-check-fails: wait`: how long to wait for the checks to pass.",
        ),
        input(
            "gpu-telemetry",
            InputType::Bool,
            Some("true"),
            "Sample the job's GPUs (utilisation, memory, power, SM clock, temperature) every 100 ms through NVML (stand-in GPUs: their file's scripted values) while the step measures, attach the series and a summary to the result, and record the energy each measured run drew (`energy_j`, `joules_per_output_token`); where there is nothing to sample the result says so.",
        ),
        input(
            "metrics",
            InputType::Object,
            None,
            "For `command`: metric name → where to read it in the script's standard output: `{json: path}` (a dotted path, `results.runs.0.tok_s`, into the JSON object the script printed as its output or its last such line) or `{regex: '…(?P<value>[0-9.]+)'}` (the capture `value` of the last match), with `unit` and `direction` (`higher` or `lower` is better; defaulted from the unit). Each metric becomes an output of the step (its median over `runs`) and is recorded with one sample per run.",
        ),
    ],
    outputs: &[
        OutputSpec {
            name: "output_throughput",
            doc: "Output tokens per second over the run (median across runs).",
        },
        OutputSpec {
            name: "request_throughput",
            doc: "Completed requests per second.",
        },
        OutputSpec {
            name: "total_token_throughput",
            doc: "Input and output tokens per second.",
        },
        OutputSpec {
            name: "ttft_ms",
            doc: "Median time to first token, in milliseconds.",
        },
        OutputSpec {
            name: "tpot_ms",
            doc: "Median time per output token after the first, in milliseconds.",
        },
        OutputSpec {
            name: "itl_ms",
            doc: "Median gap between token-carrying chunks, in milliseconds.",
        },
        OutputSpec {
            name: "e2el_ms",
            doc: "Median end-to-end request latency, in milliseconds.",
        },
        OutputSpec {
            name: "decode_tok_s",
            doc: "Single-stream decode speed: tokens after the first chunk over the time between first and last token.",
        },
        OutputSpec {
            name: "e2e_tok_s",
            doc: "Single-stream tokens per second over the whole request.",
        },
        OutputSpec {
            name: "output_tok_s",
            doc: "The headline output tokens per second: `decode_tok_s` in single-stream mode, `output_throughput` otherwise.",
        },
        OutputSpec {
            name: "tokens_per_chunk",
            doc: "Mean tokens per streamed chunk (the speculative acceptance the client sees).",
        },
        OutputSpec {
            name: "errors",
            doc: "Failed requests, all kinds together.",
        },
        OutputSpec {
            name: "result-file",
            doc: "Path of the JSON result beside the step's log (`.gpuflow/runs/<run>/<job>/<step>.result.json`; keys as `vllm bench serve --save-result`), with the per-request lines in `….result.requests.jsonl`.",
        },
    ],
    shell_inputs: &["command"],
    example: r"- id: bench
  uses: benchmark
  with:
    target: http://localhost:30000
    mode: single-stream
    output-tokens: 256
    runs: 5
    warmup: 1
",
};

#[cfg(test)]
mod tests {
    use super::SPEC;
    use crate::bench::{BenchConfig, BenchInputs, Mode};
    use serde_json::{Map, Value};

    /// The inputs the step reads itself rather than handing them to the load generator.
    fn step_own(name: &str) -> bool {
        matches!(name, "command" | "container" | "metrics" | "fresh")
            || super::super::gpu_timing::is_gpu_input(name)
    }

    fn text(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect()
    }

    #[test]
    fn every_input_is_the_generators_or_the_steps_own() {
        let declared: Vec<&str> = SPEC.input_names().collect();
        for name in BenchInputs::NAMES {
            assert!(declared.contains(name), "`{name}` is not declared");
        }
        for name in declared {
            assert!(
                BenchInputs::NAMES.contains(&name) || step_own(name),
                "`{name}` is declared but read by nobody"
            );
        }
    }

    /// What docs and the JSON Schema show as a default is what the load generator uses when
    /// the input is left out.
    #[test]
    fn every_declared_default_is_the_generators() {
        for input in SPEC.inputs.iter().filter(|i| !step_own(i.name)) {
            let read = match input.default {
                Some(default) => BenchInputs::from_json(&text(&[(input.name, default)])),
                None => BenchInputs::from_json(&Map::new()),
            };
            assert_eq!(
                read.unwrap(),
                BenchInputs::default(),
                "the declared default of `{}`",
                input.name
            );
        }
    }

    #[test]
    fn every_declared_default_given_explicitly_reads_the_same() {
        // The engine passes the declared defaults along with the step's own inputs.
        let mut inputs: Map<String, Value> = SPEC
            .inputs
            .iter()
            .filter(|i| !step_own(i.name))
            .filter_map(|i| Some((i.name.to_owned(), Value::from(i.default?))))
            .collect();
        inputs.insert("target".into(), "http://h:1".into());
        inputs.insert("concurrency".into(), "[2, 4]".into());
        let c = BenchConfig::from_inputs(&BenchInputs::from_json(&inputs).unwrap()).unwrap();
        assert_eq!(c.mode, Mode::Concurrency(vec![2, 4]));
        let bare = text(&[("target", "http://h:1"), ("concurrency", "[2, 4]")]);
        let bare = BenchConfig::from_inputs(&BenchInputs::from_json(&bare).unwrap()).unwrap();
        assert_eq!(c, bare);
    }

    #[test]
    fn the_gpu_checks_declared_default_ask_for_no_check() {
        let defaults = SPEC
            .inputs
            .iter()
            .filter(|i| super::super::gpu_timing::is_gpu_input(i.name))
            .filter_map(|i| Some((i.name.to_owned(), i.default?.to_owned())))
            .collect();
        assert!(
            super::super::gpu_timing::checks_from(&defaults)
                .unwrap()
                .is_none()
        );
    }
}
