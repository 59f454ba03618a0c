//! `check-cli-interface`: checks that a command accepts the flags a later step passes it,
//! from its `--help`, before anything expensive starts.

use super::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub const SPEC: BuiltinSpec = BuiltinSpec {
    name: "check-cli-interface",
    summary: "Check a command's real flags (from its help) against the arguments a later step will pass; suggest the closest real flag for each unknown one.",
    inputs: &[
        InputSpec {
            name: "command",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The command whose interface is checked (`python3 /tmp/benchmark_eagle3.py`).",
        },
        InputSpec {
            name: "args",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The arguments a later step passes (`--server-url http://localhost:30000 --max-tokens 256`): every flag must exist and take a value where one is given.",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Run the help inside this container; on the host when absent.",
        },
        InputSpec {
            name: "help-flag",
            ty: InputType::String,
            required: false,
            default: Some("--help"),
            doc: "The flag that prints the usage.",
        },
        InputSpec {
            name: "required-flags",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Flags the command must accept, whether or not `args` uses them.",
        },
        InputSpec {
            name: "version-flag",
            ty: InputType::String,
            required: false,
            default: Some("--version"),
            doc: "The flag that prints the version, used with `version-pattern`.",
        },
        InputSpec {
            name: "version-pattern",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "A regular expression the version output must match.",
        },
    ],
    outputs: &[OutputSpec {
        name: "flags",
        doc: "The flags found in the usage, space-separated.",
    }],
    example: r"- uses: check-cli-interface
  with:
    container: server
    command: python3 /tmp/benchmark_eagle3.py
    args: --server-url http://localhost:30000 --max-tokens 256 --num-runs 5
",
};
