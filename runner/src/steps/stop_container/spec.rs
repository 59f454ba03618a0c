//! `stop-container`: ends a container started by `start-container` before the job ends.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "stop-container",
    summary: "Stop (and by default remove) a container started earlier in the job.",
    inputs: &[
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The container's name (the `name` or `id` of its `start-container` step).",
        },
        InputSpec {
            name: "timeout",
            ty: InputType::Duration,
            required: false,
            default: Some("10s"),
            doc: "How long to wait after SIGTERM before SIGKILL.",
        },
        InputSpec {
            name: "remove",
            ty: InputType::Bool,
            required: false,
            default: Some("true"),
            doc: "Remove the container once stopped.",
        },
    ],
    outputs: &[OutputSpec {
        name: "exit-code",
        doc: "The container's exit code.",
    }],
    shell_inputs: &[],
    example: r"- uses: stop-container
  with:
    container: server
    timeout: 30s
",
};
