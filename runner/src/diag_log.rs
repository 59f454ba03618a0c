//! gpuflow's own diagnostics, through `tracing`: for whoever is finding out what gpuflow did —
//! which Docker API calls it made and on which engine, what it retried and why, which host it
//! connected to — with spans for a run, a job and a step around them.
//!
//! They are separate from what a user reads: the run's events (`engine::events`, shown by
//! `ui/`), `diag/`'s rendered problems and every command's own output never go through here,
//! so turning diagnostics on or off changes none of those lines.
//!
//! - Off by default: only warnings of gpuflow's own targets, and there are none today, so the
//!   default output is what it was before `tracing`. `-v` is info (run, job and step spans
//!   opening and closing, with their times), `-vv` debug (Docker API calls, retries, host
//!   connections), `-vvv` trace — for gpuflow's targets only, since a dependency's debug lines
//!   (hyper's, bollard's) would drown gpuflow's.
//! - `GPUFLOW_LOG`, in `tracing`'s env-filter syntax (`gpuflow::backend=debug`,
//!   `gpuflow=trace,bollard=debug`), replaces what the flags chose; a filter that does not
//!   parse is an error naming the variable (exit 2), never a silently empty log.
//! - Written to stderr as text, or as JSON lines appended to the file `GPUFLOW_LOG_JSON` names.
//!   `gpuflow worker`, a long-running service whose stdout is its operator's log
//!   (`worker.log`), writes its diagnostics as JSON lines to `worker.diag.jsonl` beside it, at
//!   info unless told otherwise, and has the runs it starts append theirs to the same file
//!   ([`child_env`]): a run's own output (`gpuflow logs`) stays the user's.
//!
//! What may be logged: names, ids, operations, counts, durations — never values. A step's
//! inputs, env, `run:` text and command lines may hold `${{ secrets.* }}` values, and these
//! lines do not go through the run's masker, so they are never fields here. Names can still
//! hold one (`start-container` named `srv-${{ secrets.K }}` is the Docker container
//! `gpuflow-…-srv-<k, lower-cased>`), so every line is also masked on its way out against the
//! secrets `gpuflow run` was given ([`hide`]): as written, lower- or upper-cased, in the form
//! Docker names take, and escaped as the text and JSON formats escape strings.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use regex::Regex;

use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The variable whose env-filter replaces `-v`'s level.
pub const FILTER_VAR: &str = "GPUFLOW_LOG";
/// The variable naming a file the diagnostics are appended to as JSON lines, instead of stderr.
pub const JSON_FILE_VAR: &str = "GPUFLOW_LOG_JSON";

/// Where a command's diagnostics go.
#[derive(Clone, Debug)]
pub enum Destination {
    /// Text on stderr, or JSON lines to `GPUFLOW_LOG_JSON` when it is set.
    Stderr { ansi: bool },
    /// `gpuflow worker`: JSON lines to this file (or `GPUFLOW_LOG_JSON`), at least info; text
    /// on stderr too when `-v` asks, for an operator watching it in a terminal.
    Worker { json_file: PathBuf, ansi: bool },
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(
        "{FILTER_VAR}=`{value}` is not a valid filter: {reason}\n  help: write comma-separated \
         directives such as `gpuflow=debug` or `gpuflow::backend=trace,gpuflow=info` (levels: \
         off, error, warn, info, debug, trace), or unset {FILTER_VAR} and use -v/-vv/-vvv"
    )]
    BadFilter { value: String, reason: String },
    #[error("{FILTER_VAR} is not valid UTF-8")]
    NotUnicode,
    #[error("the diagnostic log `{path}` cannot be opened for appending: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl SetupError {
    /// A bad variable is the command line's fault (2); a file that cannot be written, the
    /// machine's (4).
    pub fn exit_code(&self) -> crate::diag::ExitCode {
        match self {
            Self::BadFilter { .. } | Self::NotUnicode => crate::diag::ExitCode::Usage,
            Self::File { .. } => crate::diag::ExitCode::Infrastructure,
        }
    }
}

/// What the JSON file layer was set up with, for the worker's children ([`child_env`]).
static JSON_SINK: OnceLock<(PathBuf, String)> = OnceLock::new();

/// The directives `-v` given `verbosity` times stands for.
pub fn verbosity_directives(verbosity: u8) -> &'static str {
    match verbosity {
        0 => "gpuflow=warn",
        1 => "gpuflow=info",
        2 => "gpuflow=debug",
        _ => "gpuflow=trace",
    }
}

/// Parses a filter, saying which variable held it when it does not parse.
pub fn parse_filter(value: &str) -> Result<EnvFilter, SetupError> {
    EnvFilter::builder()
        .parse(value)
        .map_err(|e| SetupError::BadFilter {
            value: value.to_string(),
            reason: e.to_string(),
        })
}

/// `GPUFLOW_LOG` when set and not empty.
fn filter_from_env() -> Result<Option<String>, SetupError> {
    match std::env::var(FILTER_VAR) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(SetupError::NotUnicode),
    }
}

fn open_append(path: &Path) -> Result<File, SetupError> {
    let err = |source| SetupError::File {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)
}

/// The secrets' forms to mask, as one case-insensitive search (`None`: none).
static HIDDEN: RwLock<Option<Regex>> = RwLock::new(None);
static HIDDEN_FORMS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// From now on, masks `values` (secrets) in every diagnostic line. Blank values are ignored.
pub fn hide<'a>(values: impl IntoIterator<Item = &'a str>) {
    let Ok(mut forms) = HIDDEN_FORMS.write() else {
        return;
    };
    let known = forms.len();
    for value in values.into_iter().filter(|v| !v.trim().is_empty()) {
        for form in secret_forms(value) {
            if !form.is_empty() && !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    // Every run's masker tells its secrets again (`Masker::add`): nothing new, nothing to build.
    if forms.len() == known {
        return;
    }
    // Longest first: a secret holding another is masked whole.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let alternatives: Vec<String> = forms.iter().map(|f| regex::escape(f)).collect();
    let pattern = Regex::new(&format!("(?i){}", alternatives.join("|"))).ok();
    if let Ok(mut hidden) = HIDDEN.write() {
        *hidden = pattern.filter(|_| !forms.is_empty());
    }
}

/// What a secret can look like in a diagnostic line: itself; escaped as `{:?}` (the text
/// format's strings) and as JSON strings; and as a Docker name holds it (characters other
/// than `[A-Za-z0-9_.-]` turned to `-`, runs of `-` made one, lower-cased — the search
/// ignores case).
fn secret_forms(value: &str) -> Vec<String> {
    let debug = format!("{value:?}");
    let json = serde_json::to_string(value).unwrap_or_default();
    let mut docker = String::new();
    for c in value.chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            c
        } else {
            '-'
        };
        if !(c == '-' && docker.ends_with('-')) {
            docker.push(c);
        }
    }
    let docker = docker.trim_matches('-').to_string();
    let mut forms = vec![
        value.to_string(),
        debug[1..debug.len() - 1].to_string(),
        json.get(1..json.len().saturating_sub(1))
            .unwrap_or_default()
            .to_string(),
    ];
    // A one-character slug would mask every `-`.
    if docker.len() >= 4 {
        // gpuflow cuts a name's part of a Docker name at 60 characters, so a long secret may
        // be there only in part: its beginnings are masked too, down to 8 characters (fewer
        // would mask unrelated text).
        let chars: Vec<char> = docker.chars().collect();
        for end in (8..chars.len()).rev() {
            forms.push(chars[..end].iter().collect());
        }
        forms.push(docker);
    }
    forms
}

/// `text` with every hidden form replaced by `***`.
pub fn mask(text: &str) -> std::borrow::Cow<'_, str> {
    match HIDDEN.read().ok().as_deref().and_then(Option::as_ref) {
        Some(pattern) => std::borrow::Cow::Owned(pattern.replace_all(text, "***").into_owned()),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Where formatted lines go, each masked first. The formatter writes a whole line (or JSON
/// document) in one `write_all`, so a secret is never split between two calls.
#[derive(Clone)]
enum Sink {
    Stderr,
    File(Arc<File>),
}

struct Masked(Sink);

impl Write for Masked {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let masked = mask(&text);
        match &self.0 {
            Sink::Stderr => std::io::stderr().write_all(masked.as_bytes())?,
            Sink::File(file) => (&**file).write_all(masked.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &self.0 {
            Sink::Stderr => std::io::stderr().flush(),
            Sink::File(file) => (&**file).flush(),
        }
    }
}

type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

/// Text lines on stderr. Spans print when they open and close (with their busy and idle
/// times), so `-v` alone shows a run's shape.
fn stderr_layer(filter: EnvFilter, ansi: bool) -> Boxed {
    tracing_subscriber::fmt::layer()
        .with_writer(|| Masked(Sink::Stderr))
        .with_ansi(ansi)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_filter(filter)
        .boxed()
}

/// One JSON document a line, appended. Each event is formatted whole and written with one
/// `write` on an `O_APPEND` file, so the worker's lines and its runs' never interleave.
fn json_layer(filter: EnvFilter, file: File) -> Boxed {
    let file = Arc::new(file);
    tracing_subscriber::fmt::layer()
        .json()
        .with_writer(move || Masked(Sink::File(file.clone())))
        .with_current_span(true)
        .with_span_list(true)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_filter(filter)
        .boxed()
}

/// Installs the diagnostics for this process. Called once, before the command runs; a second
/// call (a test calling `cli::run` twice) leaves the first one in place.
pub fn init(verbosity: u8, destination: Destination) -> Result<(), SetupError> {
    let from_env = filter_from_env()?;
    let json_var = std::env::var_os(JSON_FILE_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let mut layers: Vec<Boxed> = Vec::new();
    match destination {
        Destination::Stderr { ansi } => {
            let directives =
                from_env.unwrap_or_else(|| verbosity_directives(verbosity).to_string());
            let filter = parse_filter(&directives)?;
            match json_var {
                Some(path) => {
                    layers.push(json_layer(filter, open_append(&path)?));
                    let _ = JSON_SINK.set((path, directives));
                }
                None => layers.push(stderr_layer(filter, ansi)),
            }
        }
        Destination::Worker { json_file, ansi } => {
            // A service's log is read after the fact: at least info (runs, jobs, steps and
            // the worker's own decisions), whatever `-v` said.
            let directives = from_env
                .clone()
                .unwrap_or_else(|| verbosity_directives(verbosity.max(1)).to_string());
            let path = json_var.unwrap_or(json_file);
            layers.push(json_layer(parse_filter(&directives)?, open_append(&path)?));
            let _ = JSON_SINK.set((path, directives));
            if verbosity > 0 {
                let directives =
                    from_env.unwrap_or_else(|| verbosity_directives(verbosity).to_string());
                layers.push(stderr_layer(parse_filter(&directives)?, ansi));
            }
        }
    }
    // `try_init` also routes the `log` records of dependencies (bollard's) into `tracing`,
    // where `GPUFLOW_LOG=bollard=debug` can select them; the default filters drop them.
    let _ = tracing_subscriber::registry().with(layers).try_init();
    Ok(())
}

/// The environment a child `gpuflow` process is given so that its diagnostics go where this
/// process's JSON lines go, with the same filter; empty when this process writes none.
pub fn child_env() -> Vec<(&'static str, std::ffi::OsString)> {
    match JSON_SINK.get() {
        Some((path, directives)) => vec![
            (JSON_FILE_VAR, path.clone().into_os_string()),
            (FILTER_VAR, directives.into()),
        ],
        None => Vec::new(),
    }
}

/// A URL without the user and password it may carry (`https://user:token@host/x` →
/// `https://host/x`), for diagnostics that name a remote.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_v_raises_gpuflows_level_only() {
        assert_eq!(verbosity_directives(0), "gpuflow=warn");
        assert_eq!(verbosity_directives(2), "gpuflow=debug");
        assert_eq!(verbosity_directives(9), "gpuflow=trace");
        for v in 0..4 {
            parse_filter(verbosity_directives(v)).unwrap();
        }
    }

    #[test]
    fn a_bad_filter_names_the_variable_and_the_syntax() {
        let e = parse_filter("gpuflow=loud").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("GPUFLOW_LOG=`gpuflow=loud` is not a valid filter: "),
            "{text}"
        );
        assert!(text.contains("help: "), "{text}");
        assert_eq!(e.exit_code(), crate::diag::ExitCode::Usage);
    }

    #[test]
    fn secrets_are_masked_as_written_escaped_and_in_docker_names() {
        hide(["S3cr/et\"Zq9", " "]);
        let line = r#"object="gpuflow-01-job-1-srv-s3cr-et-zq9 (img)" raw=S3cr/et"Zq9 debug="S3cr/et\"Zq9""#;
        assert_eq!(
            mask(line),
            r#"object="gpuflow-01-job-1-srv-*** (img)" raw=*** debug="***""#
        );
        // A blank secret masks nothing.
        assert_eq!(mask("a b"), "a b");
        // The part of a long secret a Docker name cut at 60 characters keeps.
        hide(["0123456789abcdefghij"]);
        assert_eq!(
            mask("gpuflow-01-job-1-srv-0123456789a"),
            "gpuflow-01-job-1-srv-***"
        );
    }

    #[test]
    fn credentials_are_taken_out_of_urls() {
        assert_eq!(
            without_credentials("https://me:tok3n@example.com/o/r.git"),
            "https://example.com/o/r.git"
        );
        assert_eq!(
            without_credentials("ssh://git@example.com/o/r"),
            "ssh://example.com/o/r"
        );
        assert_eq!(without_credentials("/srv/a@b/repo"), "/srv/a@b/repo");
        assert_eq!(
            without_credentials("file:///srv/x@y/repo"),
            "file:///srv/x@y/repo"
        );
    }
}
