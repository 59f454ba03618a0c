//! `wait-for-health`: waits until a server is ready, and fails at once when the container it
//! watches dies.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "wait-for-health",
    summary: "Wait until a server is ready (HTTP, TCP, a log line, Docker's healthcheck or a command); fail at once if its container exits.",
    inputs: &[
        InputSpec {
            name: "probe",
            ty: InputType::Enum(&["http", "tcp", "log", "docker", "command"]),
            required: false,
            default: Some("http"),
            doc: "How readiness is checked: `http` (a request to `url`), `tcp` (a connection to `address`), `log` (`pattern` in the container's output), `docker` (the image's own healthcheck), `command` (exits 0).",
        },
        InputSpec {
            name: "url",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `http`: the URL to request (`http://localhost:30000/health`). A host that is the name of a container this job started (`http://server:30000/health`) is reached at that container's address, and that container is watched. A server on the host, with no container started by the job, is polled without a Docker engine (a GPU machine without Docker).",
        },
        InputSpec {
            name: "address",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `tcp`: `HOST:PORT` to connect to. The port of a server that loads a model is often open before it is ready: prefer `http` where there is a health URL.",
        },
        InputSpec {
            name: "pattern",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `log`: a regular expression matched against each output line of `container` as it is printed, from its first line on (`fired up and ready to roll`).",
        },
        InputSpec {
            name: "command",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `command`: a shell command run every `interval` until it exits 0, inside `container` when given (`docker exec … sh -c`), else on the host.",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The container to watch, by the name its `start-container` step gave it: if it exits, restarts or is OOM-killed while the step waits, the step fails at once with the exit code, the OOM flag, its last log lines and the recognised cause (CUDA out of memory, not enough memory, address in use, a missing path, NCCL errors, a Python exception). Required for `log` and `docker`.",
        },
        InputSpec {
            name: "expect-status",
            ty: InputType::Integer,
            required: false,
            default: Some("200"),
            doc: "For `http`: the status code that means ready.",
        },
        InputSpec {
            name: "body-contains",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `http`: the body must contain this text.",
        },
        InputSpec {
            name: "body-regex",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `http`: the body must match this regular expression.",
        },
        InputSpec {
            name: "json-field",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `http`: a JSON field that must equal `json-value`, as a dotted path (`status`).",
        },
        InputSpec {
            name: "json-value",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `http`: the value `json-field` must have (`ok`).",
        },
        InputSpec {
            name: "timeout",
            ty: InputType::Duration,
            required: false,
            default: Some("10m"),
            doc: "Give up after this long (`30s`, `15m`, `2h`); the failure shows the last attempt's answer and the container's last lines.",
        },
        InputSpec {
            name: "interval",
            ty: InputType::Duration,
            required: false,
            default: Some("50ms"),
            doc: "Time between attempts of `http`, `tcp`, `command` and `docker`, so readiness is noticed within tens of milliseconds. `log` lines and container exits are noticed as they happen, without polling.",
        },
        InputSpec {
            name: "tail-lines",
            ty: InputType::Integer,
            required: false,
            default: Some("20"),
            doc: "How many of the container's last log lines to show when it fails.",
        },
    ],
    outputs: &[
        OutputSpec {
            name: "ready-after",
            doc: "Seconds from the step's start until the server was ready (`12.345`).",
        },
        OutputSpec {
            name: "kv-cache-tokens",
            doc: "The KV cache size in tokens the watched server's log reported (SGLang's `KV Cache is allocated. #tokens: N`, vLLM's `GPU KV cache size: N tokens`, `CPU` on its CPU build); unset when it said none.",
        },
        OutputSpec {
            name: "kv-cache-tokens-estimate",
            doc: "The KV cache room `start-container` estimated for the watched server (docs/memory.md), set beside `kv-cache-tokens`; the step's log says both.",
        },
    ],
    shell_inputs: &["command"],
    example: r"- id: ready
  uses: wait-for-health
  with:
    url: http://server:30000/health
    container: server
    timeout: 2h
",
};
