//! A complete built-in step, as ARCHITECTURE.md describes adding one: `greet` takes `who` and
//! answers `greeting`. It is not in the registry (no workflow can use it); the tests compile
//! it and run it through the same [`Builtin`] interface the engine uses, so the way the page
//! shows stays true. A real step puts each part in its own file of `steps/<name>/`.

use indexmap::IndexMap;

use super::{
    Builtin, BuiltinSpec, EngineUse, InputSpec, InputType, OutputSpec, Outputs, StepCall,
    StepError, StepFuture,
};
use crate::events::{EventKind, Stream};

/// `spec.rs`: what validation, the JSON Schema and `gpuflow docs` read.
static SPEC: BuiltinSpec = BuiltinSpec {
    name: "greet",
    summary: "Says hello to someone, in the step's log and as an output.",
    inputs: &[InputSpec {
        name: "who",
        ty: InputType::String,
        required: true,
        default: None,
        doc: "Who to greet.",
    }],
    outputs: &[OutputSpec {
        name: "greeting",
        doc: "The greeting.",
    }],
    shell_inputs: &[],
    example: "- uses: greet\n  with:\n    who: world\n",
};

/// `mod.rs`: the step as the registry lists it.
pub struct Greet;

impl Builtin for Greet {
    fn spec(&self) -> &'static BuiltinSpec {
        &SPEC
    }

    fn engine(&self) -> EngineUse {
        EngineUse::IfReached
    }

    fn run<'a>(&'a self, call: StepCall<'a, '_>) -> StepFuture<'a> {
        Box::pin(run(call))
    }
}

/// `run.rs`: the step's work, with its inputs evaluated and defaulted by the engine. A wrong
/// input is a [`StepError::input`]: the engine says it at that input's place in the workflow.
async fn run(call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let who = call.text("who").ok_or_else(|| {
        StepError::input(
            "who",
            "`who` is empty",
            Some("say who to greet, e.g. `who: world`".into()),
        )
    })?;
    let greeting = format!("hello, {who}");
    call.host.emit(EventKind::LogLine {
        job: call.job.clone(),
        step: Some(call.step.key.to_string()),
        container: None,
        stream: Stream::Runner,
        text: greeting.clone(),
    });
    Ok(IndexMap::from([("greeting".to_string(), greeting)]))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::events::JobRef;
    use crate::events::Masker;
    use crate::expr::Value;
    use crate::steps::{StepContext, StepHost};

    /// A run that keeps what steps emit.
    #[derive(Default)]
    struct Recorder {
        events: Mutex<Vec<EventKind>>,
        masker: Arc<Masker>,
        folder: PathBuf,
    }

    impl StepHost for Recorder {
        fn emit(&self, kind: EventKind) {
            self.events.lock().unwrap().push(kind);
        }
        fn masker(&self) -> &Arc<Masker> {
            &self.masker
        }
        fn workspace(&self) -> &Path {
            &self.folder
        }
        fn store(&self) -> &Path {
            &self.folder
        }
        fn run_id(&self) -> &str {
            "run-1"
        }
        fn log_dir(&self) -> &Path {
            &self.folder
        }
        fn host_of(&self, _: &JobRef) -> Option<&str> {
            None
        }
        fn github(&self) -> Option<&Value> {
            None
        }
    }

    async fn greet(who: &str) -> (Result<Outputs, StepError>, Vec<EventKind>) {
        let recorder = Arc::new(Recorder::default());
        let host: Arc<dyn StepHost> = recorder.clone();
        let job = JobRef {
            job: "hello".into(),
            cell: 0,
            display: "hello".into(),
        };
        let inputs = IndexMap::from([("who".to_string(), Value::String(who.into()))]);
        let (env, mut recorded) = (IndexMap::new(), Vec::new());
        let mut step = StepContext {
            key: "1",
            step_id: None,
            label: "greet",
            job_id: "hello",
            matrix: Default::default(),
            env: &env,
            recorded: &mut recorded,
            cancel: CancellationToken::new(),
            gpus: None,
            shell: IndexMap::new(),
            action_inputs: IndexMap::new(),
            outputs_on_failure: IndexMap::new(),
            budget: None,
        };
        let outputs = Greet
            .run(StepCall {
                name: Greet.spec().name,
                inputs: &inputs,
                containers: None,
                host: &host,
                job: &job,
                job_gpus: None,
                step: &mut step,
            })
            .await;
        let events = std::mem::take(&mut *recorder.events.lock().unwrap());
        (outputs, events)
    }

    #[tokio::test]
    async fn the_example_step_runs_through_the_builtin_interface() {
        let (outputs, events) = greet("world").await;
        assert_eq!(outputs.unwrap()["greeting"], "hello, world");
        assert!(
            matches!(&events[..], [EventKind::LogLine { text, .. }] if text == "hello, world"),
            "{events:?}"
        );
        let (outputs, _) = greet("").await;
        let e = outputs.unwrap_err();
        assert_eq!(e.input_name(), Some("who"));
        assert_eq!(e.hint(), Some("say who to greet, e.g. `who: world`"));
    }

    #[test]
    fn its_example_uses_its_declared_inputs() {
        let example: serde_json::Value = yaml_serde::from_str(SPEC.example).unwrap();
        let with = &example[0]["with"];
        for input in SPEC.inputs.iter().filter(|i| i.required) {
            assert!(with.get(input.name).is_some(), "{}", input.name);
        }
    }
}
