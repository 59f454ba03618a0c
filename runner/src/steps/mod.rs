//! Built-in steps (`uses: wait-for-health`): one folder per step, holding its declaration
//! (`spec.rs`: inputs, outputs and docs, which validation, the JSON Schema and the docs read),
//! its execution (`run.rs`) and its helpers, and one [`Builtin`] implementation tying them
//! together. [`REGISTRY`] below is the only list of them: adding a built-in is a folder and a
//! line there (ARCHITECTURE.md shows one).

mod assert_file;
mod benchmark;
mod builtin;
mod check_cli_interface;
mod compare_to_baseline;
mod context;
pub mod docs;
mod error;
#[cfg(test)]
mod example_step;
mod host;
mod report;
mod spec;
mod start_container;
mod stop_container;
mod wait_for_health;

pub use assert_file::{InContainer as FileInContainer, Place as FilePlace};
pub use benchmark::server_version;
pub use builtin::{Builtin, Effect, EngineUse, Outputs, StepCall, StepFuture};
pub use check_cli_interface::server_cli;
pub use context::{Recorded, StepContext, StepGpus};
pub use error::StepError;
pub use host::StepHost;
pub use spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};
pub use start_container::{memory as server_memory, required_paths};
pub use wait_for_health::causes;

/// Every built-in step, in the order the docs list them.
static REGISTRY: [&dyn Builtin; 8] = [
    &start_container::StartContainer,
    &stop_container::StopContainer,
    &wait_for_health::WaitForHealth,
    &assert_file::AssertFile,
    &check_cli_interface::CheckCliInterface,
    &benchmark::Benchmark,
    &compare_to_baseline::CompareToBaseline,
    &report::Report,
];

/// Every built-in step's declaration, in the order the docs list them.
pub fn builtins() -> impl Iterator<Item = &'static BuiltinSpec> {
    REGISTRY.iter().map(|b| b.spec())
}

/// The declaration of the built-in called `name`, if there is one.
pub fn builtin(name: &str) -> Option<&'static BuiltinSpec> {
    registered(name).map(|b| b.spec())
}

/// The built-in called `name`, to run it.
pub fn registered(name: &str) -> Option<&'static dyn Builtin> {
    REGISTRY.iter().copied().find(|b| b.spec().name == name)
}

/// What the built-in called `name` does ([`Effect`]); `None` for an unknown name.
pub fn effect(name: &str) -> Option<Effect> {
    registered(name).map(|b| b.effect())
}

/// Whether `input` of the built-in `step` is shell text ([`BuiltinSpec::shell_inputs`]): its
/// `${{ }}` values are handed to that shell as environment variables (as a `run:` script's
/// are), and `validate` refuses untrusted contexts in it.
pub fn is_shell_input(step: &str, input: &str) -> bool {
    builtin(step).is_some_and(|b| b.shell_inputs.contains(&input))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_inputs_are_unique_per_step() {
        let mut names: Vec<_> = builtins().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), builtins().count());
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
    fn shell_inputs_are_declared_inputs() {
        for b in builtins() {
            for input in b.shell_inputs {
                assert!(b.input(input).is_some(), "{}.{input}", b.name);
            }
        }
        assert!(is_shell_input("benchmark", "command"));
        assert!(!is_shell_input("start-container", "command"));
    }

    #[test]
    fn lookup_by_name() {
        assert_eq!(builtin("benchmark").unwrap().name, "benchmark");
        assert!(builtin("nope").is_none());
    }
}
