//! A workspace a test runs gpuflow in: a temporary folder, removed when dropped, with files
//! and either a bare `.git` folder (enough for gpuflow to take it as the root, so `./actions`
//! resolve there) or a real git repository with commits (what triggers, reports and the
//! results store read).

use std::path::Path;

use super::command::{Gpuflow, gpuflow};
use super::git::git;

pub(crate) struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    /// An empty folder with a `.git` folder in it: a workspace root, but no repository.
    pub(crate) fn new() -> Self {
        let workspace = Self::empty();
        std::fs::create_dir(workspace.path().join(".git")).unwrap();
        workspace
    }

    /// A git repository with branch `main` and no commit yet.
    pub(crate) fn repository() -> Self {
        let workspace = Self::empty();
        workspace.git(&["init", "-q", "-b", "main"]);
        workspace
    }

    /// A folder with nothing in it, not even `.git`.
    pub(crate) fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// With a file at `path` (relative; folders made as needed) holding `text`.
    pub(crate) fn file(self, path: &str, text: &str) -> Self {
        self.write(path, text);
        self
    }

    /// With every file of `files` (`path`, text).
    pub(crate) fn files(self, files: &[(&str, &str)]) -> Self {
        for (path, text) in files {
            self.write(path, text);
        }
        self
    }

    /// With everything committed (`git add -A`), as commit `message`.
    pub(crate) fn committed(self, message: &str) -> Self {
        self.commit(message);
        self
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `path` (relative; folders made as needed).
    pub(crate) fn write(&self, path: &str, text: &str) {
        let path = self.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Runs git here; its stdout.
    pub(crate) fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    /// Commits everything as `message`; the new commit's id.
    pub(crate) fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// The folders of the runs started here (`.gpuflow/runs/*`), sorted; none when none ran.
    pub(crate) fn runs(&self) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.path().join(".gpuflow/runs")) else {
            return Vec::new();
        };
        let mut runs: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        runs.sort();
        runs
    }

    /// The folder of the one run started here; fails the test when there are more or none.
    pub(crate) fn only_run(&self) -> std::path::PathBuf {
        let mut runs = self.runs();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs.pop().unwrap()
    }

    /// `gpuflow` run in this workspace.
    pub(crate) fn gpuflow(&self) -> Gpuflow {
        gpuflow().current_dir(self.path())
    }

    /// A git repository holding `w.yml` (`yaml`), committed, for a `gpuflow run` on the local
    /// engine: checks `images` there first; `None` only when Docker tests are skipped knowingly.
    pub(crate) async fn workflow_repository(yaml: &str, images: &[&str]) -> Option<Self> {
        super::images::docker_with(images).await?;
        Some(Self::repository().file("w.yml", yaml).committed("workflow"))
    }

    /// `gpuflow run --plain w.yml ARGS` here, whatever the exit (stdout and stderr both kept).
    pub(crate) fn run_plain(&self, args: &[&str]) -> super::Output {
        self.gpuflow()
            .args(["run", "--plain", "w.yml"])
            .args(args)
            .output()
    }

    /// `gpuflow run --plain w.yml` on a machine without Docker (a server on the host).
    pub(crate) fn run_plain_without_docker(&self) -> super::Output {
        self.gpuflow()
            .without_docker()
            .args(["run", "--plain", "w.yml"])
            .output()
    }
}
