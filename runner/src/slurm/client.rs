//! Slurm's client commands (`sbatch`, `squeue`, `scancel`, `sinfo`), run as programs with
//! argument lists (nothing goes through a shell), their JSON read leniently: Slurm 22.05 writes
//! a job's state as a string and times as numbers, later versions as lists and `{number}`
//! objects; both are understood.

use std::ffi::OsString;
use std::process::Stdio;

use serde_json::Value as Json;
use tokio::process::Command;

/// One Slurm job as `squeue --json` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    pub id: u64,
    /// `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, …
    pub state: String,
    /// Why it pends or ended as it did (`Resources`, `Dependency`, `DependencyNeverSatisfied`,
    /// `None`).
    pub reason: String,
    /// The node(s) it runs or ran on.
    pub nodes: String,
    /// The batch script's exit status, when it ended.
    pub exit_code: Option<i64>,
    /// Unix seconds; 0 when not (yet) known.
    pub submit_time: u64,
    pub start_time: u64,
    pub end_time: u64,
}

/// Runs a Slurm command and returns its standard output; an error names the command and
/// carries its standard error.
async fn slurm(
    program: &str,
    args: &[OsString],
    env: &[(String, String)],
) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "`{program}` is not on PATH: run gpuflow where Slurm's client commands are (a login node), or install them (Debian: `slurm-client`)"
            ),
            _ => format!("could not run `{program}`: {e}"),
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "`{program}` failed ({}): {}",
        output.status,
        stderr.trim()
    ))
}

/// Submits a batch job; its id. `env` is added to what the job inherits (sbatch exports its
/// environment to the job by default).
pub async fn sbatch(args: &[OsString], env: &[(String, String)]) -> Result<u64, String> {
    let mut all: Vec<OsString> = vec!["--parsable".into()];
    all.extend_from_slice(args);
    let out = slurm("sbatch", &all, env).await?;
    // `--parsable`: `ID` or `ID;CLUSTER`.
    let id = out.trim().split(';').next().unwrap_or_default();
    id.parse()
        .map_err(|_| format!("`sbatch` answered `{}`, not a job id", out.trim()))
}

/// The jobs with these ids, finished ones included while the controller remembers them
/// (`MinJobAge`).
pub async fn squeue(ids: &[u64]) -> Result<Vec<JobInfo>, String> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let args: Vec<OsString> = vec![
        "--json".into(),
        "--states=all".into(),
        format!("--jobs={list}").into(),
    ];
    match slurm("squeue", &args, &[]).await {
        // Slurm 22.05's `--json` ignores `--jobs`: filtered here.
        Ok(out) => Ok(parse_jobs(&out)?
            .into_iter()
            .filter(|j| ids.contains(&j.id))
            .collect()),
        // squeue refuses a list whose ids all left the controller's memory.
        Err(e) if e.contains("Invalid job id") => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Every job of the cluster's queue (pending and running), for listings.
pub async fn queue() -> Result<Vec<JobInfo>, String> {
    parse_jobs(&slurm("squeue", &["--json".into()], &[]).await?)
}

/// Sends `signal` to the batch script and its steps (the job keeps its allocation until they
/// exit), or, without a signal, cancels the jobs outright.
pub async fn scancel(ids: &[u64], signal: Option<&str>) -> Result<(), String> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut args: Vec<OsString> = Vec::new();
    if let Some(signal) = signal {
        args.push(format!("--signal={signal}").into());
        args.push("--full".into());
    }
    args.extend(ids.iter().map(|id| OsString::from(id.to_string())));
    slurm("scancel", &args, &[]).await.map(drop)
}

/// `sinfo --json`'s nodes: name, state, partitions and GRES of each.
pub async fn nodes() -> Result<Vec<NodeInfo>, String> {
    let out = slurm("sinfo", &["--json".into()], &[]).await?;
    let json: Json = serde_json::from_str(&out)
        .map_err(|e| format!("`sinfo --json` answered what is not JSON: {e}"))?;
    let mut nodes: Vec<NodeInfo> = Vec::new();
    for node in json["nodes"].as_array().into_iter().flatten() {
        let info = NodeInfo {
            name: text(&node["name"]),
            state: state_text(&node["state"]),
            partitions: node["partitions"]
                .as_array()
                .map(|p| p.iter().map(text).collect())
                .unwrap_or_default(),
            gres: text(&node["gres"]),
            gres_used: text(&node["gres_used"]),
        };
        if !nodes.iter().any(|n| n.name == info.name) {
            nodes.push(info);
        }
    }
    Ok(nodes)
}

/// One node as `sinfo` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub state: String,
    pub partitions: Vec<String>,
    /// `gpu:8`, `gpu:h100:8(S:0-1)`.
    pub gres: String,
    /// `gpu:2(IDX:0-1)`.
    pub gres_used: String,
}

fn parse_jobs(out: &str) -> Result<Vec<JobInfo>, String> {
    let json: Json = serde_json::from_str(out)
        .map_err(|e| format!("`squeue --json` answered what is not JSON: {e}"))?;
    Ok(json["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|job| {
            Some(JobInfo {
                id: number(&job["job_id"])?,
                state: state_text(&job["job_state"]),
                reason: text(&job["state_reason"]),
                nodes: text(&job["nodes"]),
                exit_code: exit_code(&job["exit_code"]),
                submit_time: number(&job["submit_time"]).unwrap_or(0),
                start_time: number(&job["start_time"]).unwrap_or(0),
                end_time: number(&job["end_time"]).unwrap_or(0),
            })
        })
        .collect())
}

/// A number, or Slurm 23's `{"set": true, "number": N}`.
fn number(v: &Json) -> Option<u64> {
    v.as_u64().or_else(|| {
        (v["set"].as_bool() != Some(false))
            .then(|| v["number"].as_u64())
            .flatten()
    })
}

/// A state string, or Slurm 23's list of state flags (the first is the state).
fn state_text(v: &Json) -> String {
    match v {
        Json::Array(items) => items.first().map(text).unwrap_or_default(),
        other => text(other),
    }
}

fn text(v: &Json) -> String {
    v.as_str().map(String::from).unwrap_or_default()
}

/// 22.05: the raw wait status (exit code × 256); 23: `{"status": ..., "return_code": N}`.
fn exit_code(v: &Json) -> Option<i64> {
    v.as_i64()
        .map(|status| status >> 8)
        .or_else(|| v["return_code"].as_i64())
        .or_else(|| v["return_code"]["number"].as_i64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_of_slurm_22_and_23_are_read_alike() {
        let v22 = r#"{"jobs":[{"job_id":7,"job_state":"TIMEOUT","state_reason":"None","nodes":"gpu2",
            "exit_code":768,"submit_time":10,"start_time":11,"end_time":71}]}"#;
        let v23 = r#"{"jobs":[{"job_id":7,"job_state":["TIMEOUT"],"state_reason":"None","nodes":"gpu2",
            "exit_code":{"status":["FAILED"],"return_code":{"set":true,"number":3}},
            "submit_time":{"set":true,"number":10},"start_time":{"set":true,"number":11},
            "end_time":{"set":true,"number":71}}]}"#;
        let expected = JobInfo {
            id: 7,
            state: "TIMEOUT".into(),
            reason: "None".into(),
            nodes: "gpu2".into(),
            exit_code: Some(3),
            submit_time: 10,
            start_time: 11,
            end_time: 71,
        };
        assert_eq!(parse_jobs(v22).unwrap(), vec![expected.clone()]);
        assert_eq!(parse_jobs(v23).unwrap(), vec![expected]);
    }

    #[test]
    fn what_is_not_json_is_said() {
        let e = parse_jobs("squeue: error: oops").unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }
}
