//! Built-in steps (`uses: wait-for-health`): one file per step, each declaring its inputs and
//! outputs in one [`BuiltinSpec`] that validation, the JSON Schema and the docs all read.
//! Execution arrives with the engine; this module must not know YAML or the loader.

mod assert_file;
mod benchmark;
mod check_cli_interface;
mod compare_to_baseline;
pub mod docs;
mod report;
mod spec;
mod start_container;
mod stop_container;
mod wait_for_health;

pub use spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

static BUILTINS: [BuiltinSpec; 8] = [
    start_container::SPEC,
    stop_container::SPEC,
    wait_for_health::SPEC,
    assert_file::SPEC,
    check_cli_interface::SPEC,
    benchmark::SPEC,
    compare_to_baseline::SPEC,
    report::SPEC,
];

/// Every built-in step, in the order the docs list them.
pub fn builtins() -> &'static [BuiltinSpec] {
    &BUILTINS
}

/// Inputs of built-ins that reach `sh -c` as shell text, as `(step, input)`. Their `${{ }}`
/// values are handed to that shell as environment variables (as a `run:` script's are), and
/// `validate` refuses untrusted contexts in them: a value there must never become code.
/// `start-container`'s `command` and `check-cli-interface`'s `command`/`args` are split into
/// words by gpuflow and run without a shell, so they are not here.
pub const SHELL_INPUTS: &[(&str, &str)] =
    &[("benchmark", "command"), ("wait-for-health", "command")];

/// Whether `input` of the built-in `step` is shell text (see [`SHELL_INPUTS`]).
pub fn is_shell_input(step: &str, input: &str) -> bool {
    SHELL_INPUTS.iter().any(|&(s, i)| s == step && i == input)
}

/// The built-in called `name`, if there is one.
pub fn builtin(name: &str) -> Option<&'static BuiltinSpec> {
    BUILTINS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_inputs_are_unique_per_step() {
        let mut names: Vec<_> = builtins().iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), builtins().len());
        for b in builtins() {
            let mut inputs: Vec<_> = b.input_names().collect();
            inputs.sort_unstable();
            inputs.dedup();
            assert_eq!(inputs.len(), b.inputs.len(), "{}", b.name);
        }
    }

    #[test]
    fn required_inputs_have_no_default_and_every_input_is_documented() {
        for b in builtins() {
            assert!(!b.summary.is_empty());
            for i in b.inputs {
                assert!(
                    !(i.required && i.default.is_some()),
                    "{}.{}",
                    b.name,
                    i.name
                );
                assert!(i.doc.ends_with('.'), "{}.{} doc", b.name, i.name);
            }
        }
    }

    #[test]
    fn lookup_by_name() {
        assert_eq!(builtin("benchmark").unwrap().name, "benchmark");
        assert!(builtin("nope").is_none());
    }
}
