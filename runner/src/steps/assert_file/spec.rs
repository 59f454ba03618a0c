//! `assert-file`: checks a file exists (in a container or on the host) and what it holds.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "assert-file",
    summary: "Check that a file or folder exists, in a container or on the host, and optionally its size, hash, content or mode.",
    inputs: &[
        InputSpec {
            name: "path",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The path to check; on the host, a relative path starts at the workspace. When it is missing, the failure says what is there instead: the closest names in its folder (\"did you mean\"), or that the folder does not exist either and which folder up the path does.",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Check inside this running container (the name its `start-container` step gave it), with the container's own `sh`, `test`, `stat`, `sha256sum`, `grep` and `ls`; on the host when absent.",
        },
        InputSpec {
            name: "kind",
            ty: InputType::Enum(&["file", "dir", "any"]),
            required: false,
            default: Some("file"),
            doc: "What the path must be.",
        },
        InputSpec {
            name: "min-size",
            ty: InputType::ByteSize,
            required: false,
            default: None,
            doc: "The file must be at least this large (`1k`, `2g`).",
        },
        InputSpec {
            name: "sha256",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The file's SHA-256, in hex.",
        },
        InputSpec {
            name: "contains",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "A regular expression one line of the file must match. In a container `grep -E` matches it, so keep to the syntax both share (`.`, `[]`, `*`, `+`, `?`, `|`, `()`, `^`, `$`).",
        },
        InputSpec {
            name: "executable",
            ty: InputType::Bool,
            required: false,
            default: None,
            doc: "The file must (`true`) or must not (`false`) be executable.",
        },
    ],
    outputs: &[
        OutputSpec {
            name: "size",
            doc: "The file's size in bytes.",
        },
        OutputSpec {
            name: "sha256",
            doc: "The file's SHA-256, in hex, when the `sha256` input asked for it (hashing a large model file takes time).",
        },
    ],
    shell_inputs: &[],
    example: r"- uses: assert-file
  with:
    container: server
    path: /tmp/benchmark_eagle3.py
    contains: argparse
",
};
