//! Executing `benchmark`: the built-in load generator ([`crate::bench`]) against a server's
//! URL, or the user's script (`command:`) on the host or in one of the job's containers with
//! its metrics read from the output. Either way the result is written beside the step's log
//! (`.gpuflow/runs/<id>/<job>/<step>.result.json`), returned as outputs, and recorded in the
//! results store with the environment fingerprint as the step finishes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indexmap::IndexMap;

use super::budget;
use super::energy::{self, LevelWindows, RunWindow};
use super::gpu_timing;
use super::level_metrics;
use super::recording::{Measured, ServerFacts, record};
use super::script_metrics::{self, MetricSpec, OutputTail};
use crate::backend::{ExecSpec, LogLine, OutputStream};
use crate::bench::stats::AcrossRuns;
use crate::bench::{BenchConfig, BenchError, BenchInputs, ConfigError, Mode, Progress};
use crate::engine::containers::JobContainers;
use crate::events::{BenchmarkFigure, EventKind, JobRef, Stream};
use crate::expr::Value;
use crate::gpu::telemetry::{Sampler, Telemetry};
use crate::run_logs::slug;
use crate::steps::StepContext;
use crate::steps::StepHost;
use crate::steps::{Outputs, StepCall, StepError};
use crate::store::{Direction, NewMetric, RunStatus};

/// How often the live progress line is repeated while a run goes on.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Runs the step; returns its outputs. A benchmark that measured something is recorded even
/// when it then fails the step (too many errors), so the failure can be looked at later.
/// `containers` is `None` when the job has not reached a Docker engine (a GPU machine without
/// Docker, a server started on the host): the generator and a script on the host need none.
pub async fn run(call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let StepCall {
        inputs,
        containers,
        host,
        job,
        step,
        ..
    } = call;
    let all_texts = as_text(inputs);
    let (gpu_texts, texts): (IndexMap<String, String>, IndexMap<String, String>) = all_texts
        .into_iter()
        .partition(|(k, _)| gpu_timing::is_gpu_input(k));
    let checks = gpu_timing::checks_from(&gpu_texts)?;
    let started_at_ms = crate::store::now_ms();
    let server = match containers.as_deref() {
        Some(containers) => ServerFacts::of(containers).await,
        None => ServerFacts::default(),
    };
    let mut definition = definition(&texts, step.env);
    budget::mark(&mut definition, step.budget);
    let say = Sayer {
        host,
        job,
        key: step.key,
    };
    let result_path = result_path(host.as_ref(), job, step);
    if let Some(checks) = &checks {
        gpu_timing::before_timing(step.gpus.as_ref(), checks, &step.cancel, &|m| say.line(m))
            .await?;
    }
    let sampler = gpu_timing::start_telemetry(
        step.gpus.as_ref(),
        gpu_texts.get("gpu-telemetry").is_none_or(|v| v != "false"),
    );
    let measured = match texts.get("command") {
        Some(command) => {
            budget::script_note(step.budget).inspect(|m| say.line(m));
            let script = Script {
                command,
                inputs,
                texts: &texts,
            };
            scripted(&script, containers, step, &say, &result_path).await
        }
        None => measure_with_generator(inputs, containers, step, &say, &result_path).await,
    };
    let telemetry = telemetry(sampler, &say);
    let Finished {
        outputs,
        mut metrics,
        failure,
        key,
        mut meanings,
        windows,
        ..
    } = measured?;
    let energy = energy::metrics(&telemetry, &windows);
    for line in &energy.lines {
        say.line(line);
    }
    metrics.extend(energy.metrics);
    meanings.extend(energy.meanings);
    let id = record(
        host,
        step,
        &server,
        Measured {
            definition,
            metrics,
            status: if failure.is_some() {
                RunStatus::Failure
            } else {
                RunStatus::Success
            },
            started_at_ms,
            meanings,
        },
        &telemetry,
    )?;
    say.line(&format!(
        "recorded as result {id} in `{}`",
        host.store().display()
    ));
    if let Some(key) = key {
        host.emit(EventKind::BenchmarkResult(key.figure(job, step)));
    }
    match failure {
        Some(message) => {
            step.outputs_on_failure = outputs;
            Err(message.into())
        }
        None => Ok(outputs),
    }
}

/// What a measurement gives back: the step's outputs, the metrics to store, a failure to
/// report once they are stored, the key figure and what each metric is.
struct Finished {
    outputs: IndexMap<String, String>,
    metrics: Vec<NewMetric>,
    failure: Option<String>,
    key: Option<KeyFigure>,
    meanings: BTreeMap<String, String>,
    /// When each measured run ran: the windows energy is integrated over.
    windows: Vec<LevelWindows>,
    /// Requests sent to the server, warm-ups included (0 when a script measured).
    requests_sent: u64,
}

/// A benchmark's key metric across its runs: what the run's headline shows.
struct KeyFigure {
    metric: String,
    unit: String,
    across: AcrossRuns,
}

/// The load generator's inputs, typed, from the step's evaluated `with:` (`command`,
/// `container`, `metrics` and the GPU checks are the step's own).
impl KeyFigure {
    /// The figure as the run's headline shows it.
    fn figure(self, job: &JobRef, step: &StepContext<'_>) -> BenchmarkFigure {
        BenchmarkFigure {
            job: job.clone(),
            step: step.key.to_string(),
            name: step.label.to_string(),
            metric: self.metric,
            unit: self.unit,
            mean: self.across.mean,
            ci95_low: self.across.ci95_low,
            ci95_high: self.across.ci95_high,
            runs: self.across.values.len(),
        }
    }
}

/// What defines the experiment, for the result's series: the inputs but the target (the
/// address is where the server listens today, not what it is: a port published elsewhere
/// next time is the same experiment) and what is read of the server's `/metrics` (watching
/// more of it changes no measurement), and the `env:` values the command reads.
const NOT_THE_EXPERIMENT: [&str; 4] = ["target", "server-metrics", "server-metric-names", "fresh"];

fn definition(
    texts: &IndexMap<String, String>,
    env: &IndexMap<String, String>,
) -> BTreeMap<String, String> {
    let mut definition: BTreeMap<String, String> = texts
        .iter()
        .filter(|(k, _)| !NOT_THE_EXPERIMENT.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // A value passed to the command through `env:` (the safe form for pushed values) is as
    // much a part of the experiment as one written into it: `--max-tokens "$MAX_TOKENS"` at
    // 256 and at 512 are two experiments.
    if let Some(command) = texts.get("command") {
        for (name, value) in env {
            if command.contains(&format!("${name}")) || command.contains(&format!("${{{name}}}")) {
                definition.insert(format!("env.{name}"), value.clone());
            }
        }
    }
    definition
}

/// The built-in load generator against `target`; a job's container named there is measured
/// at its address on the job's network.
async fn measure_with_generator(
    inputs: &IndexMap<String, Value>,
    containers: Option<&mut JobContainers>,
    step: &StepContext<'_>,
    say: &Sayer<'_>,
    result_path: &std::path::Path,
) -> Result<Finished, StepError> {
    let mut bench = bench_inputs(inputs)?;
    let mut measured = None;
    if let Some(target) = &bench.target
        && let Some(containers) = containers.as_deref()
        && let Some((address, container)) = container_address(target, containers).await
    {
        say.line(&format!(
            "`{container}` is a container of this job: measuring it at `{address}` on its network"
        ));
        bench.target = Some(address);
        measured = Some(container);
    }
    let finished = generator(&bench, containers.as_deref(), step, say, result_path).await?;
    // What the server served, for whoever adopts it next (`gpuflow servers`, fingerprints).
    if let Some(containers) = containers {
        containers.count_served(measured.as_deref(), finished.requests_sent);
    }
    Ok(finished)
}

/// The GPU telemetry sampled while measuring, said in the log.
fn telemetry(sampler: Result<Sampler, String>, say: &Sayer<'_>) -> Telemetry {
    let telemetry = match sampler {
        Ok(sampler) => sampler.finish(),
        Err(reason) => Telemetry::Unavailable { reason },
    };
    match &telemetry {
        Telemetry::Sampled {
            summary, stand_in, ..
        } => say.line(&format!(
            "GPU telemetry{}: {} samples per GPU every 100 ms, with the result",
            if *stand_in {
                " (stand-in: the file's scripted values, not real GPUs)"
            } else {
                ""
            },
            summary.first().map_or(0, |s| s.samples)
        )),
        Telemetry::Unavailable { reason } => {
            say.line(&format!("no GPU telemetry: {reason}"));
        }
    }
    telemetry
}

fn bench_inputs(inputs: &IndexMap<String, Value>) -> Result<BenchInputs, ConfigError> {
    let json: serde_json::Map<String, serde_json::Value> = inputs
        .iter()
        .filter(|(name, _)| BenchInputs::NAMES.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.to_json()))
        .collect();
    BenchInputs::from_json(&json)
}

/// Inputs as text, as the result's definition records them; mappings and lists as JSON.
fn as_text(inputs: &IndexMap<String, Value>) -> IndexMap<String, String> {
    inputs
        .iter()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::Null => return None,
                Value::Object(_) | Value::Array(_) => v.to_json().to_string(),
                other => other.to_expr_string(),
            };
            (!text.is_empty()).then(|| (k.clone(), text))
        })
        .collect()
}

/// A target whose host is the name of a container this job started (`http://server:30000`)
/// as that container's address on its network (`http://172.18.0.2:30000`), with the name:
/// the generator runs in gpuflow's process, where Docker's names do not resolve but the
/// local engine's networks are routed. `None` for any other target, and on a remote engine,
/// whose networks this machine cannot reach (publish the port there instead).
async fn container_address(target: &str, containers: &JobContainers) -> Option<(String, String)> {
    if !matches!(
        containers.docker.endpoint(),
        crate::backend::Endpoint::Unix(_)
    ) {
        return None;
    }
    let (scheme, rest) = target.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let started = containers.started.get(host)?;
    let info = containers
        .docker
        .api("inspect_container", &started.id)
        .inspect_container(&started.id, None)
        .await
        .ok()?;
    let ip = info
        .network_settings?
        .networks?
        .into_values()
        .filter_map(|n| n.ip_address)
        .find(|ip| !ip.is_empty())?;
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    Some((format!("{scheme}://{ip}{port}{path}"), host.to_string()))
}

/// `<log dir>/<job>/<step>-<name>.result.json`, beside the step's log.
fn result_path(host: &dyn StepHost, job: &JobRef, step: &StepContext<'_>) -> PathBuf {
    // Masked here, not by the sink: a file name is no event. The names are masked before they
    // are made file-name safe, as the log store's are (from masked events), so the file stays
    // beside the step's log and a secret in a step's `name:` or a matrix value is not in it.
    let masked = |name: &str| slug(&host.masker().mask(name));
    host.log_dir().join(masked(&job.display)).join(format!(
        "{}-{}.result.json",
        step.key.replace('.', "-"),
        masked(step.label)
    ))
}

/// Says lines about the step, as gpuflow (not as the step's own output).
struct Sayer<'a> {
    host: &'a Arc<dyn StepHost>,
    job: &'a JobRef,
    key: &'a str,
}

impl Sayer<'_> {
    fn line(&self, text: &str) {
        self.emit(Stream::Runner, text);
    }

    fn emit(&self, stream: Stream, text: &str) {
        self.host.emit(EventKind::LogLine {
            job: self.job.clone(),
            step: Some(self.key.to_string()),
            container: None,
            stream,
            // Masked by the run's sink (`MaskingSink`), as every event is.
            text: text.to_string(),
        });
    }
}

async fn generator(
    inputs: &BenchInputs,
    containers: Option<&JobContainers>,
    step: &StepContext<'_>,
    say: &Sayer<'_>,
    result_path: &std::path::Path,
) -> Result<Finished, StepError> {
    let mut config = BenchConfig::from_inputs(inputs)?;
    budget::shorten(&mut config, step.budget).inspect(|m| say.line(m));
    let last = Mutex::new(None::<Instant>);
    let progress = |p: Progress| {
        let end_of_run = p.total == Some(p.done);
        let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
        if !end_of_run && last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        say.host.emit(progress_event(say, &p));
    };
    let outcome = tokio::select! {
        r = crate::bench::run(&config, &progress) => r,
        () = step.cancel.cancelled() => return Err("the benchmark was stopped".into()),
    };
    let (result, failure) = match outcome {
        Ok(r) => (r, None),
        Err(BenchError::TooManyErrors { message, result }) => (*result, Some(message)),
        Err(BenchError::ServerGone { message, result }) => {
            let mut message = message;
            let stopped = match containers {
                Some(containers) => stopped_containers(containers).await,
                None => Vec::new(),
            };
            for why in stopped {
                message.push('\n');
                message.push_str(&why);
            }
            (*result, Some(message))
        }
        Err(e) => {
            return Err(match e.hint() {
                Some(hint) => StepError::failed(e.to_string(), hint),
                None => e.to_string().into(),
            });
        }
    };
    for line in crate::bench::report::render_table(&result).lines() {
        say.line(line);
    }
    let mut outputs = result.outputs();
    // Masked as it is written: the file is no event, so the run's sink never sees it.
    let masker = say.host.masker();
    write_result(result_path, |p| result.write_files(p, masker).map(|_| ()))?;
    outputs.insert("result-file".into(), result_path.display().to_string());
    let metrics = level_metrics::generator_metrics(&result);
    let meanings = level_metrics::meanings(&metrics, &result);
    // The step's `output_tok_s` over runs: decode speed alone, or the throughput under load.
    let key_name = match result.config.mode {
        Mode::SingleStream => "decode_tok_s",
        _ => "output_throughput",
    };
    let key = result
        .levels
        .first()
        .and_then(|l| l.across_runs.get(key_name))
        .map(|a| KeyFigure {
            metric: key_name.to_string(),
            unit: "tok/s".into(),
            across: a.clone(),
        });
    Ok(Finished {
        outputs,
        metrics,
        failure,
        key,
        meanings,
        windows: energy::generator_windows(&result),
        requests_sent: result.requests_sent(),
    })
}

/// For each container of this job that is no longer running: how it ended and, when its
/// last lines show one, the recognised cause (`container `server` exited with code 137
/// (OOMKilled: true)`, `cause: …`). Said when the server went away during a benchmark.
async fn stopped_containers(containers: &JobContainers) -> Vec<String> {
    const TAIL: u64 = 40;
    let mut out = Vec::new();
    for (name, started) in &containers.started {
        let Ok(state) = containers.docker.inspect_state(&started.id).await else {
            out.push(format!("container `{name}` is gone (removed)"));
            continue;
        };
        if state.running && state.restart_count == 0 {
            continue;
        }
        let how = if state.running {
            format!("restarted {} time(s)", state.restart_count)
        } else {
            format!(
                "exited with code {} (OOMKilled: {})",
                state.exit_code.unwrap_or(-1),
                state.oom_killed
            )
        };
        out.push(format!("container `{name}` {how}"));
        let mut lines = Vec::new();
        let read = containers.docker.follow_logs(
            &started.id,
            crate::backend::LogStart::Tail(TAIL),
            |line: LogLine| lines.push(line.text),
        );
        // A stopped container's log is read at once; a restarted one is followed, so bound it.
        let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
        if let Some(cause) = crate::steps::causes::recognise(&lines) {
            out.push(cause.explain());
        }
    }
    out
}

fn progress_event(say: &Sayer<'_>, p: &Progress) -> EventKind {
    let phase = if p.warmup {
        "warm-up".to_string()
    } else {
        format!("run {}/{}", p.run, p.runs)
    };
    let level = if p.levels > 1 {
        format!("{} ({}/{})", p.level, p.level_index + 1, p.levels)
    } else {
        p.level.clone()
    };
    EventKind::BenchmarkProgress {
        job: say.job.clone(),
        step: say.key.to_string(),
        level,
        phase,
        done: p.done,
        total: p.total,
        errors: p.errors,
        output_tok_s: p.output_tok_s,
    }
}

fn write_result(
    path: &std::path::Path,
    write: impl FnOnce(&std::path::Path) -> std::io::Result<()>,
) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create `{}`: {e}", dir.display()))?;
    }
    write(path).map_err(|e| format!("could not write `{}`: {e}", path.display()))
}

/// A scripted benchmark's inputs: the command and what reads its output.
struct Script<'a> {
    command: &'a str,
    inputs: &'a IndexMap<String, Value>,
    texts: &'a IndexMap<String, String>,
}

/// The user's script: `warmup` runs forgotten, then `runs` runs, each read for every metric.
async fn scripted(
    script: &Script<'_>,
    containers: Option<&mut JobContainers>,
    step: &StepContext<'_>,
    say: &Sayer<'_>,
    result_path: &std::path::Path,
) -> Result<Finished, StepError> {
    let containers = containers.as_deref();
    let specs = metric_specs(script.inputs)?;
    let count = |name: &str, default: u64| -> Result<u64, String> {
        match script.texts.get(name) {
            None => Ok(default),
            Some(t) => t
                .parse::<u64>()
                .map_err(|_| format!("input `{name}` is `{t}`, not a whole number")),
        }
    };
    let runs = count("runs", 1)?.max(1);
    let warmup = count("warmup", 0)?;
    let target = script_container(script.texts.get("container"), containers)?;
    let command = script.command;
    let mut samples: IndexMap<String, Vec<f64>> = IndexMap::new();
    let mut windows = Vec::new();
    for i in 0..warmup + runs {
        let measuring = i >= warmup;
        say.line(&if measuring {
            format!("run {}/{runs}: {command}", i - warmup + 1)
        } else {
            format!("warm-up {}/{warmup}: {command}", i + 1)
        });
        let start = Instant::now();
        let output = tokio::select! {
            r = run_once(target.as_deref(), containers, step, say) => r?,
            () = step.cancel.cancelled() => return Err("the benchmark was stopped".into()),
        };
        if !measuring {
            continue;
        }
        windows.push(RunWindow {
            start,
            end: Instant::now(),
            output_tokens: None,
        });
        for (name, value) in script_metrics::extract(&specs, &output)? {
            samples.entry(name).or_default().push(value);
        }
    }
    let metrics: Vec<NewMetric> = specs
        .iter()
        .map(|s: &MetricSpec| NewMetric {
            name: s.name.clone(),
            unit: s.unit.clone(),
            direction: s.direction,
            samples: samples.get(&s.name).cloned().unwrap_or_default(),
        })
        .collect();
    let doc = serde_json::json!({"command": command, "runs": runs, "warmup": warmup});
    let mut finished = scripted_result(doc, metrics, say, result_path)?;
    finished.windows = vec![LevelWindows {
        suffix: String::new(),
        runs: windows,
    }];
    Ok(finished)
}

/// `metrics`: where to read each number in the script's output.
fn metric_specs(inputs: &IndexMap<String, Value>) -> Result<Vec<MetricSpec>, String> {
    match inputs.get("metrics") {
        Some(m) if !matches!(m, Value::Null) => script_metrics::parse(m),
        _ => Err(
            "a scripted benchmark needs `metrics`: where to read each number in the script's output (help: `metrics: {tok_s: {regex: 'tok/s: (?P<value>[0-9.]+)', unit: tok/s}}`)"
                .into(),
        ),
    }
}

/// The id of the job's container `container` the script runs in; `None` on the host.
fn script_container(
    name: Option<&String>,
    containers: Option<&JobContainers>,
) -> Result<Option<String>, String> {
    let Some(name) = name else { return Ok(None) };
    let containers = containers.ok_or_else(|| {
        format!("`container: {name}` needs a Docker engine, and this job has not reached one (help: start the server with `start-container` first, or run the script on the host without `container`)")
    })?;
    let id = containers
        .started
        .get(name)
        .map(|s| s.id.clone())
        .ok_or_else(|| {
            let known: Vec<&str> = containers.started.keys().map(String::as_str).collect();
            let hint = crate::diag::did_you_mean(name, &known).unwrap_or_else(|| {
                "name a container a `start-container` step of this job started".into()
            });
            format!("no container named `{name}` was started in this job (help: {hint})")
        })?;
    Ok(Some(id))
}

/// The script's metrics as the step gives them back: each one's median said and output, the
/// result file written (`doc` with the metrics added), the first metric the key figure.
fn scripted_result(
    mut doc: serde_json::Value,
    metrics: Vec<NewMetric>,
    say: &Sayer<'_>,
    result_path: &std::path::Path,
) -> Result<Finished, String> {
    let mut outputs = IndexMap::new();
    let mut json = serde_json::Map::new();
    for m in &metrics {
        let median = crate::compare::center(&m.samples).unwrap_or(f64::NAN);
        outputs.insert(m.name.clone(), crate::expr::format_number(median));
        say.line(&format!(
            "{}: {} {} (median of {})",
            m.name,
            crate::expr::format_number(median),
            m.unit,
            m.samples.len()
        ));
        json.insert(
            m.name.clone(),
            serde_json::json!({
                "unit": m.unit,
                "direction": m.direction.map(Direction::as_str),
                "median": median,
                "samples": m.samples,
            }),
        );
    }
    doc["metrics"] = serde_json::Value::Object(json);
    // Masked as it is written: the file is no event, so the run's sink never sees it.
    let masker = say.host.masker();
    write_result(result_path, |p| {
        std::fs::write(p, masker.mask(&serde_json::to_string_pretty(&doc)?) + "\n")
    })?;
    outputs.insert("errors".into(), "0".into());
    outputs.insert("result-file".into(), result_path.display().to_string());
    // The first metric declared is the key one: one sample per run.
    let key = metrics
        .iter()
        .find(|m| !m.samples.is_empty())
        .map(|m| KeyFigure {
            metric: m.name.clone(),
            unit: m.unit.clone(),
            across: AcrossRuns::of(m.samples.clone()),
        });
    Ok(Finished {
        outputs,
        metrics,
        failure: None,
        key,
        meanings: BTreeMap::new(),
        windows: Vec::new(),
        requests_sent: 0,
    })
}

/// One run of the script; its standard output (what metrics are read from). Every line is
/// also the step's log.
///
/// What `sh -c` reads is the command with its `${{ }}` values replaced by references to
/// environment variables ([`crate::engine::step_inputs::shell_inputs`]), never the evaluated text: a value from a
/// push (a branch name, a commit message) must not become shell code.
async fn run_once(
    container: Option<&str>,
    containers: Option<&JobContainers>,
    step: &StepContext<'_>,
    say: &Sayer<'_>,
) -> Result<String, String> {
    let Some(shell) = step.shell.get("command") else {
        // Running the evaluated text instead would splice values into the shell's code.
        return Err("the benchmark command was not prepared for the shell (a bug in gpuflow: please report it)".into());
    };
    let command = shell.text.as_str();
    let mut env = step.env.clone();
    env.extend(shell.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let (code, stdout) = match container {
        Some(id) => {
            let mut exec = ExecSpec::new(["sh", "-c", command]);
            exec.env = env;
            let mut stdout = OutputTail::new(script_metrics::OUTPUT_TAIL_BYTES);
            let sink = |line: LogLine| {
                let stream = match line.stream {
                    OutputStream::Stdout => {
                        stdout.push_line(&line.text);
                        Stream::Stdout
                    }
                    OutputStream::Stderr => Stream::Stderr,
                };
                say.emit(stream, &line.text);
            };
            let Some(containers) = containers else {
                return Err("a container needs a Docker engine".into());
            };
            let code = containers
                .docker
                .exec(id, &exec, sink)
                .await
                .map_err(|e| format!("could not run the benchmark command: {e}"))?;
            (code, stdout)
        }
        None => {
            use tokio::io::{AsyncBufReadExt, BufReader};
            let mut child = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .envs(&env)
                .current_dir(say.host.workspace())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("could not run `sh`: {e}"))?;
            let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
                return Err("the benchmark command's output could not be read".into());
            };
            // Both streams are read as they come, so a long script shows its progress live.
            let mut out = BufReader::new(out).lines();
            let mut err = BufReader::new(err).lines();
            let mut stdout = OutputTail::new(script_metrics::OUTPUT_TAIL_BYTES);
            let (mut out_open, mut err_open) = (true, true);
            while out_open || err_open {
                tokio::select! {
                    line = out.next_line(), if out_open => match line {
                        Ok(Some(line)) => {
                            say.emit(Stream::Stdout, &line);
                            stdout.push_line(&line);
                        }
                        _ => out_open = false,
                    },
                    line = err.next_line(), if err_open => match line {
                        Ok(Some(line)) => say.emit(Stream::Stderr, &line),
                        _ => err_open = false,
                    },
                }
            }
            let status = child
                .wait()
                .await
                .map_err(|e| format!("could not wait for the benchmark command: {e}"))?;
            (i64::from(status.code().unwrap_or(-1)), stdout)
        }
    };
    if code != 0 {
        return Err(format!(
            "the benchmark command exited with code {code}; no metrics were read"
        ));
    }
    if stdout.dropped() > 0 {
        say.line(&format!(
            "the command printed {} MiB; metrics are read from its last {} MiB (all of it is in the log)",
            (stdout.dropped() + stdout.text().len() as u64) / (1024 * 1024),
            script_metrics::OUTPUT_TAIL_BYTES / (1024 * 1024)
        ));
    }
    Ok(stdout.text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_and_lists_are_recorded_as_json() {
        let inputs = IndexMap::from([
            (
                "concurrency".to_string(),
                Value::from_json(serde_json::json!([1, 8])),
            ),
            ("target".to_string(), Value::String("http://h:1".into())),
            ("model".to_string(), Value::String(String::new())),
        ]);
        let t = as_text(&inputs);
        assert_eq!(t["concurrency"], "[1,8]");
        assert!(!t.contains_key("model"), "empty inputs are not given");
    }
}
