//! What an image pull has done so far, from the engine's progress messages (the JSON stream
//! of `POST /images/create`, as `docker pull` prints it): per layer, `Pulling fs layer`,
//! `Waiting`, `Downloading` with bytes done and total, `Download complete`, `Extracting`,
//! `Pull complete` or `Already exists`; then `Digest: sha256:…` for the repository digest.
//! Summed into layers done, bytes done of the bytes known, the rate and the time left, for
//! the live view, `--plain` lines and `--json` events; and the last change, for a pull that
//! stalls.

use std::collections::BTreeMap;
use std::time::Duration;

use bollard::models::CreateImageInfo;

use crate::events::{EventKind, JobRef};

/// One layer as the engine last said it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Layer {
    /// Bytes downloaded and the layer's size, once its download began.
    current: u64,
    total: Option<u64>,
    downloaded: bool,
    done: bool,
    /// The engine's last word on it (`Downloading`, `Retrying in 5 seconds`, …).
    status: String,
}

/// The pull so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PullProgress {
    layers: BTreeMap<String, Layer>,
    /// `sha256:…` from the engine's `Digest:` line, once it said it.
    pub digest: Option<String>,
    /// This is try N of the pull, after the last one failed for this reason.
    pub retry: Option<(u32, String)>,
}

impl PullProgress {
    /// A new pull, try `retry.0` after a failure for `retry.1` when given.
    pub fn new(retry: Option<(u32, String)>) -> Self {
        Self {
            retry,
            ..Default::default()
        }
    }

    /// Takes one message of the engine's stream; `true` when it changed what is known.
    pub fn take(&mut self, info: &CreateImageInfo) -> bool {
        let status = info.status.as_deref().unwrap_or_default();
        if let Some(digest) = status.strip_prefix("Digest: ") {
            let changed = self.digest.as_deref() != Some(digest.trim());
            self.digest = Some(digest.trim().to_string());
            return changed;
        }
        // Lines about the image as a whole (`Pulling from …`, `Status: …`) have no layer.
        let Some(id) = info.id.as_deref().filter(|id| is_layer_id(id)) else {
            return false;
        };
        let before = self.layers.get(id).cloned();
        let layer = self.layers.entry(id.to_string()).or_default();
        let detail = info.progress_detail.as_ref();
        let current = detail.and_then(|d| d.current).map(|c| c.max(0) as u64);
        let total = detail
            .and_then(|d| d.total)
            .filter(|t| *t > 0)
            .map(|t| t as u64);
        match status {
            "Downloading" => {
                layer.current = current.unwrap_or(layer.current);
                layer.total = total.or(layer.total);
            }
            "Download complete" | "Verifying Checksum" => {
                layer.downloaded = true;
                if let Some(t) = layer.total {
                    layer.current = t;
                }
            }
            // Extraction follows a complete download.
            "Extracting" => {
                layer.downloaded = true;
                if let Some(t) = layer.total {
                    layer.current = t;
                }
            }
            "Pull complete" | "Already exists" => {
                layer.downloaded = true;
                layer.done = true;
                if let Some(t) = layer.total {
                    layer.current = t;
                }
            }
            _ => {}
        }
        layer.status = status.to_string();
        before.as_ref() != Some(layer)
    }

    /// Layers the image has, as far as the engine said.
    pub fn layers_total(&self) -> usize {
        self.layers.len()
    }

    pub fn layers_done(&self) -> usize {
        self.layers.values().filter(|l| l.done).count()
    }

    /// Bytes downloaded, and the sum of the sizes known (a layer's size is known once its
    /// download begins; `Already exists` layers are not downloaded).
    pub fn bytes(&self) -> (u64, u64) {
        let done = self.layers.values().map(|l| l.current).sum();
        let total = self.layers.values().filter_map(|l| l.total).sum();
        (done, total)
    }

    /// Layers whose size is not known yet (waiting for a download slot).
    pub fn sizes_unknown(&self) -> usize {
        self.layers
            .values()
            .filter(|l| l.total.is_none() && !l.done)
            .count()
    }

    /// The layer that is furthest from done, and what the engine last said of it: where a
    /// stalled pull stopped.
    pub fn stuck_layer(&self) -> Option<String> {
        self.layers
            .iter()
            .filter(|(_, l)| !l.done)
            .min_by_key(|(_, l)| l.downloaded)
            .map(|(id, l)| match l.total {
                Some(t) => format!(
                    "layer {id} ({}: {} of {})",
                    l.status,
                    bytes_text(l.current),
                    bytes_text(t)
                ),
                None => format!("layer {id} ({})", l.status),
            })
    }

    /// One line: `412.0 MiB of 1.13 GiB, 2 of 5 layers, 52.1 MiB/s, about 14s left`.
    pub fn line(&self, elapsed: Duration) -> String {
        let retry = match &self.retry {
            Some((attempt, reason)) => format!("try {attempt} (the last failed: {reason}); "),
            None => String::new(),
        };
        retry + &self.counts(elapsed)
    }

    fn counts(&self, elapsed: Duration) -> String {
        let (done, total) = self.bytes();
        let secs = elapsed.as_secs_f64();
        let mut s = format!(
            "{} of {}{}, {} of {} layers",
            bytes_text(done),
            bytes_text(total),
            match self.sizes_unknown() {
                0 => String::new(),
                n => format!(" known ({n} layers waiting)"),
            },
            self.layers_done(),
            self.layers_total()
        );
        if secs >= 0.5 && done > 0 {
            let rate = done as f64 / secs;
            s.push_str(&format!(", {}/s", bytes_text(rate as u64)));
            if total > done && self.sizes_unknown() == 0 {
                let left = (total - done) as f64 / rate;
                s.push_str(&format!(", about {} left", seconds_text(left)));
            }
        }
        s
    }
}

impl PullProgress {
    /// The pull so far as an event of `job` (and of its step `step`; `None` for preflight).
    pub fn event(
        &self,
        job: &JobRef,
        step: Option<&str>,
        image: &str,
        elapsed: Duration,
        finished: bool,
    ) -> EventKind {
        let (bytes_done, bytes_total) = self.bytes();
        let mut text = self.line(elapsed);
        if finished && let Some(digest) = &self.digest {
            text.push_str(&format!(" ({digest})"));
        }
        EventKind::ImagePull {
            job: job.clone(),
            step: step.map(String::from),
            image: image.to_string(),
            layers_done: self.layers_done(),
            layers_total: self.layers_total(),
            bytes_done,
            bytes_total,
            elapsed,
            finished,
            text,
        }
    }
}

/// The engine names layers by the first 12 hex digits of their digest.
fn is_layer_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit >= 2 {
        format!("{value:.2} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn seconds_text(secs: f64) -> String {
    let secs = secs.round() as u64;
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::ProgressDetail;

    fn msg(id: &str, status: &str, progress: Option<(i64, i64)>) -> CreateImageInfo {
        CreateImageInfo {
            id: Some(id.to_string()),
            status: Some(status.to_string()),
            progress_detail: progress.map(|(current, total)| ProgressDetail {
                current: Some(current),
                total: Some(total),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_pull_is_summed_from_the_engines_messages() {
        let mut p = PullProgress::default();
        let mib = 1 << 20;
        // The image line has no layer.
        assert!(!p.take(&msg("test", "Pulling from big", None)));
        for id in ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"] {
            assert!(p.take(&msg(id, "Pulling fs layer", None)));
        }
        assert!(p.take(&msg("aaaaaaaaaaaa", "Already exists", None)));
        assert!(p.take(&msg(
            "bbbbbbbbbbbb",
            "Downloading",
            Some((100 * mib, 300 * mib))
        )));
        assert_eq!(p.bytes(), (100 * mib as u64, 300 * mib as u64));
        assert_eq!(p.sizes_unknown(), 1);
        let line = p.line(Duration::from_secs(2));
        assert_eq!(
            line,
            "100.0 MiB of 300.0 MiB known (1 layers waiting), 1 of 3 layers, 50.0 MiB/s"
        );
        assert!(p.take(&msg("cccccccccccc", "Downloading", Some((0, 100 * mib)))));
        // The same message again changes nothing: the stall clock keeps running.
        assert!(!p.take(&msg("cccccccccccc", "Downloading", Some((0, 100 * mib)))));
        assert!(p.take(&msg("bbbbbbbbbbbb", "Download complete", None)));
        assert_eq!(p.bytes(), (300 * mib as u64, 400 * mib as u64));
        assert_eq!(
            p.line(Duration::from_secs(3)),
            "300.0 MiB of 400.0 MiB, 1 of 3 layers, 100.0 MiB/s, about 1s left"
        );
        assert_eq!(
            p.stuck_layer().as_deref(),
            Some("layer cccccccccccc (Downloading: 0 B of 100.0 MiB)")
        );
        p.take(&msg("bbbbbbbbbbbb", "Pull complete", None));
        p.take(&msg("cccccccccccc", "Pull complete", None));
        assert_eq!(p.layers_done(), 3);
        assert!(p.take(&CreateImageInfo {
            status: Some("Digest: sha256:0123".into()),
            ..Default::default()
        }));
        assert_eq!(p.digest.as_deref(), Some("sha256:0123"));
    }
}
