//! `wait-for-health`: waits until a server is ready, and fails at once when the container it
//! watches dies.

use super::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub const SPEC: BuiltinSpec = BuiltinSpec {
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
            doc: "For `http`: the URL to request (`http://localhost:30000/health`).",
        },
        InputSpec {
            name: "address",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `tcp`: `HOST:PORT` to connect to.",
        },
        InputSpec {
            name: "pattern",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `log`: a regular expression matched against each output line (`fired up and ready to roll`).",
        },
        InputSpec {
            name: "command",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "For `command`: run until it exits 0 (inside `container` when given, else on the host).",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The container to watch: its exit, restart or OOM kill fails the step at once with its last log lines. Required for `log` and `docker`.",
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
            doc: "Give up after this long (`30s`, `15m`, `2h`).",
        },
        InputSpec {
            name: "interval",
            ty: InputType::Duration,
            required: false,
            default: Some("50ms"),
            doc: "Time between polls (`http`, `tcp`, `command`); `log` and container exits are noticed without polling.",
        },
        InputSpec {
            name: "tail-lines",
            ty: InputType::Integer,
            required: false,
            default: Some("50"),
            doc: "How many of the container's last log lines to show when it fails.",
        },
    ],
    outputs: &[OutputSpec {
        name: "ready-after",
        doc: "Seconds from the step's start until the server was ready.",
    }],
    example: r"- uses: wait-for-health
  with:
    url: http://localhost:30000/health
    container: server
    timeout: 20m
",
};
