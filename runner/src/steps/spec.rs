//! The declaration a built-in step makes about itself: name, inputs with types and defaults,
//! outputs, an example. Validation, the JSON Schema and the docs pages all read these, so
//! they cannot disagree.

/// What a built-in step is and takes.
#[derive(Debug)]
pub struct BuiltinSpec {
    /// The bare name used in `uses:`.
    pub name: &'static str,
    /// One sentence: what the step does.
    pub summary: &'static str,
    pub inputs: &'static [InputSpec],
    pub outputs: &'static [OutputSpec],
    /// Inputs that reach `sh -c` as shell text. Their `${{ }}` values are handed to that shell
    /// as environment variables, and `validate` refuses untrusted contexts in them: a value
    /// there must never become code. Inputs gpuflow splits into words and runs without a shell
    /// (`start-container`'s `command`) are not shell text.
    pub shell_inputs: &'static [&'static str],
    /// A complete step, as YAML under `steps:` (a test loads it).
    pub example: &'static str,
}

impl BuiltinSpec {
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }

    pub fn input_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.inputs.iter().map(|i| i.name)
    }
}

/// One `with:` input of a built-in.
#[derive(Debug)]
pub struct InputSpec {
    pub name: &'static str,
    pub ty: InputType,
    /// A step must give it (there is no default).
    pub required: bool,
    /// The value used when the step does not give one, as it would be written in YAML.
    pub default: Option<&'static str>,
    /// What it means; becomes the docs and the editor tooltip.
    pub doc: &'static str,
}

/// One output, read as `steps.<id>.outputs.<name>`.
#[derive(Debug)]
pub struct OutputSpec {
    pub name: &'static str,
    pub doc: &'static str,
}

/// What values an input takes. Any scalar may also be a `${{ }}` expression, checked when it
/// is evaluated instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputType {
    /// Any text.
    String,
    /// A whole number ≥ 0 (`5`).
    Integer,
    /// Any number (`0.5`, `20`).
    Number,
    /// `true` or `false`.
    Bool,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// A duration: `100ms`, `30s`, `15m`, `1h30m`.
    Duration,
    /// A percentage (`3%`) or a fraction (`0.03`).
    Percent,
    /// A size in bytes with an optional unit: `512m`, `16g`, `1gb`.
    ByteSize,
    /// A whole number, or a list of them (a sweep: `[1, 4, 16]`).
    IntegerOrList,
    /// A list of strings (one string is a list of one).
    List,
    /// A mapping of names to scalars (`env`, `ulimits`).
    Map,
    /// A mapping whose values may themselves be mappings: structured settings such as a
    /// scripted benchmark's `metrics` (`{output_tok_s: {regex: …, unit: tok/s}}`).
    Object,
    /// GPUs as in a job's `gpus:`: `all`, a count, or device ids / UUIDs.
    Gpus,
    /// A mapping of exactly these keys, each a scalar (`credentials`: `username`,
    /// `password`).
    Fields(&'static [&'static str]),
}

impl InputType {
    /// How the type reads in messages and docs: "a duration such as `30s` or `1h30m`".
    pub fn describe(self) -> String {
        match self {
            Self::String => "a string".into(),
            Self::Integer => "a whole number".into(),
            Self::Number => "a number".into(),
            Self::Bool => "`true` or `false`".into(),
            Self::Enum(values) => format!("one of {}", crate::diag::join_quoted(values, "or")),
            Self::Duration => "a duration such as `500ms`, `30s`, `15m` or `1h30m`".into(),
            Self::Percent => "a percentage such as `3%` (or a fraction such as `0.03`)".into(),
            Self::ByteSize => "a size such as `512m` or `16g`".into(),
            Self::IntegerOrList => "a whole number or a list of them".into(),
            Self::List => "a list of strings".into(),
            Self::Map => "a mapping of names to values".into(),
            Self::Object => "a mapping of names to settings".into(),
            Self::Gpus => "`all`, `none`, a number of GPUs, or a list of device ids".into(),
            Self::Fields(keys) => {
                format!("a mapping of {}", crate::diag::join_quoted(keys, "and"))
            }
        }
    }
}
