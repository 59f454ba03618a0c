//! The environment fingerprint recorded with every result, and the series key that decides
//! which results may be compared.
//!
//! Identity fields are what changes a result for a known reason: the host, the GPUs, the
//! driver and CUDA, the image, the exact server command, the benchmark's definition. They are
//! hashed into the [`SeriesKey`]; two results with one key are "the same experiment". The
//! informational fields (host name, GPU UUIDs, clocks, power, temperature, topology) vary from
//! run to run without making results incomparable, so they are stored for reports and left
//! out of the hash: a swapped GPU of the same model keeps the series going.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What defines a comparable series. Field order is fixed: it is part of the hash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The host as named in gpuflow's host config (`blackwell`), or `local`.
    pub host_label: String,
    pub gpu_model: Option<String>,
    pub gpu_count: u32,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// The image's content digest (`sha256:…`), not its tag: a re-tagged image is another one.
    pub image_digest: Option<String>,
    /// The server's exact argv, flags included (`--cuda-graph-max-bs-decode 128`).
    pub server_command: Vec<String>,
    /// The benchmark's definition: its evaluated inputs (mode, tokens, concurrency, …).
    pub benchmark: BTreeMap<String, String>,
}

/// Recorded for the report, not part of the series key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    pub host_name: Option<String>,
    pub gpu_uuids: Vec<String>,
    pub clocks: Option<String>,
    pub power: Option<String>,
    pub temperature: Option<String>,
    pub topology: Option<String>,
    /// GPU telemetry while the step measured (docs/gpus.md): per-GPU summaries and the time
    /// series, or why there is none. Absent in results recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<serde_json::Value>,
    /// A warm server: one an earlier cell started and this one adopted (docs/campaigns.md),
    /// `server: 2 cells and 8 requests before, up 41s`; absent for a server this cell started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_reuse: Option<String>,
    /// Where Slurm ran it (docs/slurm.md): informational, as nodes of one type are meant to be
    /// alike; a baseline from another node says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmPlace>,
    /// Where the image came from: its repository digest (`registry/repo@sha256:…`, what a
    /// pull of it by digest fetches again), `name=…` for each of several servers. Absent for
    /// an image built on the host and never pushed, and in results recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_repo_digest: Option<String>,
    /// The server's own version where the image tells it (`vllm 0.32.0`, `sglang 0.5.23`,
    /// `llama-server version: 6432 (4d8c2ad8)`): informational, since the image digest already
    /// separates series; `compare-to-baseline` says when a baseline's differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
}

/// The Slurm node and job a result was measured in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmPlace {
    pub node: String,
    pub job_id: String,
}

impl SlurmPlace {
    /// The node and job of the Slurm job this process runs in (`SLURMD_NODENAME`,
    /// `SLURM_JOB_ID`, set by Slurm for the batch script and what it starts), if any.
    pub fn of_this_process() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Some(Self {
            node: var("SLURMD_NODENAME")?,
            job_id: var("SLURM_JOB_ID")?,
        })
    }
}

/// Everything known about where a result came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub identity: Identity,
    pub info: Info,
}

/// The SHA-256 of a fingerprint's identity fields, in hex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeriesKey(pub String);

impl SeriesKey {
    /// The first 12 hex digits, enough to tell series apart on a screen (like a short git
    /// hash); `--series` accepts any unique prefix.
    pub fn short(&self) -> &str {
        &self.0[..self.0.len().min(12)]
    }
}

impl std::fmt::Display for SeriesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One identity field that differs between a baseline and the current result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDiff {
    /// The field's name as the docs spell it (`driver`, `server-command`,
    /// `benchmark.output-tokens`).
    pub field: String,
    pub baseline: String,
    pub current: String,
}

impl FieldDiff {
    /// A short phrase for a one-line explanation: `driver `580` → `590``. A command line is
    /// long and usually differs in one flag, so only the differing words are shown
    /// (`server-command adds `--disable-custom-all-reduce``).
    pub fn describe(&self) -> String {
        if self.field != "server-command" {
            return format!("{} `{}` → `{}`", self.field, self.baseline, self.current);
        }
        let before: Vec<&str> = self.baseline.split(' ').collect();
        let after: Vec<&str> = self.current.split(' ').collect();
        let prefix = before
            .iter()
            .zip(&after)
            .take_while(|(a, b)| a == b)
            .count();
        let suffix = before[prefix..]
            .iter()
            .rev()
            .zip(after[prefix..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let removed = before[prefix..before.len() - suffix].join(" ");
        let added = after[prefix..after.len() - suffix].join(" ");
        match (removed.is_empty(), added.is_empty()) {
            (true, false) => format!("{} adds `{added}`", self.field),
            (false, true) => format!("{} drops `{removed}`", self.field),
            _ => format!("{} `{removed}` → `{added}`", self.field),
        }
    }
}

impl Identity {
    /// The fields as (name, display value) in hashing order. The display form of an absent
    /// value is `(none)`, so "unknown driver" and "driver ''" stay different in the hash too.
    fn fields(&self) -> Vec<(String, String)> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        let mut fields = vec![
            ("host".to_string(), self.host_label.clone()),
            ("gpu-model".into(), opt(&self.gpu_model)),
            ("gpu-count".into(), self.gpu_count.to_string()),
            ("driver".into(), opt(&self.driver)),
            ("cuda".into(), opt(&self.cuda)),
            ("image-digest".into(), opt(&self.image_digest)),
            ("server-command".into(), shell_words(&self.server_command)),
        ];
        for (k, v) in &self.benchmark {
            fields.push((format!("benchmark.{k}"), v.clone()));
        }
        fields
    }

    /// The series key. Each field is written as `name=` plus its JSON string and a newline,
    /// so no choice of values can make two different identities hash alike; the version tag
    /// lets a future change of the scheme start new series instead of silently mixing.
    pub fn series_key(&self) -> SeriesKey {
        let mut hasher = Sha256::new();
        hasher.update(b"gpuflow-series-v1\n");
        let string = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        for (name, value) in self.fields() {
            hasher.update(name.as_bytes());
            hasher.update(b"=");
            hasher.update(string(&value).as_bytes());
            hasher.update(b"\n");
        }
        // The argv itself, not only its joined form: `a b` as one argument is not `a` `b`.
        let argv = serde_json::to_string(&self.server_command).unwrap_or_default();
        hasher.update(argv.as_bytes());
        let digest = hasher.finalize();
        SeriesKey(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The identity fields that differ from `baseline`'s, in field order.
    pub fn differences(&self, baseline: &Identity) -> Vec<FieldDiff> {
        let mine: BTreeMap<String, String> = self.fields().into_iter().collect();
        let theirs: BTreeMap<String, String> = baseline.fields().into_iter().collect();
        let mut order: Vec<String> = baseline.fields().into_iter().map(|(k, _)| k).collect();
        for (k, _) in self.fields() {
            if !order.contains(&k) {
                order.push(k);
            }
        }
        let none = || "(none)".to_string();
        order
            .into_iter()
            .filter_map(|field| {
                let b = theirs.get(&field).cloned().unwrap_or_else(none);
                let c = mine.get(&field).cloned().unwrap_or_else(none);
                (b != c).then_some(FieldDiff {
                    field,
                    baseline: b,
                    current: c,
                })
            })
            .collect()
    }
}

/// The argv as a shell would need it typed: arguments with spaces or quotes are quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eagle3() -> Identity {
        Identity {
            host_label: "blackwell".into(),
            gpu_model: Some("NVIDIA RTX PRO 6000 Blackwell".into()),
            gpu_count: 8,
            driver: Some("580.65.06".into()),
            cuda: Some("12.9".into()),
            image_digest: Some("sha256:0123".into()),
            server_command: ["python3", "-m", "sglang.launch_server", "--tp", "8"]
                .map(String::from)
                .to_vec(),
            benchmark: BTreeMap::from([("output-tokens".into(), "256".into())]),
        }
    }

    #[test]
    fn the_key_is_stable_and_ignores_informational_fields() {
        let a = Fingerprint {
            identity: eagle3(),
            info: Info::default(),
        };
        let mut b = a.clone();
        b.info.host_name = Some("gpu-node-7".into());
        b.info.temperature = Some("71 C".into());
        assert_eq!(a.identity.series_key(), b.identity.series_key());
        assert_eq!(a.identity.series_key().0.len(), 64);
    }

    #[test]
    fn each_identity_field_changes_the_key_and_is_named() {
        let base = eagle3();
        let mut other = base.clone();
        other.driver = Some("575.57.08".into());
        assert_ne!(base.series_key(), other.series_key());
        let diff = other.differences(&base);
        assert_eq!(
            diff,
            vec![FieldDiff {
                field: "driver".into(),
                baseline: "580.65.06".into(),
                current: "575.57.08".into(),
            }]
        );

        let mut flags = base.clone();
        flags
            .server_command
            .extend(["--cuda-graph-max-bs".into(), "128".into()]);
        assert_eq!(flags.differences(&base)[0].field, "server-command");

        let mut bench = base.clone();
        bench.benchmark.insert("output-tokens".into(), "512".into());
        assert_eq!(bench.differences(&base)[0].field, "benchmark.output-tokens");
        assert!(base.differences(&base.clone()).is_empty());
    }

    #[test]
    fn info_recorded_before_versions_reads_and_new_fields_stay_out_of_the_key() {
        let old = r#"{"host_name":"n","gpu_uuids":[],"clocks":null,"power":null,"temperature":null,"topology":null}"#;
        let info: Info = serde_json::from_str(old).unwrap();
        assert_eq!(info.server_version, None);
        assert_eq!(info.image_repo_digest, None);
        // Absent fields are not written, so what older gpuflow stored reads back the same.
        assert_eq!(serde_json::to_string(&info).unwrap(), old);
        let mut with = info.clone();
        with.server_version = Some("vllm 0.32.0".into());
        with.image_repo_digest = Some("127.0.0.1:5000/vllm@sha256:ab".into());
        let json = serde_json::to_string(&with).unwrap();
        assert!(json.contains(r#""server_version":"vllm 0.32.0""#), "{json}");
        assert_eq!(serde_json::from_str::<Info>(&json).unwrap(), with);
    }

    #[test]
    fn argv_boundaries_count() {
        let mut one = eagle3();
        one.server_command = vec!["a b".into()];
        let mut two = eagle3();
        two.server_command = vec!["a".into(), "b".into()];
        assert_ne!(one.series_key(), two.series_key());
        assert_eq!(shell_words(&one.server_command), "'a b'");
    }
}
