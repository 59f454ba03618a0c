//! Executing `assert-file`: a file's existence, kind, size, hash, content and mode, checked on
//! the host or inside a container, with every failing check said at once.
//!
//! The checks are written once over a [`Place`] (the host's filesystem, or a container reached
//! by `docker exec` with the POSIX tools every image has: `test`, `stat`, `sha256sum`,
//! `grep -E`, `ls`). When the path is missing, the message says what is there instead: the
//! nearest names in its folder, or which folder up the path is the first that exists.

use std::io::BufRead;
use std::path::PathBuf;

use indexmap::IndexMap;
use regex::Regex;

use crate::backend::{DockerBackend, ExecSpec, LogLine, OutputStream};
use crate::expr::Value;
use crate::steps::{Outputs, StepCall, StepError};

/// What a path must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Any,
}

/// The step's inputs, checked.
#[derive(Clone, Debug)]
pub struct FileSpec {
    pub path: String,
    pub container: Option<String>,
    pub kind: Kind,
    pub min_size: Option<(u64, String)>,
    pub sha256: Option<String>,
    pub contains: Option<Regex>,
    pub executable: Option<bool>,
}

impl FileSpec {
    pub fn from_inputs(inputs: &IndexMap<String, Value>) -> Result<Self, String> {
        let text = |k: &str| {
            inputs
                .get(k)
                .map(Value::to_expr_string)
                .filter(|s| !s.is_empty())
        };
        let path = text("path").ok_or("the input `path` is required")?;
        let kind = match text("kind").as_deref() {
            None | Some("file") => Kind::File,
            Some("dir") => Kind::Dir,
            Some("any") => Kind::Any,
            Some(other) => {
                return Err(format!(
                    "`kind` is `{other}`; it is one of `file`, `dir` or `any`"
                ));
            }
        };
        let min_size = text("min-size")
            .map(|s| {
                crate::engine::container_inputs::byte_size(&s)
                    .map(|n| (n, s.clone()))
                    .ok_or_else(|| format!("`min-size` is `{s}`, not a size such as `1k` or `2g`"))
            })
            .transpose()?;
        let sha256 = text("sha256")
            .map(|s| {
                let s = s.trim().to_ascii_lowercase();
                if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                    Ok(s)
                } else {
                    Err(format!(
                        "`sha256` is `{s}`, not 64 hex digits (help: `sha256sum FILE` prints it)"
                    ))
                }
            })
            .transpose()?;
        let contains = text("contains")
            .map(|p| {
                Regex::new(&p)
                    .map_err(|_| format!("`contains` is `{p}`, not a valid regular expression"))
            })
            .transpose()?;
        let executable = match text("executable").as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                return Err(format!(
                    "`executable` is `{other}`; write `true` or `false`"
                ));
            }
        };
        if kind == Kind::Dir && (sha256.is_some() || contains.is_some()) {
            return Err(
                "`sha256` and `contains` check a file's content, and `kind` is `dir` (help: drop them, or use `kind: file`)"
                    .into(),
            );
        }
        Ok(Self {
            path,
            container: text("container"),
            kind,
            min_size,
            sha256,
            contains,
            executable,
        })
    }
}

/// What is at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub kind: FoundKind,
    pub size: u64,
    pub executable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundKind {
    File,
    Dir,
    /// A device, socket or pipe.
    Other,
}

impl FoundKind {
    fn noun(self) -> &'static str {
        match self {
            Self::File => "a file",
            Self::Dir => "a folder",
            Self::Other => "neither a file nor a folder",
        }
    }
}

/// Where the path is looked at.
pub trait Place {
    /// "on the host", "in container `server`".
    fn describe(&self) -> String;
    /// What is at `path`; `None` when nothing is.
    fn facts(&self, path: &str) -> impl Future<Output = Result<Option<Facts>, String>> + Send;
    fn sha256(&self, path: &str) -> impl Future<Output = Result<String, String>> + Send;
    /// Whether a line of the file matches.
    fn contains(
        &self,
        path: &str,
        pattern: &Regex,
    ) -> impl Future<Output = Result<bool, String>> + Send;
    /// The names in folder `dir`; `None` when there is no such folder.
    fn list(&self, dir: &str) -> impl Future<Output = Result<Option<Vec<String>>, String>> + Send;
}

/// The host's filesystem; relative paths start at the workspace.
pub struct Host {
    pub workspace: PathBuf,
}

impl Host {
    fn resolve(&self, path: &str) -> PathBuf {
        self.workspace.join(path)
    }
}

impl Place for Host {
    fn describe(&self) -> String {
        "on the host".into()
    }

    async fn facts(&self, path: &str) -> Result<Option<Facts>, String> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(self.resolve(path)) {
            Ok(m) => Ok(Some(Facts {
                kind: if m.is_file() {
                    FoundKind::File
                } else if m.is_dir() {
                    FoundKind::Dir
                } else {
                    FoundKind::Other
                },
                size: m.len(),
                executable: m.permissions().mode() & 0o111 != 0,
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read `{path}`: {e}")),
        }
    }

    async fn sha256(&self, path: &str) -> Result<String, String> {
        use sha2::Digest;
        let path_buf = self.resolve(path);
        let shown = path.to_string();
        tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::open(&path_buf)
                .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
            let mut hasher = sha2::Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = std::io::Read::read(&mut file, &mut buf)
                    .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            Ok(hex(&hasher.finalize()))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn contains(&self, path: &str, pattern: &Regex) -> Result<bool, String> {
        let path_buf = self.resolve(path);
        let (shown, pattern) = (path.to_string(), pattern.clone());
        tokio::task::spawn_blocking(move || {
            let file = std::fs::File::open(&path_buf)
                .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
            // Line by line, so memory stays bounded whatever the file's size.
            for line in std::io::BufReader::new(file).split(b'\n') {
                let line = line.map_err(|e| format!("cannot read `{shown}`: {e}"))?;
                if pattern.is_match(&String::from_utf8_lossy(&line)) {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    async fn list(&self, dir: &str) -> Result<Option<Vec<String>>, String> {
        match std::fs::read_dir(self.resolve(dir)) {
            Ok(entries) => Ok(Some(
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(None),
            Err(e) => Err(format!("cannot list `{dir}`: {e}")),
        }
    }
}

/// A running container, reached through `docker exec` of its own `sh`.
pub struct InContainer {
    pub docker: DockerBackend,
    pub id: String,
    pub name: String,
}

impl InContainer {
    /// Runs `script` with `args` as `$1`, `$2` (never spliced into the script); returns the
    /// exit code and the stdout and stderr lines.
    async fn sh(
        &self,
        script: &str,
        args: &[&str],
    ) -> Result<(i64, Vec<String>, Vec<String>), String> {
        let mut command = vec!["sh", "-c", script, "sh"];
        command.extend_from_slice(args);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = self
            .docker
            .exec(
                &self.id,
                &ExecSpec::new(command),
                |line: LogLine| match line.stream {
                    OutputStream::Stdout => out.push(line.text),
                    OutputStream::Stderr => err.push(line.text),
                },
            )
            .await
            .map_err(|e| match e.hint() {
                Some(h) => format!("{e} (help: {h})"),
                None => e.to_string(),
            })?;
        if code == 126 || code == 127 {
            return Err(format!(
                "container `{}` has no `sh` to check files with (exit code {code}): {}",
                self.name,
                err.join(" ")
            ));
        }
        Ok((code, out, err))
    }
}

impl InContainer {
    /// The text of the file at `path` (`None` when there is no such file), refused above
    /// `limit` bytes: a model's `config.json`, read for the memory estimate.
    pub async fn read_text(&self, path: &str, limit: u64) -> Result<Option<String>, String> {
        match self.facts(path).await? {
            Some(f) if f.kind == FoundKind::File && f.size <= limit => {}
            Some(f) if f.kind == FoundKind::File => {
                return Err(format!(
                    "`{path}` {} has {} bytes, more than the {limit} expected",
                    self.describe(),
                    f.size
                ));
            }
            _ => return Ok(None),
        }
        let (code, out, err) = self.sh(r#"cat "$1""#, &[path]).await?;
        if code != 0 {
            return Err(format!(
                "could not read `{path}` {} (`cat` exit code {code}): {}",
                self.describe(),
                err.join(" ")
            ));
        }
        Ok(Some(out.join("\n")))
    }
}

impl Place for InContainer {
    fn describe(&self) -> String {
        format!("in container `{}`", self.name)
    }

    async fn facts(&self, path: &str) -> Result<Option<Facts>, String> {
        const SCRIPT: &str = r#"if [ -d "$1" ]; then k=dir; elif [ -f "$1" ]; then k=file; elif [ -e "$1" ]; then k=other; else echo missing; exit 0; fi
s=$(stat -L -c %s "$1" 2>/dev/null || echo 0)
if [ -x "$1" ]; then x=1; else x=0; fi
echo "$k $s $x""#;
        let (_, out, err) = self.sh(SCRIPT, &[path]).await?;
        let line = out.last().map(String::as_str).unwrap_or_default();
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = match words.first() {
            Some(&"missing") => return Ok(None),
            Some(&"file") => FoundKind::File,
            Some(&"dir") => FoundKind::Dir,
            Some(&"other") => FoundKind::Other,
            _ => {
                return Err(format!(
                    "could not look at `{path}` {}: {}",
                    self.describe(),
                    err.join(" ")
                ));
            }
        };
        Ok(Some(Facts {
            kind,
            size: words.get(1).and_then(|s| s.parse().ok()).unwrap_or(0),
            executable: words.get(2) == Some(&"1"),
        }))
    }

    async fn sha256(&self, path: &str) -> Result<String, String> {
        let (code, out, err) = self.sh(r#"sha256sum "$1""#, &[path]).await?;
        let digest = out
            .first()
            .and_then(|l| l.split_whitespace().next())
            .filter(|d| d.len() == 64);
        match (code, digest) {
            (0, Some(d)) => Ok(d.to_ascii_lowercase()),
            _ => Err(format!(
                "could not hash `{path}` {} (`sha256sum` exit code {code}): {}",
                self.describe(),
                err.join(" ")
            )),
        }
    }

    async fn contains(&self, path: &str, pattern: &Regex) -> Result<bool, String> {
        let (code, _, err) = self
            .sh(r#"grep -E -q -e "$2" "$1""#, &[path, pattern.as_str()])
            .await?;
        match code {
            0 => Ok(true),
            1 => Ok(false),
            _ => Err(format!(
                "could not search `{path}` {} (`grep -E` exit code {code}): {}",
                self.describe(),
                err.join(" ")
            )),
        }
    }

    async fn list(&self, dir: &str) -> Result<Option<Vec<String>>, String> {
        let (code, out, err) = self
            .sh(
                r#"[ -d "$1" ] || { echo '//missing'; exit 0; }; ls -1A "$1""#,
                &[dir],
            )
            .await?;
        if out.first().is_some_and(|l| l == "//missing") {
            return Ok(None);
        }
        if code != 0 {
            return Err(format!(
                "could not list `{dir}` {}: {}",
                self.describe(),
                err.join(" ")
            ));
        }
        Ok(Some(out))
    }
}

/// Runs the step; returns `size` and, when `sha256` was asked, `sha256`.
pub async fn run(call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let (inputs, containers, workspace) = (
        call.inputs,
        call.containers.as_deref(),
        call.host.workspace(),
    );
    let spec = FileSpec::from_inputs(inputs)?;
    match &spec.container {
        None => check(
            &spec,
            &Host {
                workspace: workspace.to_path_buf(),
            },
        )
        .await
        .map_err(StepError::from),
        Some(name) => {
            let Some(containers) = containers else {
                return Err(StepError::input(
                    "container",
                    format!("no container `{name}` was started in this job"),
                    None,
                ));
            };
            let Some(started) = containers.started.get(name) else {
                let names: Vec<&str> = containers.started.keys().map(String::as_str).collect();
                let hint = crate::diag::did_you_mean(name, &names).unwrap_or_else(|| {
                    if names.is_empty() {
                        "start it in an earlier step with `uses: start-container`, or leave out `container` to check the host".into()
                    } else {
                        format!("this job started {}", crate::diag::join_quoted(&names, "and"))
                    }
                });
                return Err(StepError::input(
                    "container",
                    format!("no container `{name}` was started in this job"),
                    Some(hint),
                ));
            };
            let place = InContainer {
                docker: containers.docker.clone(),
                id: started.id.clone(),
                name: name.clone(),
            };
            check(&spec, &place).await.map_err(StepError::from)
        }
    }
}

/// Every check of `spec` at `place`; all failures are reported together.
pub async fn check(
    spec: &FileSpec,
    place: &impl Place,
) -> Result<IndexMap<String, String>, String> {
    let path = spec.path.as_str();
    let Some(facts) = place.facts(path).await? else {
        return Err(missing(path, place).await);
    };
    let mut problems = Vec::new();
    match (spec.kind, facts.kind) {
        (Kind::File, FoundKind::File) | (Kind::Dir, FoundKind::Dir) | (Kind::Any, _) => {}
        (Kind::File, found) => problems.push(format!(
            "`{path}` is {}, not a file (help: `kind: dir` or `kind: any` accepts it)",
            found.noun()
        )),
        (Kind::Dir, found) => problems.push(format!("`{path}` is {}, not a folder", found.noun())),
    }
    if let Some((min, written)) = &spec.min_size
        && facts.kind != FoundKind::Dir
        && facts.size < *min
    {
        problems.push(format!(
            "`{path}` is {} bytes, smaller than `min-size: {written}` ({min} bytes)",
            facts.size
        ));
    }
    if let Some(want) = spec.executable
        && want != facts.executable
    {
        problems.push(if want {
            format!("`{path}` is not executable (help: `chmod +x {path}`)")
        } else {
            format!("`{path}` is executable, and `executable: false` was asked")
        });
    }
    let content = facts.kind == FoundKind::File;
    let mut outputs = IndexMap::new();
    outputs.insert("size".to_string(), facts.size.to_string());
    if let Some(want) = &spec.sha256
        && content
    {
        let got = place.sha256(path).await?;
        if &got != want {
            problems.push(format!("the SHA-256 of `{path}` is `{got}`, not `{want}`"));
        }
        outputs.insert("sha256".to_string(), got);
    }
    if let Some(pattern) = &spec.contains
        && content
        && !place.contains(path, pattern).await?
    {
        problems.push(format!(
            "no line of `{path}` matches `{}`",
            pattern.as_str()
        ));
    }
    if problems.is_empty() {
        Ok(outputs)
    } else {
        Err(format!("{} {}", problems.join("; "), place.describe()))
    }
}

/// "`/tmp/benchmark_eagle3.py` does not exist …" with what is there instead.
async fn missing(path: &str, place: &impl Place) -> String {
    let mut m = format!("`{path}` does not exist {}", place.describe());
    let (parent, name) = split_parent(path);
    let mut folder = parent.clone();
    let mut first = true;
    loop {
        match place.list(&folder).await {
            Ok(Some(names)) => {
                if first {
                    let guess = suggestion(&folder, &name, &names);
                    let sep = if guess.is_empty() { ";" } else { "" };
                    m.push_str(&format!("{guess}{sep} `{folder}` {}", holds(&name, &names)));
                } else {
                    m.push_str(&format!(
                        "; the parent folder `{parent}` does not exist either; the nearest folder that does, `{folder}`, {}",
                        holds("", &names)
                    ));
                }
                return m;
            }
            Ok(None) => {
                let up = split_parent(&folder).0;
                if up == folder {
                    m.push_str(&format!(
                        "; the parent folder `{parent}` does not exist either"
                    ));
                    return m;
                }
                folder = up;
                first = false;
            }
            Err(e) => {
                m.push_str(&format!(" ({e})"));
                return m;
            }
        }
    }
}

/// `/a/b/c` → (`/a/b`, `c`); `c` → (`.`, `c`); `/` → (`/`, ``).
fn split_parent(path: &str) -> (String, String) {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return ("/".into(), String::new());
    }
    match trimmed.rsplit_once('/') {
        Some(("", name)) => ("/".into(), name.into()),
        Some((parent, name)) => (parent.into(), name.into()),
        None => (".".into(), trimmed.into()),
    }
}

/// "; did you mean `x`?" when a name is close to `name`.
fn suggestion(folder: &str, name: &str, names: &[String]) -> String {
    match closest(name, names) {
        Some(best) if !name.is_empty() => format!("; did you mean `{}`?", join(folder, best)),
        _ => String::new(),
    }
}

/// "holds `a`, `b` and 3 more" (the names closest to `name` first), or "is empty".
fn holds(name: &str, names: &[String]) -> String {
    const SHOWN: usize = 8;
    if names.is_empty() {
        return "is empty".into();
    }
    let mut sorted: Vec<&String> = names.iter().collect();
    if name.is_empty() {
        sorted.sort();
    } else {
        sorted.sort_by(|a, b| {
            strsim::jaro_winkler(name, b)
                .total_cmp(&strsim::jaro_winkler(name, a))
                .then_with(|| a.cmp(b))
        });
    }
    let more = names.len().saturating_sub(SHOWN);
    let shown: Vec<&str> = sorted.iter().take(SHOWN).map(|s| s.as_str()).collect();
    let mut m = format!("holds {}", crate::diag::join_quoted(&shown, "and"));
    if more > 0 {
        m.push_str(&format!(" and {more} more"));
    }
    m
}

/// The closest name, when it is close enough to be a likely typo.
fn closest<'a>(name: &str, names: &'a [String]) -> Option<&'a str> {
    names
        .iter()
        .map(|n| (strsim::jaro_winkler(name, n), n.as_str()))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

fn join(folder: &str, name: &str) -> String {
    match folder {
        "/" => format!("/{name}"),
        "." => name.to_string(),
        f => format!("{f}/{name}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    fn inputs(pairs: &[(&str, &str)]) -> IndexMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
            .collect()
    }

    fn spec(pairs: &[(&str, &str)]) -> FileSpec {
        FileSpec::from_inputs(&inputs(pairs)).unwrap()
    }

    #[test_case(&[], "`path` is required"; "no path")]
    #[test_case(&[("path", "x"), ("kind", "link")], "one of `file`, `dir` or `any`"; "bad kind")]
    #[test_case(&[("path", "x"), ("min-size", "big")], "not a size"; "bad size")]
    #[test_case(&[("path", "x"), ("sha256", "abc")], "not 64 hex digits"; "short hash")]
    #[test_case(&[("path", "x"), ("contains", "(")], "not a valid regular expression"; "bad regex")]
    #[test_case(&[("path", "x"), ("kind", "dir"), ("contains", "a")], "check a file's content"; "content of a dir")]
    fn bad_inputs_are_explained(pairs: &[(&str, &str)], says: &str) {
        let e = FileSpec::from_inputs(&inputs(pairs)).unwrap_err();
        assert!(e.contains(says), "{e}");
    }

    #[test_case("/a/b/c", "/a/b", "c")]
    #[test_case("/a", "/", "a")]
    #[test_case("c", ".", "c")]
    #[test_case("/a/b/", "/a", "b")]
    #[test_case("/", "/", "")]
    fn parents(path: &str, parent: &str, name: &str) {
        assert_eq!(split_parent(path), (parent.to_string(), name.to_string()));
    }

    fn host() -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("benchmark_eagle.py"), "import argparse\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        std::fs::create_dir(dir.path().join("models")).unwrap();
        let host = Host {
            workspace: dir.path().to_path_buf(),
        };
        (dir, host)
    }

    #[tokio::test]
    async fn a_present_file_passes_with_its_size_and_hash() {
        let (_dir, host) = host();
        let out = check(
            &spec(&[
                ("path", "benchmark_eagle.py"),
                ("contains", "^import arg"),
                ("min-size", "10"),
                ("executable", "false"),
                (
                    "sha256",
                    "3d3fb7d9b8c0cd6b6d5a1fb2a3ae2c2c9e2d0a7bd6b0b1f0e0d3f6b1a3c4e5f6",
                ),
            ]),
            &host,
        )
        .await
        .unwrap_err();
        // Every failing check at once: here only the hash.
        assert!(
            out.starts_with("the SHA-256 of `benchmark_eagle.py` is `"),
            "{out}"
        );
        assert!(out.ends_with("on the host"), "{out}");
        let out = check(&spec(&[("path", "benchmark_eagle.py")]), &host)
            .await
            .unwrap();
        assert_eq!(out["size"], "16");
    }

    #[tokio::test]
    async fn a_missing_file_names_the_nearest_names() {
        let (_dir, host) = host();
        let e = check(&spec(&[("path", "benchmark_eagle3.py")]), &host)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            "`benchmark_eagle3.py` does not exist on the host; did you mean `benchmark_eagle.py`? `.` holds `benchmark_eagle.py`, `models`, and `notes.txt`"
        );
        let e = check(&spec(&[("path", "models/qwen/config.json")]), &host)
            .await
            .unwrap_err();
        assert!(
            e.contains("the parent folder `models/qwen` does not exist either; the nearest folder that does, `models`, is empty"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn wrong_kind_size_and_content_are_all_said() {
        let (_dir, host) = host();
        let e = check(&spec(&[("path", "models")]), &host)
            .await
            .unwrap_err();
        assert!(e.contains("`models` is a folder, not a file"), "{e}");
        let e = check(
            &spec(&[
                ("path", "notes.txt"),
                ("min-size", "1k"),
                ("contains", "x"),
                ("executable", "true"),
            ]),
            &host,
        )
        .await
        .unwrap_err();
        assert!(
            e.contains("is 0 bytes, smaller than `min-size: 1k` (1024 bytes)"),
            "{e}"
        );
        assert!(e.contains("is not executable"), "{e}");
        assert!(e.contains("no line of `notes.txt` matches `x`"), "{e}");
        check(&spec(&[("path", "models"), ("kind", "dir")]), &host)
            .await
            .unwrap();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Walking up a path always ends, and the listing never panics on odd names.
        #[test]
        fn parents_shrink_and_listings_never_panic(path in "[a-z/.é ]{0,40}", names in proptest::collection::vec("[a-zé._-]{0,12}", 0..20)) {
            let (parent, _) = split_parent(&path);
            proptest::prop_assert!(parent.len() <= path.len().max(1));
            let _ = holds(&path, &names);
            let _ = suggestion(&parent, &path, &names);
        }
    }

    #[test]
    fn hashes_are_lower_case_hex() {
        use sha2::Digest;
        assert_eq!(
            hex(&sha2::Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
