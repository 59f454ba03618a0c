//! A container's GPU request and how Docker is told about it: a `DeviceRequest` for the
//! `nvidia` driver with capabilities `[["gpu"]]` (Docker's OR-list of AND-lists), and the
//! check that the user's `NVIDIA_VISIBLE_DEVICES` does not contradict it.

use bollard::models::DeviceRequest;

/// Which GPUs a container gets. The backend does not allocate: it is told the result of the
/// allocation (a count, or the device ids / UUIDs leased to the job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GpuRequest {
    /// No GPU.
    #[default]
    None,
    /// Every GPU of the host (`count: -1`).
    All,
    /// Any `n` GPUs, chosen by the runtime.
    Count(u32),
    /// These devices, by index (`0`) or UUID (`GPU-…`).
    Devices(Vec<String>),
}

/// The driver name Docker maps to the NVIDIA Container Toolkit.
const NVIDIA_DRIVER: &str = "nvidia";

impl GpuRequest {
    /// Whether any GPU is asked for (`Count(0)` and an empty id list are not).
    pub fn is_requested(&self) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Count(n) => *n > 0,
            Self::Devices(ids) => !ids.is_empty(),
        }
    }

    /// The request as Docker's `HostConfig.DeviceRequests` entry.
    pub(crate) fn device_request(&self) -> Option<DeviceRequest> {
        if !self.is_requested() {
            return None;
        }
        // Docker refuses a request that sets both a count and ids.
        let (count, device_ids) = match self {
            Self::All => (Some(-1), None),
            Self::Count(n) => (Some(i64::from(*n)), None),
            Self::Devices(ids) => (None, Some(ids.clone())),
            Self::None => return None,
        };
        Some(DeviceRequest {
            driver: Some(NVIDIA_DRIVER.to_string()),
            count,
            device_ids,
            capabilities: Some(vec![vec!["gpu".to_string()]]),
            options: None,
        })
    }

    /// Checks a user-set `NVIDIA_VISIBLE_DEVICES` against the request. The NVIDIA runtime
    /// reads that variable, so a disagreeing value would expose other GPUs than the ones
    /// allocated (or GPUs to a job that asked for none). Equal sets are accepted.
    pub(crate) fn check_visible_devices(&self, value: &str) -> Result<(), String> {
        let value = value.trim();
        let hides_all = matches!(value, "" | "void" | "none");
        let agrees = match self {
            _ if !self.is_requested() => hides_all,
            Self::None => hides_all,
            Self::All => value == "all",
            // The runtime picks which devices; any fixed list may name other ones.
            Self::Count(_) => false,
            Self::Devices(ids) => {
                let mut asked: Vec<&str> = ids.iter().map(|s| s.trim()).collect();
                let mut given: Vec<&str> = value.split(',').map(str::trim).collect();
                asked.sort_unstable();
                given.sort_unstable();
                asked == given
            }
        };
        if agrees { Ok(()) } else { Err(self.describe()) }
    }

    /// The request in words, for messages.
    pub fn describe(&self) -> String {
        match self {
            _ if !self.is_requested() => "no GPU".to_string(),
            Self::None => "no GPU".to_string(),
            Self::All => "all GPUs".to_string(),
            Self::Count(1) => "1 GPU".to_string(),
            Self::Count(n) => format!("{n} GPUs"),
            Self::Devices(ids) => format!(
                "GPU {} {}",
                if ids.len() == 1 { "device" } else { "devices" },
                ids.iter()
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test]
    fn all_is_count_minus_one() {
        let r = GpuRequest::All.device_request().unwrap();
        assert_eq!(r.driver.as_deref(), Some("nvidia"));
        assert_eq!(r.count, Some(-1));
        assert_eq!(r.device_ids, None);
        assert_eq!(r.capabilities, Some(vec![vec!["gpu".to_string()]]));
    }

    #[test]
    fn ids_are_passed_without_a_count() {
        let ids = vec!["0".to_string(), "GPU-8d1b9b5e-0c5e-4f8d".to_string()];
        let r = GpuRequest::Devices(ids.clone()).device_request().unwrap();
        assert_eq!(r.device_ids, Some(ids));
        assert_eq!(r.count, None);
    }

    #[test_case(GpuRequest::None ; "none")]
    #[test_case(GpuRequest::Count(0) ; "zero")]
    #[test_case(GpuRequest::Devices(vec![]) ; "no ids")]
    fn nothing_requested_means_no_device_request(r: GpuRequest) {
        assert!(!r.is_requested());
        assert_eq!(r.device_request(), None);
    }

    #[test_case(GpuRequest::All, "all", true ; "all agrees with all")]
    #[test_case(GpuRequest::All, "0,1", false ; "all vs a list")]
    #[test_case(GpuRequest::Count(2), "0,1", false ; "a count vs any list")]
    #[test_case(GpuRequest::Devices(vec!["1".into(), "0".into()]), "0, 1", true ; "same ids in another order")]
    #[test_case(GpuRequest::Devices(vec!["0".into()]), "0,1", false ; "more ids than leased")]
    #[test_case(GpuRequest::Devices(vec!["0".into()]), "all", false ; "all vs one id")]
    #[test_case(GpuRequest::None, "all", false ; "gpus to a job that asked for none")]
    #[test_case(GpuRequest::None, "void", true ; "void hides gpus")]
    #[test_case(GpuRequest::None, "none", true ; "none hides gpus")]
    fn visible_devices(r: GpuRequest, value: &str, ok: bool) {
        assert_eq!(
            r.check_visible_devices(value).is_ok(),
            ok,
            "{r:?} vs {value}"
        );
    }

    #[test]
    fn describes_in_words() {
        assert_eq!(GpuRequest::Count(1).describe(), "1 GPU");
        assert_eq!(GpuRequest::Count(8).describe(), "8 GPUs");
        assert_eq!(
            GpuRequest::Devices(vec!["0".into(), "3".into()]).describe(),
            "GPU devices `0`, `3`"
        );
    }
}
