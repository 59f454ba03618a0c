//! Slurm's client commands (`sbatch`, `squeue`, `scancel`, `sinfo`), run as programs with
//! argument lists (nothing goes through a shell), their JSON read leniently: Slurm 22.05 writes
//! a job's state as a string and times as numbers, later versions as lists and `{number}`
//! objects; both are understood.

use std::ffi::OsString;
use std::process::Stdio;

use serde_json::Value as Json;
use tokio::process::Command;

/// One Slurm job as `squeue --json` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JobInfo {
    pub id: u64,
    /// `--job-name` (gpuflow's: `gpuflow/<run>/<job>/<cell>`).
    pub name: String,
    /// Who submitted it: the user name, else the numeric id.
    pub user: String,
    pub partition: String,
    /// The GRES it asked for per node (`gpu:4`, `gpu:h100:8`); empty for none.
    pub gres: String,
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

/// Every job the controller knows, for listings: Slurm 22.05's `--json` ignores state filters,
/// so jobs that ended (within `MinJobAge`) come too; [`super::overview`] keeps the queued ones.
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
    parse_nodes(&out)
}

fn parse_nodes(out: &str) -> Result<Vec<NodeInfo>, String> {
    let json = answer("sinfo --json", out)?;
    let mut nodes: Vec<NodeInfo> = Vec::new();
    for node in json["nodes"].as_array().into_iter().flatten() {
        let info = NodeInfo {
            name: text(&node["name"]),
            state: node_state(node),
            reason: text(&node["reason"]),
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
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeInfo {
    pub name: String,
    /// Lower case, with its flags: `idle`, `mixed`, `down+drain`.
    pub state: String,
    /// Why it is down or drained, as the administrator wrote it; empty otherwise.
    pub reason: String,
    pub partitions: Vec<String>,
    /// `gpu:8`, `gpu:h100:8(S:0-1)`.
    pub gres: String,
    /// `gpu:2(IDX:0-1)`.
    pub gres_used: String,
}

fn parse_jobs(out: &str) -> Result<Vec<JobInfo>, String> {
    let json = answer("squeue --json", out)?;
    Ok(json["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|job| {
            Some(JobInfo {
                id: number(&job["job_id"])?,
                name: text(&job["name"]),
                user: match text(&job["user_name"]) {
                    name if name.is_empty() => number(&job["user_id"])
                        .map(|id| id.to_string())
                        .unwrap_or_default(),
                    name => name,
                },
                partition: text(&job["partition"]),
                gres: gres_asked(job),
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

/// A command's JSON answer, its `errors` as an error: a controller that cannot be reached
/// gets exit status 0, an empty list of jobs or nodes and an `errors` entry, which must not
/// read as an empty cluster (or as every job forgotten).
fn answer(command: &str, out: &str) -> Result<Json, String> {
    let json: Json = serde_json::from_str(out)
        .map_err(|e| format!("`{command}` answered what is not JSON: {e}"))?;
    let errors: Vec<String> = json["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let words: Vec<String> = [&e["description"], &e["error"], &e["source"]]
                .into_iter()
                .map(text)
                .filter(|t| !t.is_empty())
                .collect();
            if words.is_empty() {
                e.to_string()
            } else {
                words.join(", ")
            }
        })
        .collect();
    if errors.is_empty() {
        return Ok(json);
    }
    Err(format!(
        "`{command}` got no answer from the Slurm controller ({}): is it running and reachable from here? `scontrol ping` says",
        errors.join("; ")
    ))
}

/// A node's state with its flags, lower case: 22.05 writes `"state": "idle"` and
/// `"state_flags": ["DRAIN"]`, 23 `"state": ["IDLE", "DRAIN"]`.
fn node_state(node: &Json) -> String {
    let mut words: Vec<String> = match &node["state"] {
        Json::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    };
    words.extend(
        node["state_flags"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text),
    );
    let mut state: Vec<String> = Vec::new();
    for word in words.into_iter().filter(|w| !w.is_empty()) {
        let word = word.to_lowercase();
        if !state.contains(&word) {
            state.push(word);
        }
    }
    state.join("+")
}

/// The GRES a job asked for per node (`--gres`), else in all (`--gpus`), without the `gres:`
/// or `gres/` prefix that versions add: `gpu:4`, `gpu:h100:8`.
fn gres_asked(job: &Json) -> String {
    let asked = [&job["tres_per_node"], &job["tres_per_job"]]
        .into_iter()
        .map(text)
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    asked
        .split(',')
        .map(|one| {
            let one = one
                .strip_prefix("gres:")
                .or_else(|| one.strip_prefix("gres/"))
                .unwrap_or(one);
            one.replace('=', ":")
        })
        .collect::<Vec<_>>()
        .join(",")
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
            "name":"gpuflow/r/bench/0","user_name":"ana","partition":"gpu","tres_per_node":"gres:gpu:4",
            "exit_code":768,"submit_time":10,"start_time":11,"end_time":71}]}"#;
        let v23 = r#"{"jobs":[{"job_id":7,"job_state":["TIMEOUT"],"state_reason":"None","nodes":"gpu2",
            "name":"gpuflow/r/bench/0","user_name":"ana","partition":"gpu","tres_per_node":"gres/gpu:4",
            "exit_code":{"status":["FAILED"],"return_code":{"set":true,"number":3}},
            "submit_time":{"set":true,"number":10},"start_time":{"set":true,"number":11},
            "end_time":{"set":true,"number":71}}]}"#;
        let expected = JobInfo {
            id: 7,
            name: "gpuflow/r/bench/0".into(),
            user: "ana".into(),
            partition: "gpu".into(),
            gres: "gpu:4".into(),
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
    fn a_job_without_a_user_name_shows_its_uid() {
        let jobs =
            parse_jobs(r#"{"jobs":[{"job_id":8,"user_id":1000,"tres_per_job":"gres:gpu:2"}]}"#)
                .unwrap();
        assert_eq!(
            (jobs[0].user.as_str(), jobs[0].gres.as_str()),
            ("1000", "gpu:2")
        );
    }

    #[test]
    fn node_states_of_slurm_22_and_23_are_read_alike() {
        let v22 = serde_json::json!({"state": "idle", "state_flags": ["DRAIN"]});
        let v23 = serde_json::json!({"state": ["IDLE", "DRAIN"]});
        assert_eq!(node_state(&v22), "idle+drain");
        assert_eq!(node_state(&v23), "idle+drain");
    }

    #[test]
    fn a_controller_that_does_not_answer_is_an_error_not_an_empty_cluster() {
        // What Slurm 22.05 prints, with exit status 0, when slurmctld cannot be reached.
        let jobs = r#"{"errors":[{"description":"Failed while looking for jobs","error_number":-1,
            "error":"Unspecified error","source":"slurm_load_jobs"}],"jobs":[]}"#;
        let e = parse_jobs(jobs).unwrap_err();
        assert!(e.contains("Failed while looking for jobs"), "{e}");
        assert!(e.contains("scontrol ping"), "{e}");
        let nodes = r#"{"errors":[{"error":"Unspecified error","errno":-1}],"nodes":[]}"#;
        let e = parse_nodes(nodes).unwrap_err();
        assert!(e.contains("`sinfo --json` got no answer"), "{e}");
        assert_eq!(
            parse_nodes(r#"{"errors":[],"nodes":[]}"#).unwrap(),
            Vec::new()
        );
    }

    #[test]
    fn what_is_not_json_is_said() {
        let e = parse_jobs("squeue: error: oops").unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }
}
