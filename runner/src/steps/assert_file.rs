//! `assert-file`: checks a file exists (in a container or on the host) and what it holds.

use super::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub const SPEC: BuiltinSpec = BuiltinSpec {
    name: "assert-file",
    summary: "Check that a file or folder exists, in a container or on the host, and optionally its size, hash, content or mode.",
    inputs: &[
        InputSpec {
            name: "path",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The path to check. When it is missing, the failure lists the nearest names in its parent folder.",
        },
        InputSpec {
            name: "container",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Check inside this container (by name); on the host when absent.",
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
            doc: "A regular expression the file's content must match.",
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
            doc: "The file's SHA-256, in hex.",
        },
    ],
    example: r"- uses: assert-file
  with:
    container: server
    path: /tmp/benchmark_eagle3.py
    contains: argparse
",
};
