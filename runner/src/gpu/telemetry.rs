//! Telemetry during a benchmark step: utilisation, memory, power, SM clock and temperature of
//! the job's GPUs, sampled every 100 ms through NVML on a thread of its own (an NVML call can
//! take milliseconds; the load generator's timing must not share a thread with it), kept as a
//! time series with a per-GPU summary. Where NVML is not there the result says so instead.
//!
//! Stand-in GPUs are sampled the same way, on the same thread and grid, but each reading is
//! what the stand-in file scripts (`power-w`, `memory-used-mib`, `sm-clock-mhz`): so what
//! is computed from telemetry (energy, `gpu/energy.rs`) is tested without a GPU. Such
//! telemetry is marked `stand_in`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::inventory::Inventory;
pub use super::sample::Sample;

/// How often the GPUs are read.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Samples kept per GPU at most (30 minutes at 100 ms): a step that runs for hours keeps every
/// 2nd, 4th, … reading instead, evenly spaced, so its result stays a few megabytes.
pub const MAX_SAMPLES: usize = 18_000;

/// The readings of one GPU over a step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Series {
    pub index: u32,
    pub uuid: String,
    /// Milliseconds since sampling started, one per sample.
    pub t_ms: Vec<u64>,
    pub samples: Vec<Sample>,
}

/// Mean and maximum of one quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MeanMax {
    pub mean: f64,
    pub max: f64,
}

/// One GPU's summary over the step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub index: u32,
    pub samples: usize,
    pub utilization_pct: Option<MeanMax>,
    pub memory_used_mib: Option<MeanMax>,
    pub power_w: Option<MeanMax>,
    pub sm_clock_mhz: Option<MeanMax>,
    pub temperature_c: Option<MeanMax>,
}

/// What a step's telemetry came to: the series and summaries, or why there are none.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Telemetry {
    Sampled {
        interval_ms: u64,
        /// The readings are a stand-in file's scripted values, not a GPU's (made up).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        stand_in: bool,
        summary: Vec<Summary>,
        series: Vec<Series>,
        /// When sampling started: the origin of every series' `t_ms`, so that a window the
        /// benchmark measured (in `Instant`s) can be found in the series.
        #[serde(skip)]
        started: Instant,
    },
    Unavailable {
        reason: String,
    },
}

impl Series {
    pub fn summary(&self) -> Summary {
        let stat = |pick: &dyn Fn(&Sample) -> Option<f64>| {
            let values: Vec<f64> = self.samples.iter().filter_map(pick).collect();
            (!values.is_empty()).then(|| MeanMax {
                mean: values.iter().sum::<f64>() / values.len() as f64,
                max: values.iter().copied().fold(f64::MIN, f64::max),
            })
        };
        Summary {
            index: self.index,
            samples: self.samples.len(),
            utilization_pct: stat(&|s| s.utilization_pct.map(f64::from)),
            memory_used_mib: stat(&|s| s.memory_used_mib.map(|v| v as f64)),
            power_w: stat(&|s| s.power_w),
            sm_clock_mhz: stat(&|s| s.sm_clock_mhz.map(f64::from)),
            temperature_c: stat(&|s| s.temperature_c.map(f64::from)),
        }
    }
}

/// Which 100 ms ticks are kept: every one until a series holds `max` samples, then every
/// other one (the kept ones thinned to match), and so on.
struct Thinning {
    stride: u32,
    max: usize,
}

impl Thinning {
    fn new(max: usize) -> Self {
        Self { stride: 1, max }
    }

    /// After a reading was pushed: halves the series (keeping the readings on the doubled
    /// stride) once they are full.
    fn after_push(&mut self, series: &mut [Series]) {
        if series.first().is_some_and(|s| s.samples.len() >= self.max) {
            for s in series.iter_mut() {
                s.t_ms = s.t_ms.iter().copied().step_by(2).collect();
                s.samples = s.samples.iter().cloned().step_by(2).collect();
            }
            self.stride = self.stride.saturating_mul(2);
        }
    }

    /// The next tick to read, after `tick`: the next multiple of the stride.
    fn next_tick(&self, tick: u64) -> u64 {
        let stride = u64::from(self.stride);
        (tick / stride + 1) * stride
    }
}

/// Where readings come from.
enum Reader {
    Nvml(Box<nvml_wrapper::Nvml>),
    /// Each GPU's scripted reading, by index.
    StandIn(Vec<(u32, Sample)>),
}

impl Reader {
    fn read(&self, index: u32) -> Sample {
        match self {
            Self::Nvml(nvml) => super::nvml::sample(nvml, index),
            Self::StandIn(readings) => readings
                .iter()
                .find(|(i, _)| *i == index)
                .map(|(_, s)| s.clone())
                .unwrap_or_default(),
        }
    }
}

/// Samples GPUs until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Vec<Series>, u32)>>,
    unavailable: Option<String>,
    started: Instant,
    stand_in: bool,
}

impl Sampler {
    /// Starts sampling the GPUs `(index, uuid)` of this machine through NVML. Without NVML (or
    /// with no GPU to watch) nothing is sampled and [`Self::finish`] says why.
    pub fn start(gpus: Vec<(u32, String)>) -> Self {
        if gpus.is_empty() {
            return Self::unavailable("the job has no GPU leased, so none was watched");
        }
        match super::nvml::open() {
            Ok(nvml) => Self::spawn(gpus, Reader::Nvml(Box::new(nvml))),
            Err(reason) => Self::unavailable(&format!("no NVML: {reason}")),
        }
    }

    /// Starts sampling the stand-in GPUs `(index, uuid)` of `inventory`: every reading is what
    /// its file scripts for the GPU (power, memory used, SM clock; nothing else is reported).
    pub fn stand_in(gpus: Vec<(u32, String)>, inventory: &Inventory) -> Self {
        if gpus.is_empty() {
            return Self::unavailable("the job has no GPU leased, so none was watched");
        }
        let readings = inventory
            .gpus
            .iter()
            .map(|g| {
                let sample = Sample {
                    memory_used_mib: g.state.memory_used_mib,
                    power_w: g.state.power_w,
                    sm_clock_mhz: g.state.sm_clock_mhz,
                    ..Sample::default()
                };
                (g.index, sample)
            })
            .collect();
        let mut sampler = Self::spawn(gpus, Reader::StandIn(readings));
        sampler.stand_in = true;
        sampler
    }

    fn spawn(gpus: Vec<(u32, String)>, reader: Reader) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            let mut series: Vec<Series> = gpus
                .iter()
                .map(|(index, uuid)| Series {
                    index: *index,
                    uuid: uuid.clone(),
                    ..Series::default()
                })
                .collect();
            let mut kept = Thinning::new(MAX_SAMPLES);
            let mut tick: u64 = 0;
            loop {
                let t = started.elapsed().as_millis() as u64;
                for s in &mut series {
                    s.t_ms.push(t);
                    s.samples.push(reader.read(s.index));
                }
                kept.after_push(&mut series);
                tick = kept.next_tick(tick);
                // Ticks stay on the 100 ms grid even when a read is slow.
                let next = INTERVAL * u32::try_from(tick).unwrap_or(u32::MAX);
                let wait = next.saturating_sub(started.elapsed());
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                // Woken by `finish`, the loop reads once more before it ends: the series
                // then reaches past the end of what was measured, which energy integrates.
                std::thread::park_timeout(wait);
            }
            (series, kept.stride)
        });
        Self {
            stop,
            thread: Some(thread),
            unavailable: None,
            started,
            stand_in: false,
        }
    }

    fn unavailable(reason: &str) -> Self {
        Self {
            stop: Arc::new(AtomicBool::new(true)),
            thread: None,
            unavailable: Some(reason.to_string()),
            started: Instant::now(),
            stand_in: false,
        }
    }

    /// Stops sampling and returns what was seen.
    pub fn finish(mut self) -> Telemetry {
        self.stop.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else {
            return Telemetry::Unavailable {
                reason: self
                    .unavailable
                    .take()
                    .unwrap_or_else(|| "not sampled".into()),
            };
        };
        thread.thread().unpark();
        match thread.join() {
            Ok((series, stride)) => Telemetry::Sampled {
                interval_ms: INTERVAL.as_millis() as u64 * u64::from(stride),
                stand_in: self.stand_in,
                summary: series.iter().map(Series::summary).collect(),
                series,
                started: self.started,
            },
            Err(_) => Telemetry::Unavailable {
                reason: "the sampling thread failed".into(),
            },
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_take_mean_and_max_of_what_was_reported() {
        let s = Series {
            index: 3,
            uuid: "GPU-3".into(),
            t_ms: vec![0, 100, 200],
            samples: vec![
                Sample {
                    utilization_pct: Some(50),
                    power_w: Some(100.0),
                    ..Sample::default()
                },
                Sample {
                    utilization_pct: Some(100),
                    power_w: None,
                    ..Sample::default()
                },
                Sample {
                    utilization_pct: Some(90),
                    power_w: Some(300.0),
                    ..Sample::default()
                },
            ],
        };
        let sum = s.summary();
        assert_eq!(sum.samples, 3);
        assert_eq!(sum.utilization_pct.unwrap().mean, 80.0);
        assert_eq!(sum.utilization_pct.unwrap().max, 100.0);
        assert_eq!(
            sum.power_w,
            Some(MeanMax {
                mean: 200.0,
                max: 300.0
            })
        );
        assert_eq!(sum.temperature_c, None);
    }

    #[test]
    fn without_nvml_or_gpus_the_result_says_why() {
        let t = Sampler::start(Vec::new()).finish();
        assert!(
            matches!(&t, Telemetry::Unavailable { reason } if reason.contains("no GPU leased")),
            "{t:?}"
        );
        // This machine has no NVIDIA driver (CI): the reason names NVML.
        if super::super::nvml::open().is_err() {
            let t = Sampler::start(vec![(0, "GPU-x".into())]).finish();
            assert!(
                matches!(&t, Telemetry::Unavailable { reason } if reason.starts_with("no NVML")),
                "{t:?}"
            );
        }
    }

    #[test]
    fn stand_in_gpus_are_sampled_with_their_scripted_values_and_marked() {
        let inv = crate::gpu::stand_in::parse(&crate::diag::SourceFile::new(
            "s.toml",
            "model = \"X\"\npower-w = 300\n[[gpus]]\nindex = 0\nsm-clock-mhz = 2000\n[[gpus]]\nindex = 1\npower-w = 75.5\n",
        ))
        .unwrap();
        let leased = vec![(1, "GPU-stand-in-0001".to_string())];
        let t = Sampler::stand_in(leased, &inv).finish();
        let Telemetry::Sampled {
            stand_in, series, ..
        } = &t
        else {
            panic!("{t:?}");
        };
        assert!(*stand_in);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].index, 1);
        assert!(!series[0].samples.is_empty());
        assert!(
            series[0]
                .samples
                .iter()
                .all(|s| s.power_w == Some(75.5) && s.sm_clock_mhz.is_none()),
            "{series:?}"
        );
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["stand_in"], true, "marked where it is stored: {json}");
    }

    #[test]
    fn a_long_step_keeps_a_bounded_evenly_spaced_series() {
        let mut series = vec![Series::default()];
        let mut kept = Thinning::new(8);
        let mut tick = 0;
        for _ in 0..1000 {
            series[0].t_ms.push(tick * 100);
            series[0].samples.push(Sample::default());
            kept.after_push(&mut series);
            tick = kept.next_tick(tick);
            if tick > 1000 {
                break;
            }
        }
        let t = &series[0].t_ms;
        assert!(t.len() < 8, "{t:?}");
        let gaps: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter().all(|g| *g == 100 * u64::from(kept.stride)),
            "evenly spaced at the stride: {t:?}, stride {}",
            kept.stride
        );
        assert_eq!(series[0].samples.len(), t.len());
    }
}
