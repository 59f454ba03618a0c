//! One worker per host: the worker holds an exclusive `flock` on `worker.lock` for its whole
//! life (the kernel drops it when the process dies, however it dies), and the file says its
//! pid. `gpuflow trigger` tries the lock to tell whether a worker runs, and starts one,
//! detached, when none does.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::trigger::GpuflowHome;

/// The held lock; dropping it lets another worker start.
#[derive(Debug)]
pub struct WorkerLock {
    file: File,
}

impl WorkerLock {
    /// Takes the lock, or `None` when another worker holds it.
    pub fn try_acquire(path: &Path) -> std::io::Result<Option<Self>> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .read(true)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(Some(Self { file }))
    }

    /// Lets the lock go (the file stays, saying nothing).
    pub fn release(self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Whether a worker holds the lock now.
pub fn worker_running(home: &GpuflowHome) -> bool {
    let Ok(file) = OpenOptions::new().read(true).write(true).open(home.lock()) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(_) => true,
    }
}

/// The pid the running worker wrote into the lock file.
pub fn worker_pid(home: &GpuflowHome) -> Option<u32> {
    std::fs::read_to_string(home.lock())
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Starts `gpuflow worker` in the background unless one runs, detached from the caller: its
/// own process group (a Ctrl-C in the caller's terminal does not reach it), no terminal, its
/// output appended to `worker.log`. A git hook must not wait for it, and git waits for every
/// process holding the hook's stdout or stderr open: so none of them is inherited.
/// Returns the new worker's pid, or `None` when one already ran.
pub fn start_detached(
    home: &GpuflowHome,
    gpuflow: &Path,
    idle_exit: Option<Duration>,
) -> std::io::Result<Option<u32>> {
    use std::os::unix::process::CommandExt;
    if worker_running(home) {
        return Ok(None);
    }
    home.ensure()?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.worker_log())?;
    let mut cmd = Command::new(gpuflow);
    cmd.arg("worker")
        .env("GPUFLOW_HOME", &home.dir)
        .current_dir(&home.dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    if let Some(idle) = idle_exit {
        cmd.arg("--idle-exit")
            .arg(humantime::format_duration(idle).to_string());
    }
    // The hook's git environment names the repository the hook runs for; the worker serves
    // every repository and opens each by path.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    let child = cmd.spawn()?;
    Ok(Some(child.id()))
}
