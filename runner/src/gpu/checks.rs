//! Before timing: is a GPU fit to be measured on? Idle (no foreign process, enough free
//! memory), no uncorrected ECC errors, persistence mode on (otherwise the driver reloads
//! between processes and the first timed request pays for it), clocks not held down. Pure:
//! judges a [`GpuState`] read from NVML or the stand-in file; what to do on a failure (wait
//! or fail) is the caller's.

use std::time::Duration;

use super::inventory::{Gpu, GpuState};

/// Which checks run, and what a failure does.
#[derive(Clone, Debug, PartialEq)]
pub struct Checks {
    /// No process may use the GPU.
    pub idle: bool,
    /// At least this much memory free.
    pub min_free_memory_mib: Option<u64>,
    /// At most this many uncorrected ECC errors (volatile count).
    pub max_ecc_errors: Option<u64>,
    /// Persistence mode must be on.
    pub persistence_mode: bool,
    /// The SM clock must be at least this share of its maximum (`0.9`).
    pub min_sm_clock_ratio: Option<f64>,
    pub on_fail: OnFail,
    /// How long to wait for the checks to pass (with [`OnFail::Wait`]) before failing.
    pub wait_timeout: Duration,
}

impl Default for Checks {
    fn default() -> Self {
        Self {
            idle: false,
            min_free_memory_mib: None,
            max_ecc_errors: None,
            persistence_mode: false,
            min_sm_clock_ratio: None,
            on_fail: OnFail::Fail,
            wait_timeout: Duration::from_secs(600),
        }
    }
}

/// What a failed check does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFail {
    /// Check again every few seconds until they pass or the wait times out.
    Wait,
    /// Fail the job at once.
    Fail,
}

impl Checks {
    pub fn any(&self) -> bool {
        self.idle
            || self.min_free_memory_mib.is_some()
            || self.max_ecc_errors.is_some()
            || self.persistence_mode
            || self.min_sm_clock_ratio.is_some()
    }

    /// Every failed check of `gpu` in its current `state`, each in words with the value seen.
    /// A value the source does not report cannot fail a check; it is named in `unknown`.
    pub fn judge(&self, gpu: &Gpu, state: &GpuState) -> Verdict {
        let mut v = Verdict::default();
        let name = format!("GPU {}", gpu.index);
        let mut unknown = |what: &str| v.unknown.push(format!("{name}: {what} not reported"));
        let mut failed = Vec::new();
        if self.idle {
            match state.processes {
                Some(0) => {}
                Some(n) => failed.push(format!(
                    "{name} is not idle: {n} process{} use{} it",
                    if n == 1 { "" } else { "es" },
                    if n == 1 { "s" } else { "" }
                )),
                None => unknown("processes"),
            }
        }
        if let Some(min) = self.min_free_memory_mib {
            match state.memory_used_mib {
                Some(used) if gpu.memory_mib.saturating_sub(used) < min => failed.push(format!(
                    "{name} has {} MiB free, less than the {min} MiB asked",
                    gpu.memory_mib.saturating_sub(used)
                )),
                Some(_) => {}
                None => unknown("memory use"),
            }
        }
        if let Some(max) = self.max_ecc_errors {
            match state.ecc_errors {
                Some(n) if n > max => failed.push(format!(
                    "{name} has {n} uncorrected ECC error{} (at most {max} allowed)",
                    if n == 1 { "" } else { "s" }
                )),
                Some(_) => {}
                None => unknown("ECC errors"),
            }
        }
        if self.persistence_mode {
            match state.persistence_mode {
                Some(true) => {}
                Some(false) => failed.push(format!(
                    "{name} is not in persistence mode (`nvidia-smi -pm 1` turns it on)"
                )),
                None => unknown("persistence mode"),
            }
        }
        if let Some(ratio) = self.min_sm_clock_ratio {
            match (state.sm_clock_mhz, state.max_sm_clock_mhz) {
                (Some(now), Some(max)) if max > 0 && f64::from(now) < ratio * f64::from(max) => {
                    failed.push(format!(
                        "{name}'s SM clock is {now} MHz, below {:.0}% of its {max} MHz maximum",
                        ratio * 100.0
                    ));
                }
                (Some(_), Some(_)) => {}
                _ => unknown("SM clock"),
            }
        }
        v.failed = failed;
        v
    }
}

/// The outcome of the checks of one or more GPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub failed: Vec<String>,
    /// Values the source did not report (those checks could not fail).
    pub unknown: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.failed.is_empty()
    }

    pub fn extend(&mut self, other: Self) {
        self.failed.extend(other.failed);
        self.unknown.extend(other.unknown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::inventory::tests::pcie_node;

    fn all() -> Checks {
        Checks {
            idle: true,
            min_free_memory_mib: Some(40_000),
            max_ecc_errors: Some(0),
            persistence_mode: true,
            min_sm_clock_ratio: Some(0.9),
            ..Checks::default()
        }
    }

    #[test]
    fn a_ready_gpu_passes() {
        let gpu = &pcie_node().gpus[0];
        let state = GpuState {
            memory_used_mib: Some(0),
            processes: Some(0),
            ecc_errors: Some(0),
            persistence_mode: Some(true),
            sm_clock_mhz: Some(2520),
            max_sm_clock_mhz: Some(2520),
            power_w: None,
        };
        let v = all().judge(gpu, &state);
        assert!(v.passed(), "{v:?}");
        assert!(v.unknown.is_empty());
    }

    #[test]
    fn each_failure_is_said_with_the_value_seen() {
        let gpu = &pcie_node().gpus[2];
        let state = GpuState {
            memory_used_mib: Some(10_000),
            processes: Some(1),
            ecc_errors: Some(3),
            persistence_mode: Some(false),
            sm_clock_mhz: Some(1200),
            max_sm_clock_mhz: Some(2520),
            power_w: None,
        };
        let v = all().judge(gpu, &state);
        assert_eq!(
            v.failed,
            [
                "GPU 2 is not idle: 1 process uses it",
                "GPU 2 has 36068 MiB free, less than the 40000 MiB asked",
                "GPU 2 has 3 uncorrected ECC errors (at most 0 allowed)",
                "GPU 2 is not in persistence mode (`nvidia-smi -pm 1` turns it on)",
                "GPU 2's SM clock is 1200 MHz, below 90% of its 2520 MHz maximum",
            ]
        );
    }

    #[test]
    fn unreported_values_cannot_fail() {
        let v = all().judge(&pcie_node().gpus[1], &GpuState::default());
        assert!(v.passed());
        assert_eq!(v.unknown.len(), 5);
        assert!(!Checks::default().any());
    }
}
