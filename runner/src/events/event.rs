//! The one thing the engine says to the rest of gpuflow: a stream of [`Event`]s. The live view,
//! `--json`, the stored logs and later the results store all read these; none of them reaches
//! into the engine, and nothing in the engine prints.
//!
//! Log lines arrive here already masked: a secret never reaches a sink.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// The name of the machine gpuflow runs on, where a job's host has no other (`runs-on` matching
/// no `gpuflow.toml` host).
pub const LOCAL_HOST: &str = "local";

/// Something that happened during a run, `elapsed` since the run started. In JSON it is one
/// object: `{"elapsed": 1.234, "type": "step_finished", …the kind's fields}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Seconds since the run started (millisecond precision in JSON).
    pub elapsed: Duration,
    pub kind: EventKind,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let kind = serde_json::to_value(&self.kind).map_err(S::Error::custom)?;
        let mut object = serde_json::Map::new();
        object.insert(
            "elapsed".into(),
            serde_json::json!((self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0),
        );
        if let serde_json::Value::Object(fields) = kind {
            object.extend(fields);
        }
        object.serialize(s)
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// What [`seconds`] wrote, read back (`gpuflow logs` replays a stored run's events).
fn from_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let secs = f64::deserialize(d)?;
    Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
}

impl<'de> Deserialize<'de> for Event {
    /// An `events.jsonl` line or a `--json` line: `elapsed` beside the kind's fields.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut object = serde_json::Map::deserialize(d)?;
        let elapsed = object
            .remove("elapsed")
            .and_then(|e| e.as_f64())
            .and_then(|e| Duration::try_from_secs_f64(e).ok())
            .unwrap_or_default();
        let kind =
            serde_json::from_value(serde_json::Value::Object(object)).map_err(D::Error::custom)?;
        Ok(Self { elapsed, kind })
    }
}

/// Which run of a job: its id and, for a matrix, its cell.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobRef {
    /// The key under `jobs:`.
    pub job: String,
    /// Index of the matrix cell (0 without a matrix).
    pub cell: usize,
    /// GitHub's display form: `bench (nccl, 128)`.
    pub display: String,
}

/// How a job run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobResult {
    Success,
    Failure,
    Cancelled,
    Skipped,
}

impl JobResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
            Self::Skipped => "skipped",
        }
    }
}

/// A step's result, as `steps.<id>.outcome` (before `continue-on-error`) and
/// `steps.<id>.conclusion` (after) read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepOutcome {
    Success,
    Failure,
    Cancelled,
    Skipped,
}

impl StepOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Cancelled => "cancelled",
            Self::Skipped => "skipped",
        }
    }
}

/// A `benchmark` step's key figure, said when the step has measured (`benchmark_result`)
/// and again in the run's headline: the mean across runs with its 95% confidence interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkFigure {
    pub job: JobRef,
    pub step: String,
    /// The step's name.
    pub name: String,
    /// The metric, named as the benchmark's "Across runs" table names it: `decode_tok_s` in
    /// single-stream mode (the step's `output_tok_s`), `output_throughput` under load, a
    /// scripted benchmark's first metric.
    pub metric: String,
    pub unit: String,
    /// The mean of the runs' values.
    pub mean: f64,
    /// The 95% confidence interval of that mean (Student's t); equal to the mean with one run.
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// How many runs the mean is over.
    pub runs: usize,
}

/// One metric's verdict from a `compare-to-baseline` step (`comparison_result`), and in the
/// run's headline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonFigure {
    pub job: JobRef,
    pub step: String,
    pub name: String,
    pub metric: String,
    /// What the compared figure is (`decode tok/s, per-request median`), when the benchmark
    /// said; the benchmark's table shows it as `output_tok_s (decode tok/s, per-request median)`.
    pub meaning: Option<String>,
    /// `regression`, `improvement`, `unchanged`, `inconclusive`, `no-baseline`, `incomparable`.
    pub verdict: String,
    pub unit: String,
    /// This run's value and the baseline's (medians), when known.
    pub current: Option<f64>,
    pub baseline_value: Option<f64>,
    /// Current over baseline, as measured.
    pub ratio: Option<f64>,
    /// The change in percent, positive is better.
    pub change_pct: Option<f64>,
    /// What was compared with, in words.
    pub baseline: String,
}

/// A report a `report` step wrote (`report_written`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportFile {
    pub job: JobRef,
    pub step: String,
    /// The main file (`…/report/report.md`).
    pub path: String,
    /// The commit on the results branch, when `commit:` asked for one.
    pub commit: Option<String>,
}

/// The run's answer, the last event of every run (`run_headline`): each benchmark's key
/// figure, each comparison's verdict, each report's path, in the order they happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub run_id: String,
    pub result: JobResult,
    /// Where the run's logs are stored.
    pub log_dir: String,
    pub benchmarks: Vec<BenchmarkFigure>,
    pub comparisons: Vec<ComparisonFigure>,
    pub reports: Vec<ReportFile>,
    /// The images pulled for the run and how long each took (runs stored before pulls were
    /// counted read as none).
    #[serde(default)]
    pub pulls: Vec<PullFigure>,
}

/// An image pulled for a job run: its size and the time the pull took, which no step's time
/// holds when preflight pulled it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PullFigure {
    pub job: JobRef,
    pub image: String,
    pub bytes: u64,
    pub layers: usize,
    #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
    pub took: Duration,
}

/// Which output stream a log line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    /// Said by gpuflow itself about the step (why it failed, what was refused).
    Runner,
}

/// What happened. Serialized with a `"type"` field naming the variant (`"step_finished"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    RunStarted {
        run_id: String,
        workflow: String,
        /// Where the run's logs are stored.
        log_dir: String,
        jobs: usize,
    },
    RunFinished {
        run_id: String,
        result: JobResult,
    },
    JobQueued {
        job: JobRef,
        /// A matrix cell's values as text, in the matrix's order (`graph-bs: 128`); empty
        /// without a matrix. What a campaign report shows of cells that never ran.
        #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
        matrix: IndexMap<String, String>,
        /// The jobs (keys under `jobs:`) this one waits on, as written: what a job graph
        /// draws (`gpuflow serve`). Absent in runs recorded before it was.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        needs: Vec<String>,
    },
    JobStarted {
        job: JobRef,
    },
    JobSkipped {
        job: JobRef,
        reason: String,
    },
    /// The job cannot run at all (its GPUs can never be had on its host, its `if` or `gpus`
    /// failed to evaluate): why, said once; a `job_finished` with `failure` follows. Not
    /// `job_skipped`, which is a job not run by choice.
    JobCannotRun {
        job: JobRef,
        reason: String,
    },
    /// The job is ready but waits for GPUs (docs/gpus.md); said once per wait. Other jobs
    /// that fit start meanwhile.
    JobWaiting {
        job: JobRef,
        /// `waiting for 2 GPUs (1 of 8 free)`.
        reason: String,
    },
    /// GPUs leased to the job for its whole life, before it started.
    GpusLeased {
        job: JobRef,
        /// Their indexes on the host.
        indexes: Vec<u32>,
        uuids: Vec<String>,
        /// They come from a stand-in inventory file: not real GPUs.
        stand_in: bool,
    },
    JobFinished {
        job: JobRef,
        result: JobResult,
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        duration: Duration,
        /// Why a job that ran failed: its first failed step's message (a search's infeasible
        /// probe is reported with it). `None` for a job that succeeded or never started
        /// (`job_skipped` and `job_cannot_run` say why).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
    StepStarted {
        job: JobRef,
        /// Position in the job, from 1 (steps of a composite action are `3.1`, `3.2`…).
        step: String,
        name: String,
    },
    StepFinished {
        job: JobRef,
        step: String,
        name: String,
        outcome: StepOutcome,
        conclusion: StepOutcome,
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        duration: Duration,
        /// The step's outputs (`steps.<id>.outputs`), whether or not it has an `id`: what a
        /// campaign report reads of `start-container` (`server-key`, `reused`) and
        /// `wait-for-health` (`ready-after`).
        #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
        outputs: IndexMap<String, String>,
    },
    LogLine {
        job: JobRef,
        /// `None` for a container's own output between steps.
        step: Option<String>,
        /// A container's name, when the line is its output rather than a step's.
        container: Option<String>,
        stream: Stream,
        text: String,
    },
    /// A long step saying where it is (`wait-for-health`: how long it has waited and the
    /// server's latest line), about once a second; a live view shows the latest one.
    StepProgress {
        job: JobRef,
        step: String,
        /// Seconds since the step started.
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        waited: Duration,
        message: String,
    },
    /// What a step wrote to `$GITHUB_STEP_SUMMARY` (Markdown), when it wrote anything.
    StepSummary {
        job: JobRef,
        step: String,
        markdown: String,
    },
    /// Where a running `benchmark` step is, a few times a second at most (for a live view;
    /// plain output shows one every couple of seconds and at the end of each run).
    BenchmarkProgress {
        job: JobRef,
        step: String,
        /// The load level (`single-stream`, `concurrency 8`, `10 req/s`).
        level: String,
        /// `warm-up` or `run 2/3`.
        phase: String,
        /// Requests finished in this run.
        done: u64,
        /// Requests this run sends, when known in advance.
        total: Option<u64>,
        errors: u64,
        /// Output tokens per second in this run so far.
        output_tok_s: f64,
    },
    ContainerStarted {
        job: JobRef,
        name: String,
        id: String,
        image: String,
        /// The host (`runs-on`, `--host`) whose engine runs it.
        host: String,
        /// That engine's endpoint (`unix:///var/run/docker.sock`, `ssh://me@node`).
        endpoint: String,
    },
    ContainerRemoved {
        job: JobRef,
        name: String,
    },
    Warning {
        job: Option<JobRef>,
        message: String,
    },
    /// An image being pulled for a job, at most once a second and once when done
    /// (`backend::pull_progress`): preflight's pull (`step: None`) or a step's.
    ImagePull {
        job: JobRef,
        step: Option<String>,
        image: String,
        layers_done: usize,
        layers_total: usize,
        bytes_done: u64,
        /// The sizes known so far: a layer's size is known once its download begins.
        bytes_total: u64,
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        elapsed: Duration,
        finished: bool,
        /// The progress in words (`412.0 MiB of 1.13 GiB, 2 of 5 layers, 52.1 MiB/s, about
        /// 14s left`), as the views show it.
        text: String,
    },
    /// A check run before any job starts (docs/running.md, "Preflight").
    PreflightCheck {
        job: JobRef,
        /// The step's position in the job; `None` for a check of the job's images.
        step: Option<String>,
        name: String,
        outcome: StepOutcome,
        /// Why it failed, with the fix.
        message: Option<String>,
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        duration: Duration,
    },
    /// A `benchmark` step measured: its key figure.
    BenchmarkResult(BenchmarkFigure),
    /// A `compare-to-baseline` step judged a metric.
    ComparisonResult(ComparisonFigure),
    /// A `report` step wrote its report.
    ReportWritten(ReportFile),
    /// The last event of a run, after `run_finished`: its answer in one place.
    RunHeadline(Headline),
    /// Every preflight check is done; none ran when `checks` is 0.
    PreflightFinished {
        checks: usize,
        failed: usize,
        #[serde(serialize_with = "seconds", deserialize_with = "from_seconds")]
        duration: Duration,
    },
}

impl JobRef {
    fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        m(&mut self.job);
        m(&mut self.display);
    }

    /// The job's texts, then each of `texts`, handed to `m`.
    fn and<'a>(
        &mut self,
        m: &mut dyn FnMut(&mut String),
        texts: impl IntoIterator<Item = &'a mut String>,
    ) {
        self.strings_mut(m);
        each(m, texts);
    }
}

impl EventKind {
    /// Hands every text the event holds to `m`, which may change it: how the masking sink
    /// ([`super::mask::MaskingSink`]) hides secrets in every event, whatever its kind. The match
    /// is exhaustive on purpose: a new kind must say which of its fields are text.
    pub fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        use EventKind as K;
        match self {
            K::RunStarted {
                run_id,
                workflow,
                log_dir,
                jobs: _,
            } => each(m, [run_id, workflow, log_dir]),
            K::RunFinished { run_id, result: _ } => m(run_id),
            K::JobQueued { job, matrix, needs } => {
                job.strings_mut(m);
                matrix.values_mut().for_each(&mut *m);
                needs.iter_mut().for_each(m);
            }
            K::JobStarted { job } => job.strings_mut(m),
            K::JobFinished { job, failure, .. } => job.and(m, failure),
            K::JobSkipped { job, reason }
            | K::JobCannotRun { job, reason }
            | K::JobWaiting { job, reason } => job.and(m, [reason]),
            K::GpusLeased {
                job,
                indexes: _,
                uuids,
                stand_in: _,
            } => job.and(m, uuids),
            K::StepStarted { job, step, name } => job.and(m, [step, name]),
            K::StepFinished {
                job,
                step,
                name,
                outputs,
                ..
            } => job.and(m, [step, name].into_iter().chain(outputs.values_mut())),
            K::LogLine {
                job,
                step,
                container,
                stream: _,
                text,
            } => job.and(m, step.iter_mut().chain(container).chain([text])),
            K::StepProgress {
                job, step, message, ..
            } => job.and(m, [step, message]),
            K::StepSummary {
                job,
                step,
                markdown,
            } => job.and(m, [step, markdown]),
            K::BenchmarkProgress {
                job,
                step,
                level,
                phase,
                ..
            } => job.and(m, [step, level, phase]),
            K::ContainerStarted {
                job,
                name,
                id,
                image,
                host,
                endpoint,
            } => job.and(m, [name, id, image, host, endpoint]),
            K::ContainerRemoved { job, name } => job.and(m, [name]),
            K::Warning { job, message } => {
                if let Some(job) = job {
                    job.strings_mut(m);
                }
                m(message);
            }
            K::PreflightCheck {
                job,
                step,
                name,
                message,
                ..
            } => job.and(m, step.iter_mut().chain(message).chain([name])),
            K::ImagePull {
                job,
                step,
                image,
                text,
                ..
            } => job.and(m, step.iter_mut().chain([image, text])),
            K::BenchmarkResult(b) => b.strings_mut(m),
            K::ComparisonResult(c) => c.strings_mut(m),
            K::ReportWritten(r) => r.strings_mut(m),
            K::RunHeadline(h) => h.strings_mut(m),
            K::PreflightFinished { .. } => {}
        }
    }
}

/// Hands each of `texts` to `m`.
fn each<'a>(m: &mut dyn FnMut(&mut String), texts: impl IntoIterator<Item = &'a mut String>) {
    texts.into_iter().for_each(m);
}

impl Headline {
    fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        m(&mut self.run_id);
        m(&mut self.log_dir);
        self.benchmarks.iter_mut().for_each(|b| b.strings_mut(m));
        self.comparisons.iter_mut().for_each(|c| c.strings_mut(m));
        self.reports.iter_mut().for_each(|r| r.strings_mut(m));
        for p in &mut self.pulls {
            p.job.strings_mut(m);
            m(&mut p.image);
        }
    }
}

impl BenchmarkFigure {
    fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        self.job.strings_mut(m);
        for s in [
            &mut self.step,
            &mut self.name,
            &mut self.metric,
            &mut self.unit,
        ] {
            m(s);
        }
    }
}

impl ComparisonFigure {
    fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        self.job.strings_mut(m);
        for s in [
            &mut self.step,
            &mut self.name,
            &mut self.metric,
            &mut self.verdict,
            &mut self.unit,
            &mut self.baseline,
        ] {
            m(s);
        }
        if let Some(meaning) = &mut self.meaning {
            m(meaning);
        }
    }
}

impl ReportFile {
    fn strings_mut(&mut self, m: &mut dyn FnMut(&mut String)) {
        self.job.strings_mut(m);
        m(&mut self.step);
        m(&mut self.path);
        if let Some(commit) = &mut self.commit {
            m(commit);
        }
    }
}

/// Where events go. Called from the engine's tasks as things happen; an implementation must
/// not hold on to the caller for long (it prints, writes a file, or stores).
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);
}

/// Keeps every event, for tests and for tools that want the whole run at the end.
#[derive(Clone, Debug, Default)]
pub struct CollectSink {
    events: Arc<Mutex<Vec<Event>>>,
}

impl CollectSink {
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl EventSink for CollectSink {
    fn emit(&self, event: Event) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }
}

/// Hands every event to several sinks in order (the terminal and the stored logs).
pub struct Tee(pub Vec<Arc<dyn EventSink>>);

impl EventSink for Tee {
    fn emit(&self, event: Event) {
        if let Some((last, rest)) = self.0.split_last() {
            for sink in rest {
                sink.emit(event.clone());
            }
            last.emit(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_type_tag_and_seconds() {
        let e = Event {
            elapsed: Duration::from_millis(1500),
            kind: EventKind::JobSkipped {
                job: JobRef {
                    job: "build".into(),
                    cell: 0,
                    display: "build".into(),
                },
                reason: "a needed job failed".into(),
            },
        };
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["type"], "job_skipped");
        assert_eq!(json["elapsed"], 1.5);
        assert_eq!(json["job"]["job"], "build");
    }

    /// A campaign report reads a cell's values and its steps' outputs back from
    /// `events.jsonl`; a line written before they were recorded still reads, without them.
    #[test]
    fn matrix_outputs_and_failure_round_trip_and_are_optional() {
        let job = JobRef {
            job: "tune".into(),
            cell: 1,
            display: "tune (128)".into(),
        };
        let finished = Event {
            elapsed: Duration::from_secs(2),
            kind: EventKind::StepFinished {
                job: job.clone(),
                step: "1".into(),
                name: "server".into(),
                outcome: StepOutcome::Success,
                conclusion: StepOutcome::Success,
                duration: Duration::from_millis(1500),
                outputs: IndexMap::from([("server-key".to_string(), "ab12".to_string())]),
            },
        };
        let json = serde_json::to_string(&finished).unwrap();
        assert!(
            json.contains(r#""outputs":{"server-key":"ab12"}"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), finished);
        let old = r#"{"elapsed":1.0,"type":"job_queued","job":{"job":"tune","cell":1,"display":"tune (128)"}}"#;
        let read: Event = serde_json::from_str(old).unwrap();
        assert_eq!(
            read.kind,
            EventKind::JobQueued {
                job: job.clone(),
                matrix: IndexMap::new(),
                needs: Vec::new(),
            }
        );
        let old = r#"{"elapsed":1.0,"type":"job_finished","job":{"job":"tune","cell":1,"display":"tune (128)"},"result":"failure","duration":1.0}"#;
        let read: Event = serde_json::from_str(old).unwrap();
        assert!(matches!(
            read.kind,
            EventKind::JobFinished { failure: None, .. }
        ));
    }
}
