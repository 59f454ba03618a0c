//! One reading of one GPU's telemetry: what NVML is asked for (`nvml::sample`) and what the
//! sampler keeps (`telemetry`), in a file of its own so that neither imports the other for it.

use serde::Serialize;

/// One reading of one GPU; each field `None` where the GPU does not report it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    pub utilization_pct: Option<u32>,
    pub memory_used_mib: Option<u64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
}
