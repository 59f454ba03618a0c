//! The GPU side of a `benchmark` step: the before-timing checks its `gpu-*` inputs ask for
//! (waiting or failing as configured), and telemetry while it measures. GPU state is read
//! fresh each time: through NVML for this machine's GPUs, from the stand-in file again for a
//! stand-in inventory (so its values can change while a run waits), and from the host's probe
//! for a remote host (read once per run: said in the message).

use std::time::Duration;

use indexmap::IndexMap;

use crate::gpu::checks::{Checks, OnFail, Verdict};
use crate::gpu::telemetry::{Sampler, Telemetry};
use crate::gpu::{GpuState, Source};
use crate::steps::StepGpus;

/// How often failed checks are looked at again under `gpu-check-fails: wait`.
const RECHECK: Duration = Duration::from_secs(5);

/// The `gpu-*` inputs, which set up checks and telemetry and are no part of the benchmark's
/// definition (a result measured after a wait is the same experiment).
pub fn is_gpu_input(name: &str) -> bool {
    name.starts_with("gpu-")
}

/// The checks the step's inputs ask for; `None` when none.
pub fn checks_from(texts: &IndexMap<String, String>) -> Result<Option<Checks>, String> {
    let flag = |k: &str| texts.get(k).is_some_and(|v| v == "true");
    let mut c = Checks {
        idle: flag("gpu-idle"),
        persistence_mode: flag("gpu-persistence-mode"),
        ..Checks::default()
    };
    if let Some(v) = texts.get("gpu-min-free-memory") {
        let bytes = crate::engine::container_inputs::byte_size(v)
            .ok_or_else(|| format!("`gpu-min-free-memory` is `{v}`, not a size such as `40g`"))?;
        c.min_free_memory_mib = Some(bytes / (1024 * 1024));
    }
    if let Some(v) = texts.get("gpu-max-ecc-errors") {
        c.max_ecc_errors = Some(
            v.parse()
                .map_err(|_| format!("`gpu-max-ecc-errors` is `{v}`, not a whole number"))?,
        );
    }
    if let Some(v) = texts.get("gpu-min-sm-clock") {
        let ratio = match v.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => v.parse::<f64>(),
        }
        .map_err(|_| format!("`gpu-min-sm-clock` is `{v}`, not a percentage such as `90%`"))?;
        c.min_sm_clock_ratio = Some(ratio);
    }
    if texts.get("gpu-check-fails").is_some_and(|v| v == "wait") {
        c.on_fail = OnFail::Wait;
    }
    if let Some(v) = texts.get("gpu-check-timeout") {
        c.wait_timeout = humantime::parse_duration(v)
            .map_err(|_| format!("`gpu-check-timeout` is `{v}`, not a duration such as `10m`"))?;
    }
    Ok(c.any().then_some(c))
}

/// The current state of the job's GPUs.
async fn states(gpus: &StepGpus) -> Result<Vec<(crate::gpu::Gpu, GpuState)>, String> {
    let inv = &gpus.inventory;
    let chosen: Vec<&crate::gpu::Gpu> = if gpus.leased.is_empty() {
        inv.gpus.iter().collect()
    } else {
        inv.gpus
            .iter()
            .filter(|g| gpus.leased.iter().any(|(_, u)| *u == g.uuid))
            .collect()
    };
    match &inv.source {
        Source::Nvml => {
            let indexes: Vec<u32> = chosen.iter().map(|g| g.index).collect();
            let read = tokio::task::spawn_blocking(move || {
                let nvml = crate::gpu::nvml::open()?;
                Ok::<_, String>(
                    indexes
                        .iter()
                        .map(|i| crate::gpu::nvml::state_of(&nvml, *i))
                        .collect::<Vec<_>>(),
                )
            })
            .await
            .map_err(|e| e.to_string())??;
            Ok(chosen.into_iter().cloned().zip(read).collect())
        }
        Source::StandIn { path } => {
            let fresh = crate::gpu::stand_in::load(std::path::Path::new(path)).map_err(|d| {
                format!(
                    "the stand-in inventory `{path}` could not be read again: {}",
                    d.iter()
                        .map(|d| d.message.clone())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            })?;
            Ok(chosen
                .into_iter()
                .map(|g| {
                    let state = fresh
                        .gpus
                        .iter()
                        .find(|f| f.uuid == g.uuid)
                        .map_or_else(|| g.state.clone(), |f| f.state.clone());
                    (g.clone(), state)
                })
                .collect())
        }
        Source::NvidiaSmi | Source::None { .. } => Ok(chosen
            .into_iter()
            .map(|g| (g.clone(), g.state.clone()))
            .collect()),
    }
}

/// Runs `checks` on the job's GPUs; with [`OnFail::Wait`] until they pass or time out.
/// `say` reports each failed look.
pub async fn before_timing(
    gpus: Option<&StepGpus>,
    checks: &Checks,
    cancel: &tokio_util::sync::CancellationToken,
    say: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    checks_every(gpus, checks, cancel, say, RECHECK).await
}

async fn checks_every(
    gpus: Option<&StepGpus>,
    checks: &Checks,
    cancel: &tokio_util::sync::CancellationToken,
    say: &(dyn Fn(&str) + Sync),
    recheck: Duration,
) -> Result<(), String> {
    let Some(gpus) = gpus else {
        return Err(
            "the `gpu-*` checks need the job's GPUs, and this run does not know its host's (docs/gpus.md)"
                .into(),
        );
    };
    if gpus.inventory.gpus.is_empty() {
        return Err(format!(
            "the `gpu-*` checks need GPUs, and the host has none ({})",
            gpus.inventory.source_text()
        ));
    }
    let started = std::time::Instant::now();
    loop {
        let mut verdict = Verdict::default();
        for (gpu, state) in states(gpus).await? {
            verdict.extend(checks.judge(&gpu, &state));
        }
        let stand_in = if gpus.inventory.is_stand_in() {
            " (stand-in values)"
        } else {
            ""
        };
        if !verdict.unknown.is_empty() {
            say(&format!(
                "before timing: could not check {}",
                verdict.unknown.join("; ")
            ));
        }
        if verdict.passed() {
            say(&format!(
                "before timing: the GPUs passed their checks{stand_in}"
            ));
            return Ok(());
        }
        let problems = verdict.failed.join("; ");
        if checks.on_fail == OnFail::Fail {
            return Err(format!("before timing: {problems}{stand_in}"));
        }
        if started.elapsed() >= checks.wait_timeout {
            return Err(format!(
                "before timing: still failing after {}: {problems}{stand_in}",
                humantime::format_duration(checks.wait_timeout)
            ));
        }
        say(&format!("before timing: waiting: {problems}{stand_in}"));
        tokio::select! {
            () = tokio::time::sleep(recheck) => {}
            () = cancel.cancelled() => return Err("cancelled while waiting for the GPUs' checks".into()),
        }
    }
}

/// Starts telemetry on the job's GPUs where NVML can read them, or on stand-in GPUs (their
/// file's scripted values); otherwise says why there is none.
pub fn start_telemetry(gpus: Option<&StepGpus>, wanted: bool) -> Result<Sampler, String> {
    let reason = match gpus {
        _ if !wanted => "`gpu-telemetry: false`",
        None => "the run does not know this host's GPUs",
        Some(g) if g.leased.is_empty() => "the job leased no GPU (`gpus:`)",
        Some(g) => match &g.inventory.source {
            Source::Nvml => return Ok(Sampler::start(g.leased.clone())),
            Source::StandIn { .. } => {
                return Ok(Sampler::stand_in(g.leased.clone(), &g.inventory));
            }
            Source::NvidiaSmi => "the GPUs are on a remote host; NVML reads only this machine's",
            Source::None { .. } => "the host has no GPU",
        },
    };
    Err(reason.to_string())
}

/// The telemetry as stored with the result: `Telemetry` as JSON.
pub fn telemetry_value(t: &Telemetry) -> serde_json::Value {
    serde_json::to_value(t).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A stand-in node of two GPUs; GPU 1 runs `processes` processes.
    fn stand_in(path: &std::path::Path, processes: u32) {
        std::fs::write(
            path,
            format!(
                "model = \"L40S\"\nmemory-mib = 46068\n[[gpus]]\nindex = 0\nprocesses = 0\n[[gpus]]\nindex = 1\nprocesses = {processes}\nmemory-used-mib = 1024\n"
            ),
        )
        .unwrap();
    }

    fn step_gpus(path: &std::path::Path) -> StepGpus {
        StepGpus {
            inventory: Arc::new(crate::gpu::stand_in::load(path).unwrap()),
            leased: vec![(1, "GPU-stand-in-0001".into())],
        }
    }

    #[tokio::test]
    async fn a_busy_gpu_fails_the_check_at_once_or_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inv.toml");
        stand_in(&path, 2);
        let gpus = step_gpus(&path);
        let said = Mutex::new(Vec::<String>::new());
        let say = |m: &str| said.lock().unwrap().push(m.to_string());
        let idle = Checks {
            idle: true,
            ..Checks::default()
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        let e = before_timing(Some(&gpus), &idle, &cancel, &say)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            "before timing: GPU 1 is not idle: 2 processes use it (stand-in values)"
        );

        // Waiting: the file is read again at each look; the GPU is freed meanwhile.
        let wait = Checks {
            on_fail: OnFail::Wait,
            ..idle.clone()
        };
        let freer = {
            let path = path.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                stand_in(&path, 0);
            })
        };
        checks_every(Some(&gpus), &wait, &cancel, &say, Duration::from_millis(50))
            .await
            .unwrap();
        freer.await.unwrap();
        let said = said.lock().unwrap().clone();
        assert!(
            said.iter()
                .any(|l| l.starts_with("before timing: waiting: GPU 1 is not idle")),
            "{said:?}"
        );
        assert_eq!(
            said.last().unwrap(),
            "before timing: the GPUs passed their checks (stand-in values)"
        );

        // A wait that never ends in a pass times out, naming the problem.
        stand_in(&path, 1);
        let short = Checks {
            wait_timeout: Duration::from_millis(100),
            ..wait
        };
        let e = checks_every(
            Some(&gpus),
            &short,
            &cancel,
            &|_| {},
            Duration::from_millis(20),
        )
        .await
        .unwrap_err();
        assert!(
            e.starts_with("before timing: still failing after 100ms: GPU 1 is not idle"),
            "{e}"
        );
    }

    #[test]
    fn telemetry_says_why_it_did_not_sample() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inv.toml");
        stand_in(&path, 0);
        let gpus = step_gpus(&path);
        assert_eq!(
            start_telemetry(Some(&gpus), false).err().unwrap(),
            "`gpu-telemetry: false`"
        );
        assert_eq!(
            start_telemetry(None, true).err().unwrap(),
            "the run does not know this host's GPUs"
        );
    }

    #[test]
    fn inputs_become_checks() {
        let texts: IndexMap<String, String> = [
            ("gpu-idle", "true"),
            ("gpu-min-free-memory", "40g"),
            ("gpu-min-sm-clock", "90%"),
            ("gpu-check-fails", "wait"),
            ("gpu-check-timeout", "30s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = checks_from(&texts).unwrap().unwrap();
        assert!(c.idle);
        assert_eq!(c.min_free_memory_mib, Some(40 * 1024));
        assert_eq!(c.min_sm_clock_ratio, Some(0.9));
        assert_eq!(c.on_fail, OnFail::Wait);
        assert_eq!(c.wait_timeout, Duration::from_secs(30));
        assert_eq!(checks_from(&IndexMap::new()).unwrap(), None);
        assert!(is_gpu_input("gpu-idle") && !is_gpu_input("requests"));
    }
}
