//! This machine's GPUs through NVML, the driver's own library (loaded at run time by
//! `nvml-wrapper`: a machine without the driver builds and runs gpuflow, and discovery says
//! "no NVML" instead of failing). Used for the inventory, the before-timing checks' state and
//! telemetry samples.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::error::NvmlError;

use super::inventory::{Gpu, GpuState, Inventory, Link, PciePath, Source};
use super::sample::Sample;

/// NVML loaded, or why not in words.
pub fn open() -> Result<Nvml, String> {
    Nvml::init().map_err(|e| match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
            "no NVIDIA driver library (libnvidia-ml.so.1) on this machine".to_string()
        }
        NvmlError::DriverNotLoaded => "the NVIDIA driver is not loaded".to_string(),
        NvmlError::NoPermission => "no permission to read the GPUs through NVML".to_string(),
        other => format!("NVML did not start: {other}"),
    })
}

/// This machine's inventory; no driver or no GPU is an inventory without GPUs, with why.
pub fn discover() -> Inventory {
    let nvml = match open() {
        Ok(nvml) => nvml,
        Err(reason) => return Inventory::none(reason),
    };
    match read(&nvml) {
        Ok(inv) if inv.gpus.is_empty() => {
            Inventory::none("the NVIDIA driver is loaded but reports no GPU")
        }
        Ok(inv) => inv,
        Err(e) => Inventory::none(format!("NVML could not list the GPUs: {e}")),
    }
}

fn read(nvml: &Nvml) -> Result<Inventory, NvmlError> {
    let count = nvml.device_count()?;
    let mut gpus = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i)?;
        let memory = d.memory_info()?;
        gpus.push(Gpu {
            index: d.index().unwrap_or(i),
            uuid: d.uuid()?,
            model: d.name()?,
            memory_mib: memory.total / (1024 * 1024),
            mig: d.mig_mode().ok().map(|m| m.current == 1),
            numa_node: d.numa_node_id().ok(),
            bus_id: d.pci_info().ok().map(|p| p.bus_id),
            state: state_of(nvml, i),
        });
    }
    let mut links = Vec::new();
    for (a, ga) in gpus.iter().enumerate() {
        let mut row = Vec::new();
        for (b, gb) in gpus.iter().enumerate() {
            row.push(if a == b {
                Link::SELF
            } else {
                link(nvml, ga.index, gb)
            });
        }
        links.push(row);
    }
    let cuda = nvml.sys_cuda_driver_version().ok().map(|v| {
        format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        )
    });
    Ok(Inventory {
        source: Source::Nvml,
        driver: nvml.sys_driver_version().ok(),
        cuda,
        gpus,
        links,
    })
}

/// The PCIe path from the common ancestor, and the active NVLinks whose far end is `to`.
fn link(nvml: &Nvml, from: u32, to: &Gpu) -> Link {
    use nvml_wrapper::enum_wrappers::device::TopologyLevel;
    let (Ok(a), Ok(b)) = (nvml.device_by_index(from), nvml.device_by_index(to.index)) else {
        return Link {
            nvlinks: 0,
            pcie: PciePath::Unknown,
        };
    };
    let pcie = match a.topology_common_ancestor(b) {
        Ok(TopologyLevel::Internal | TopologyLevel::Single) => PciePath::Pix,
        Ok(TopologyLevel::Multiple) => PciePath::Pxb,
        Ok(TopologyLevel::HostBridge) => PciePath::Phb,
        Ok(TopologyLevel::Node) => PciePath::Node,
        Ok(TopologyLevel::System) => PciePath::Sys,
        Err(_) => PciePath::Unknown,
    };
    let mut nvlinks = 0;
    if let Some(bus) = &to.bus_id {
        for l in 0..nvml_wrapper_sys_max_links() {
            let link = a.link_wrapper_for(l);
            if link.is_active().unwrap_or(false)
                && link
                    .remote_pci_info()
                    .is_ok_and(|p| p.bus_id.eq_ignore_ascii_case(bus))
            {
                nvlinks += 1;
            }
        }
    }
    Link { nvlinks, pcie }
}

/// NVML's most links per GPU (`NVML_NVLINK_MAX_LINKS`).
fn nvml_wrapper_sys_max_links() -> u32 {
    18
}

/// What the before-timing checks read of GPU `index`; unknowns stay `None`.
pub fn state_of(nvml: &Nvml, index: u32) -> GpuState {
    let Ok(d) = nvml.device_by_index(index) else {
        return GpuState::default();
    };
    let processes = match (
        d.running_compute_processes(),
        d.running_graphics_processes(),
    ) {
        (Ok(c), Ok(g)) => Some((c.len() + g.len()) as u32),
        (Ok(c), Err(_)) => Some(c.len() as u32),
        _ => None,
    };
    GpuState {
        memory_used_mib: d.memory_info().ok().map(|m| m.used / (1024 * 1024)),
        processes,
        ecc_errors: d
            .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .ok(),
        persistence_mode: d.is_in_persistent_mode().ok(),
        sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        max_sm_clock_mhz: d.max_clock_info(Clock::SM).ok(),
        power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
    }
}

/// One telemetry sample of GPU `index`.
pub fn sample(nvml: &Nvml, index: u32) -> Sample {
    let Ok(d) = nvml.device_by_index(index) else {
        return Sample::default();
    };
    let utilization = d.utilization_rates().ok();
    Sample {
        utilization_pct: utilization.as_ref().map(|u| u.gpu),
        memory_used_mib: d.memory_info().ok().map(|m| m.used / (1024 * 1024)),
        power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
        sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
    }
}
