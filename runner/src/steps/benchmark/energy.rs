//! The energy a benchmark's GPUs drew while it measured, from the step's power telemetry: per
//! measured run, each GPU's power integrated over that run's window (`gpu::energy`), stored
//! as `energy_j` (all GPUs), `energy_j_gpuN` (GPU N, when the job has several) and
//! `joules_per_output_token` (the run's energy over its output tokens), all lower-is-better.
//! Warm-ups and the time between runs are outside every window. A sweep's further levels
//! carry their tag (`energy_j@c8`), as the other metrics do ([`super::level_metrics`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::level_metrics;
use crate::bench::BenchResult;
use crate::gpu::energy::energy_j;
use crate::gpu::telemetry::{Series, Telemetry};
use crate::store::{Direction, NewMetric};

/// One measured run: when it started and ended, and its output tokens where known.
#[derive(Clone, Debug)]
pub struct RunWindow {
    pub start: Instant,
    pub end: Instant,
    pub output_tokens: Option<u64>,
}

/// One level's measured runs, with the suffix its metrics carry (`""`, `@c8`).
#[derive(Clone, Debug, Default)]
pub struct LevelWindows {
    pub suffix: String,
    pub runs: Vec<RunWindow>,
}

/// What the energy came to: the metrics, what each is in words, and lines to say.
#[derive(Debug, Default)]
pub struct Energy {
    pub metrics: Vec<NewMetric>,
    pub meanings: BTreeMap<String, String>,
    pub lines: Vec<String>,
}

/// The windows of the generator's measured runs: from a run's first send to its last
/// response's end (the `duration` its throughputs are computed over), level by level.
pub fn generator_windows(result: &BenchResult) -> Vec<LevelWindows> {
    result
        .levels
        .iter()
        .enumerate()
        .map(|(i, level)| LevelWindows {
            suffix: if i == 0 {
                String::new()
            } else {
                format!("@{}", level_metrics::tag(&level.level))
            },
            runs: level
                .runs
                .iter()
                .filter_map(|r| {
                    let start = r.started_at?;
                    Some(RunWindow {
                        start,
                        end: start + Duration::from_secs_f64(r.metrics.duration.max(0.0)),
                        output_tokens: r.metrics.total_output_tokens,
                    })
                })
                .collect(),
        })
        .collect()
}

/// The energy metrics of every level; none where there was no telemetry, and none (said why)
/// where a GPU reported no power.
pub fn metrics(telemetry: &Telemetry, levels: &[LevelWindows]) -> Energy {
    let Telemetry::Sampled {
        series,
        started,
        stand_in,
        ..
    } = telemetry
    else {
        return Energy::default();
    };
    let mut out = Energy::default();
    if let Some(mute) = series
        .iter()
        .find(|s| s.samples.iter().all(|x| x.power_w.is_none()))
    {
        out.lines.push(format!(
            "no energy: GPU {} reported no power draw",
            mute.index
        ));
        return out;
    }
    let made_up = if *stand_in {
        "stand-in power, made up"
    } else {
        ""
    };
    for level in levels.iter().filter(|l| !l.runs.is_empty()) {
        level_energy(&mut out, series, *started, level, made_up);
    }
    out
}

/// One level's metrics and its line.
fn level_energy(
    out: &mut Energy,
    series: &[Series],
    started: Instant,
    level: &LevelWindows,
    made_up: &str,
) {
    let ms = |t: Instant| match t.checked_duration_since(started) {
        Some(d) => d.as_secs_f64() * 1000.0,
        None => -(started.duration_since(t).as_secs_f64() * 1000.0),
    };
    // Per GPU, per run: joules over the run's window.
    let per_gpu: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            let power: Vec<Option<f64>> = s.samples.iter().map(|x| x.power_w).collect();
            level
                .runs
                .iter()
                .map(|r| energy_j(&s.t_ms, &power, ms(r.start), ms(r.end)).unwrap_or(0.0))
                .collect()
        })
        .collect();
    let total: Vec<f64> = (0..level.runs.len())
        .map(|i| per_gpu.iter().map(|g| g[i]).sum())
        .collect();
    let per_token: Vec<f64> = level
        .runs
        .iter()
        .zip(&total)
        .filter_map(|(r, e)| r.output_tokens.filter(|n| *n > 0).map(|n| e / n as f64))
        .collect();
    let at = level_metrics::describe_tag(level.suffix.trim_start_matches('@'));
    let note = if made_up.is_empty() {
        String::new()
    } else {
        format!("; {made_up}")
    };
    let mut push = |name: String, unit: &str, samples: Vec<f64>, meaning: String| {
        if samples.is_empty() {
            return;
        }
        out.meanings
            .insert(name.clone(), format!("{meaning}, median of runs{at}{note}"));
        out.metrics.push(NewMetric {
            name,
            unit: unit.into(),
            direction: Some(Direction::Lower),
            samples,
        });
    };
    let suffix = &level.suffix;
    push(
        format!("energy_j{suffix}"),
        "J",
        total.clone(),
        "GPU energy of a measured run".into(),
    );
    if series.len() > 1 {
        for (s, samples) in series.iter().zip(&per_gpu) {
            push(
                format!("energy_j_gpu{}{suffix}", s.index),
                "J",
                samples.clone(),
                format!("GPU {}'s energy of a measured run", s.index),
            );
        }
    }
    push(
        format!("joules_per_output_token{suffix}"),
        "J/tok",
        per_token.clone(),
        "GPU energy per output token of a measured run".into(),
    );
    out.lines
        .push(line(level, series, &per_gpu, &total, &per_token, made_up));
}

/// `energy: 1204.3 J over 4.01 s measured (GPU 0: 602.1 J, GPU 1: 602.2 J), 0.627 J per
/// output token` — sums over the level's runs.
fn line(
    level: &LevelWindows,
    series: &[Series],
    per_gpu: &[Vec<f64>],
    total: &[f64],
    per_token: &[f64],
    made_up: &str,
) -> String {
    let seconds: f64 = level
        .runs
        .iter()
        .map(|r| r.end.saturating_duration_since(r.start).as_secs_f64())
        .sum();
    let joules: f64 = total.iter().sum();
    let gpus = if series.len() > 1 {
        let each: Vec<String> = series
            .iter()
            .zip(per_gpu)
            .map(|(s, e)| format!("GPU {}: {:.1} J", s.index, e.iter().sum::<f64>()))
            .collect();
        format!(" ({})", each.join(", "))
    } else {
        String::new()
    };
    let tokens: u64 = level.runs.iter().filter_map(|r| r.output_tokens).sum();
    let made_up = if made_up.is_empty() {
        String::new()
    } else {
        format!(" ({made_up})")
    };
    let per_token = if per_token.is_empty() || tokens == 0 {
        String::new()
    } else {
        format!(", {:.4} J per output token", joules / tokens as f64)
    };
    let name = if level.suffix.is_empty() {
        "energy".to_string()
    } else {
        format!("energy{}", level.suffix)
    };
    format!("{name}: {joules:.1} J over {seconds:.2} s measured{gpus}{per_token}{made_up}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::telemetry::Sample;

    /// Telemetry of GPUs `(index, watts)` read every 100 ms for 2 s, from `started`.
    fn sampled(started: Instant, gpus: &[(u32, Option<f64>)], stand_in: bool) -> Telemetry {
        let series: Vec<Series> = gpus
            .iter()
            .map(|(index, power)| Series {
                index: *index,
                uuid: format!("GPU-{index}"),
                t_ms: (0..=20).map(|i| i * 100).collect(),
                samples: vec![
                    Sample {
                        power_w: *power,
                        ..Sample::default()
                    };
                    21
                ],
            })
            .collect();
        Telemetry::Sampled {
            interval_ms: 100,
            stand_in,
            summary: series.iter().map(Series::summary).collect(),
            series,
            started,
        }
    }

    fn run(started: Instant, from_ms: u64, to_ms: u64, tokens: u64) -> RunWindow {
        RunWindow {
            start: started + Duration::from_millis(from_ms),
            end: started + Duration::from_millis(to_ms),
            output_tokens: Some(tokens),
        }
    }

    fn metric<'a>(e: &'a Energy, name: &str) -> &'a [f64] {
        &e.metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", e.metrics))
            .samples
    }

    #[test]
    fn each_run_window_is_integrated_per_gpu_and_in_total() {
        let t0 = Instant::now();
        let telemetry = sampled(t0, &[(2, Some(300.0)), (5, Some(100.0))], true);
        let levels = [
            LevelWindows {
                suffix: String::new(),
                runs: vec![run(t0, 200, 700, 100), run(t0, 900, 1900, 400)],
            },
            LevelWindows {
                suffix: "@c8".into(),
                runs: vec![run(t0, 1000, 1250, 50)],
            },
        ];
        let e = metrics(&telemetry, &levels);
        assert_eq!(metric(&e, "energy_j_gpu2"), [150.0, 300.0]);
        assert_eq!(metric(&e, "energy_j_gpu5"), [50.0, 100.0]);
        assert_eq!(metric(&e, "energy_j"), [200.0, 400.0]);
        assert_eq!(metric(&e, "joules_per_output_token"), [2.0, 1.0]);
        assert_eq!(metric(&e, "energy_j@c8"), [100.0]);
        assert_eq!(metric(&e, "joules_per_output_token@c8"), [2.0]);
        assert!(
            e.metrics
                .iter()
                .all(|m| m.direction == Some(Direction::Lower))
        );
        assert_eq!(
            e.meanings["joules_per_output_token@c8"],
            "GPU energy per output token of a measured run, median of runs, at concurrency 8; stand-in power, made up"
        );
        assert_eq!(
            e.lines[0],
            "energy: 600.0 J over 1.50 s measured (GPU 2: 450.0 J, GPU 5: 150.0 J), 1.2000 J per output token (stand-in power, made up)"
        );
    }

    #[test]
    fn one_gpu_has_no_per_gpu_names_and_unknown_tokens_no_ratio() {
        let t0 = Instant::now();
        let telemetry = sampled(t0, &[(0, Some(250.0))], false);
        let mut window = run(t0, 0, 1000, 0);
        window.output_tokens = None;
        let e = metrics(
            &telemetry,
            &[LevelWindows {
                suffix: String::new(),
                runs: vec![window],
            }],
        );
        let names: Vec<&str> = e.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["energy_j"]);
        assert_eq!(e.lines, ["energy: 250.0 J over 1.00 s measured"]);
    }

    #[test]
    fn a_gpu_without_power_or_no_telemetry_gives_no_energy() {
        let t0 = Instant::now();
        let levels = [LevelWindows {
            suffix: String::new(),
            runs: vec![run(t0, 0, 1000, 10)],
        }];
        let e = metrics(&sampled(t0, &[(0, Some(250.0)), (1, None)], false), &levels);
        assert!(e.metrics.is_empty());
        assert_eq!(e.lines, ["no energy: GPU 1 reported no power draw"]);
        let none = Telemetry::Unavailable { reason: "x".into() };
        assert!(metrics(&none, &levels).metrics.is_empty());
    }
}
