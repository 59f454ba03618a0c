//! `check-cli-interface`: checks that a command accepts the flags a later step passes it,
//! from its `--help`, before anything expensive starts. Declaration only; `run.rs` beside it
//! runs it, and preflight usually runs it before any job.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "check-cli-interface",
    summary: "Check a command's real flags (from its help: Python argparse or click, Rust clap, GNU getopt-style) against the arguments a later step will pass; on a mismatch, fail with the real usage and the closest real flag for each unknown one. Runs in preflight, before any server starts, when nothing earlier can change the answer (docs/running.md).",
    inputs: &[
        InputSpec {
            name: "command",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The command whose interface is checked (`python3 /tmp/benchmark_eagle3.py`), split into words like a shell would (no shell runs it).",
        },
        InputSpec {
            name: "args",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The arguments a later step passes (`--server-url http://localhost:30000 --max-tokens 256`), read as the command's parser would: every flag must exist, take a value where one is given and none where none is; words left over fail when the command takes no positional arguments. A unique prefix (`--max` for `--max-tokens`) passes with a warning where argparse or getopt would accept it; for argparse, words are read by its own rules (a prefix of several options is ambiguous, single-dash long options such as `-tp`, a dash word is a value only when it is a negative number or holds a blank).",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Run the help inside this container (started by an earlier `start-container` step); on the host when absent. In preflight, a throw-away container of the same image.",
        },
        InputSpec {
            name: "help-flag",
            ty: InputType::String,
            required: false,
            default: Some("--help"),
            doc: "The flag that prints the usage (words, like `command`). A help that is only a summary pointing to `--help=all` (vLLM's `vllm serve --help` lists its config groups only) is followed to that full listing, never taken for the whole interface.",
        },
        InputSpec {
            name: "required-flags",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Flags the command must accept, whether or not `args` uses them (a list, or names separated by blanks or commas).",
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
            doc: "A regular expression the output of the command with `version-flag` must match (`^sglang 0\\.5`).",
        },
    ],
    outputs: &[OutputSpec {
        name: "flags",
        doc: "The flags found in the usage (the long name of each), space-separated.",
    }],
    shell_inputs: &[],
    example: r"- uses: check-cli-interface
  with:
    container: server
    command: python3 /tmp/benchmark_eagle3.py
    args: --server-url http://localhost:30000 --max-tokens 256 --num-runs 5
",
};
