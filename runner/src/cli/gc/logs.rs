//! `gpuflow gc --logs-older-than DURATION` / `--logs-max-total SIZE`: removes the stored logs
//! of old runs (`.gpuflow/runs/<id>/`, docs/running.md), whole folders, oldest first. A run in
//! progress is never touched: its store holds an exclusive `flock` on its `events.jsonl` for
//! as long as it runs, which the kernel frees however the runner ends (so a runner killed with
//! SIGKILL does not keep its folder forever), across PID namespaces and whatever the pid
//! says. A folder without that lock is still kept while it is recent and its run has not
//! finished: one the queue's worker made for a run about to start, or one of an older gpuflow.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::diag::ExitCode;
use crate::run_logs::files::{disk_size, format_size, run_in_progress};

/// An unfinished run's folder without the lock is kept while written to this recently.
const STARTING: Duration = Duration::from_secs(600);

/// One run's folder.
#[derive(Debug)]
pub struct RunFolder {
    pub path: PathBuf,
    pub id: String,
    /// The newest modification time of anything in it: when the run last wrote.
    pub written: SystemTime,
    pub bytes: u64,
    pub in_progress: bool,
}

/// Why a folder goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Reason {
    Older,
    OverTotal,
}

/// Each run folder directly under `runs`, newest first. Symbolic links and files are skipped:
/// only folders a run wrote are gc's to remove.
pub fn scan(runs: &Path, now: SystemTime) -> std::io::Result<Vec<RunFolder>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(runs)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let path = entry.path();
        let written = walkdir::WalkDir::new(&path)
            .into_iter()
            .filter_map(Result::ok)
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .max()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let recent = now.duration_since(written).unwrap_or_default() < STARTING;
        found.push(RunFolder {
            id: entry.file_name().to_string_lossy().into_owned(),
            bytes: disk_size(&path),
            in_progress: run_in_progress(&path) || (recent && !finished(&path)),
            written,
            path,
        });
    }
    found.sort_by(|a, b| b.written.cmp(&a.written).then_with(|| b.id.cmp(&a.id)));
    Ok(found)
}

/// Whether `events.jsonl` ends with the run's end (read from its last 64 KiB only).
fn finished(run: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(run.join("events.jsonl")) else {
        return false;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let mut tail = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))
        .is_err()
        || f.read_to_end(&mut tail).is_err()
    {
        return false;
    }
    let tail = String::from_utf8_lossy(&tail);
    tail.contains(r#""type":"run_finished""#) || tail.contains(r#""type":"run_headline""#)
}

/// Which folders (indexes into `runs`, newest first) go, and why: those older than
/// `older_than`, and, keeping the newest within `max_total` bytes, every one after the first
/// that does not fit. Folders of runs in progress stay, and count toward the total.
pub fn choose(
    runs: &[RunFolder],
    now: SystemTime,
    older_than: Option<Duration>,
    max_total: Option<u64>,
) -> Vec<(usize, Reason)> {
    let mut chosen = Vec::new();
    let mut kept: u64 = 0;
    let mut over = false;
    for (i, run) in runs.iter().enumerate() {
        if run.in_progress {
            kept = kept.saturating_add(run.bytes);
            continue;
        }
        let age = now.duration_since(run.written).unwrap_or_default();
        if older_than.is_some_and(|d| age > d) {
            chosen.push((i, Reason::Older));
            continue;
        }
        if let Some(max) = max_total {
            over = over || kept.saturating_add(run.bytes) > max;
            if over {
                chosen.push((i, Reason::OverTotal));
                continue;
            }
        }
        kept = kept.saturating_add(run.bytes);
    }
    chosen
}

/// `3 days`, `5 hours`, `12 minutes`, `40 seconds`: how long ago, roughly.
fn ago(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = match s {
        0..120 => (s, "second"),
        120..7200 => (s / 60, "minute"),
        7200..172_800 => (s / 3600, "hour"),
        _ => (s / 86_400, "day"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

pub fn run(
    runs_dir: &Path,
    older_than: Option<Duration>,
    max_total: Option<u64>,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let now = SystemTime::now();
    let runs = match scan(runs_dir, now) {
        Ok(runs) => runs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("nothing to remove: no run logs in `{}`", runs_dir.display());
            return Ok(ExitCode::Success);
        }
        Err(e) => {
            eprintln!(
                "error: cannot read the run logs in `{}`: {e}",
                runs_dir.display()
            );
            return Ok(ExitCode::Infrastructure);
        }
    };
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut removed = 0usize;
    let mut freed = 0u64;
    let mut failed = false;
    for (i, reason) in choose(&runs, now, older_than, max_total) {
        let run = &runs[i];
        // A run may have started in this folder since the scan (a queued run's folder).
        if run_in_progress(&run.path) {
            continue;
        }
        if !dry_run && let Err(e) = std::fs::remove_dir_all(&run.path) {
            eprintln!("error: could not remove `{}`: {e}", run.path.display());
            failed = true;
            continue;
        }
        let why = match reason {
            Reason::Older => "older than `--logs-older-than`",
            Reason::OverTotal => "past `--logs-max-total` with the newer runs",
        };
        println!(
            "{verb} the logs of run `{}` ({}, last written {} ago; {why})",
            run.id,
            format_size(run.bytes),
            ago(now.duration_since(run.written).unwrap_or_default()),
        );
        removed += 1;
        freed += run.bytes;
    }
    for run in runs.iter().filter(|r| r.in_progress) {
        println!("kept the logs of run `{}`: in progress", run.id);
    }
    if removed == 0 {
        println!(
            "nothing to remove in `{}`: {} run(s), {} in all",
            runs_dir.display(),
            runs.len(),
            format_size(runs.iter().map(|r| r.bytes).sum())
        );
    } else {
        println!(
            "{verb} the logs of {removed} run(s), {} from `{}`",
            format_size(freed),
            runs_dir.display()
        );
    }
    Ok(if failed {
        ExitCode::Infrastructure
    } else {
        ExitCode::Success
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(id: &str, days_ago: u64, mib: u64, in_progress: bool) -> RunFolder {
        RunFolder {
            path: PathBuf::from(id),
            id: id.into(),
            written: SystemTime::UNIX_EPOCH + Duration::from_secs(100 * 86_400 - days_ago * 86_400),
            bytes: mib << 20,
            in_progress,
        }
    }

    #[test]
    fn the_newest_runs_within_the_total_are_kept_and_running_ones_always() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100 * 86_400);
        let runs = [
            folder("a", 0, 4, true),
            folder("b", 1, 4, false),
            folder("c", 2, 4, true),
            folder("d", 3, 1, false),
            folder("e", 9, 1, false),
        ];
        let day = Duration::from_secs(86_400);
        // 4 (a, running) + 4 (b) = 8 fit in 10; c runs (12); d would make 13: it and e go.
        assert_eq!(
            choose(&runs, now, None, Some(10 << 20)),
            [(3, Reason::OverTotal), (4, Reason::OverTotal)]
        );
        assert_eq!(
            choose(&runs, now, Some(7 * day), None),
            [(4, Reason::Older)]
        );
        assert_eq!(choose(&runs, now, Some(day / 2), None).len(), 3);
        assert_eq!(ago(3 * day + day / 2), "3 days");
        assert_eq!(ago(Duration::from_secs(60)), "60 seconds");
    }
}
