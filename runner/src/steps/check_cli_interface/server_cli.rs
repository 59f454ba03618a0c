//! The server's own command line, checked before the load (issue 27): a `start-container`
//! whose command is an SGLang or vLLM server has its arguments judged against the help of that
//! very program in that very image, by argparse's rules ([`super::flag_check`]), before any
//! server starts. Preflight prepares the check and gives it a throw-away container of the
//! image ([`crate::engine`]'s preflight); this file recognises the program, reads its help (once
//! per image id and program, [`HelpCache`]) and says what the server's parser would say.
//!
//! Only programs known to print their help for `--help` and exit are run that way: a wrapper
//! script may ignore `--help` and start a server. A help that cannot be read with confidence
//! (not argparse's, no option lines, the command failed) is a warning, never a refusal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};

use super::cli_usage::{Style, Usage, full_listing_flag};
use super::flag_check::{Problem, check_args};
use super::run::{Place, capture, indent, last_lines};
use crate::backend::DockerBackend;

/// A server program whose `--help` prints its help and exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// `vllm serve`
    VllmServe,
    /// `python3 -m vllm.entrypoints.openai.api_server`
    VllmApiServer,
    /// `sglang serve`
    SglangServe,
    /// `python3 -m sglang.launch_server`
    SglangLaunchServer,
}

impl Program {
    fn is_vllm(self) -> bool {
        matches!(self, Self::VllmServe | Self::VllmApiServer)
    }
}

/// A server's command line, split into the program and what its parser reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerCommand {
    pub program: Program,
    /// The words that start it (`python3 -m sglang.launch_server`).
    pub prefix: Vec<String>,
    /// Its arguments, as its parser will read them ([`ServerCommand::parsed_args`]).
    pub args: Vec<String>,
}

/// The programs gpuflow runs `--help` of, for messages.
pub const KNOWN: &str = "`vllm serve`, `python3 -m vllm.entrypoints.openai.api_server`, `sglang serve`, `python3 -m sglang.launch_server`";

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `python`, `python3`, `python3.12`.
fn is_python(word: &str) -> bool {
    let Some(version) = base_name(word).strip_prefix("python") else {
        return false;
    };
    version.is_empty()
        || version
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            && version.split('.').count() <= 2
}

/// The server program `argv` (the container's whole command line: entrypoint, then command)
/// starts, or why it is not one whose help gpuflow runs.
pub fn recognise(argv: &[String]) -> Result<ServerCommand, String> {
    let first = argv.first().map(String::as_str).unwrap_or("");
    let (program, len) = match base_name(first) {
        "vllm" if argv.get(1).is_some_and(|w| w == "serve") => (Program::VllmServe, 2),
        "sglang" if argv.get(1).is_some_and(|w| w == "serve") => (Program::SglangServe, 2),
        _ if is_python(first) => python_module(argv)
            .ok_or_else(|| format!("`{}` runs no server module gpuflow knows", argv.join(" ")))?,
        _ => {
            return Err(format!(
                "`{}` is not a server program gpuflow knows",
                first_words(argv)
            ));
        }
    };
    Ok(ServerCommand {
        program,
        prefix: argv[..len].to_vec(),
        args: argv[len..].to_vec(),
    })
}

fn first_words(argv: &[String]) -> String {
    argv.iter().take(3).cloned().collect::<Vec<_>>().join(" ")
}

/// `python3 [-u …] -m MODULE`: the program and how many words start it.
fn python_module(argv: &[String]) -> Option<(Program, usize)> {
    let mut i = 1;
    // The interpreter's own switches (`-u`, `-B`, `-X opt`, `-W arg`) before `-m`.
    while let Some(w) = argv.get(i) {
        match w.as_str() {
            "-m" => break,
            "-X" | "-W" => i += 2,
            _ if w.len() > 1
                && w.starts_with('-')
                && w[1..].chars().all(|c| "bBdEiIOqsSuv".contains(c)) =>
            {
                i += 1;
            }
            _ => return None,
        }
    }
    let program = match argv.get(i + 1)?.as_str() {
        "vllm.entrypoints.openai.api_server" => Program::VllmApiServer,
        "sglang.launch_server" => Program::SglangLaunchServer,
        _ => return None,
    };
    Some((program, i + 2))
}

impl ServerCommand {
    /// The help's command line: the program with `flag`.
    fn help_argv(&self, flag: &str) -> Vec<String> {
        let mut argv = self.prefix.clone();
        argv.push(flag.to_string());
        argv
    }

    pub fn shown(&self) -> String {
        self.prefix.join(" ")
    }

    /// The arguments as the program's parser receives them:
    /// - `sglang serve MODEL …` takes the model as its first word before argparse reads the
    ///   rest (SGLang's `cli/serve.py`);
    /// - vLLM's `FlexibleArgumentParser` reads `_` as `-` in a long option's name before its
    ///   first `.`, and `--name.key value` (a key of the JSON option `--name`) as `--name`.
    fn parsed_args(&self) -> Vec<String> {
        let mut args = self.args.clone();
        if self.program == Program::SglangServe && args.first().is_some_and(|w| !w.starts_with('-'))
        {
            args.remove(0);
        }
        if self.program.is_vllm() {
            for a in &mut args {
                if let Some(rest) = a.strip_prefix("--") {
                    let (name, value) = match rest.split_once('=') {
                        Some((n, v)) => (n, Some(v)),
                        None => (rest, None),
                    };
                    let base = name.split('.').next().unwrap_or(name).replace('_', "-");
                    *a = match value {
                        Some(v) => format!("--{base}={v}"),
                        None => format!("--{base}"),
                    };
                }
            }
        }
        args
    }
}

/// What the check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The server's parser accepts the arguments; each warning is an abbreviation it accepts.
    Accepted { warnings: Vec<String> },
    /// The help could not be read with confidence: not checked, and why.
    Unchecked(String),
    /// The server's parser would refuse them: what, with the real usage and the fix.
    Refused(String),
}

/// The help a program printed: its text and the command that printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Help {
    pub text: String,
    pub shown: String,
}

/// Reads `help` (the program's full listing) and judges `cmd`'s arguments by it.
pub fn judge(cmd: &ServerCommand, help: &Help) -> Verdict {
    let usage = Usage::parse(&help.text);
    if usage.style != Style::Argparse || usage.flags.is_empty() {
        return Verdict::Unchecked(format!(
            "`{}` printed no argparse help gpuflow can read:\n{}",
            help.shown,
            indent(&last_lines(&help.text, 8))
        ));
    }
    let checked = check_args(&usage, &cmd.parsed_args());
    let warnings = checked
        .abbreviations
        .iter()
        .map(|(given, full)| {
            format!(
                "`{given}` is not a flag of `{}`: it works only as argparse's abbreviation of `{full}`; write `{full}`, or it breaks when the server gains another flag starting with `{given}`",
                cmd.shown()
            )
        })
        .collect();
    if checked.problems.is_empty() {
        return Verdict::Accepted { warnings };
    }
    let mut out = format!(
        "`{}` would refuse its command line before loading anything:\n",
        cmd.shown()
    );
    let mut named = Vec::new();
    for p in &checked.problems {
        out.push_str(&format!("  - {}\n", p.message()));
        if let Some(said) = argparse_says(p) {
            out.push_str(&format!("    (the server would say: `{said}`)\n"));
        }
        named.extend(names_in(p));
    }
    out.push_str(&format!(
        "its usage (from `{}` in the image):\n",
        help.shown
    ));
    out.push_str(&indent(&usage_excerpt(&usage.synopsis, &named)));
    Verdict::Refused(out)
}

/// argparse's own error for a problem, as the server's log would show it.
fn argparse_says(p: &Problem) -> Option<String> {
    match p {
        Problem::Ambiguous { flag, candidates } => Some(format!(
            "error: ambiguous option: {flag} could match {}",
            candidates.join(", ")
        )),
        Problem::Unknown { flag, .. } => Some(format!("error: unrecognized arguments: {flag}")),
        Problem::MissingValue { given, .. } => {
            Some(format!("error: argument {given}: expected one argument"))
        }
        _ => None,
    }
}

/// The real flags a problem points to.
fn names_in(p: &Problem) -> Vec<String> {
    match p {
        Problem::Ambiguous { candidates, .. } => candidates.clone(),
        Problem::Unknown {
            closest: Some(c), ..
        } => vec![c.main_name().to_string()],
        Problem::MissingValue { flag, .. } | Problem::UnexpectedValue { flag, .. } => {
            vec![flag.main_name().to_string()]
        }
        _ => Vec::new(),
    }
}

/// The usage as argparse writes it, shortened when long (SGLang's is ~470 lines): its first
/// line, then the lines naming the flags the problems point to.
fn usage_excerpt(synopsis: &str, names: &[String]) -> String {
    let lines: Vec<&str> = synopsis.lines().collect();
    if lines.len() <= 12 {
        return synopsis.to_string();
    }
    let mentions = |l: &str| {
        names.iter().any(|n| {
            l.split(|c: char| c == '[' || c == ']' || c == '|' || c.is_whitespace())
                .any(|w| w == n)
        })
    };
    let mut out = vec![lines[0]];
    let mut gap = false;
    for l in &lines[1..] {
        if mentions(l) {
            if gap || out.len() == 1 {
                out.push("                    …");
            }
            out.push(l);
            gap = false;
        } else {
            gap = true;
        }
    }
    out.push("                    …");
    out.join("\n")
}

/// Helps already read, by image id and program: one `--help` per image and program for the
/// process (a run), and on disk in the user's state folder for later runs. An image id names
/// the image's content, so a rebuilt tag is a new entry.
pub struct HelpCache;

static HELPS: LazyLock<Mutex<HashMap<String, Result<Help, String>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl HelpCache {
    fn key(image_id: &str, cmd: &ServerCommand) -> String {
        format!("{image_id} {}", cmd.shown())
    }

    /// `$GPUFLOW_HOME/cli-help` (else `$XDG_STATE_HOME/gpuflow/cli-help`, else
    /// `~/.local/state/gpuflow/cli-help`): the user's own folder, never a shared `/tmp` path.
    fn dir() -> PathBuf {
        crate::trigger::home::GpuflowHome::from_env()
            .dir
            .join("cli-help")
    }

    fn file(image_id: &str, cmd: &ServerCommand) -> PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(Self::key(image_id, cmd).as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Self::dir().join(format!("{}.txt", &hex[..32]))
    }

    fn get(image_id: &str, cmd: &ServerCommand) -> Option<Result<Help, String>> {
        let key = Self::key(image_id, cmd);
        if let Some(found) = HELPS.lock().ok()?.get(&key) {
            return Some(found.clone());
        }
        let help = Self::load(&Self::file(image_id, cmd))?;
        Self::remember(&key, Ok(help.clone()));
        Some(Ok(help))
    }

    /// A stored help: the command that printed it on the first line, then the help.
    fn load(path: &std::path::Path) -> Option<Help> {
        let stored = std::fs::read_to_string(path).ok()?;
        let (shown, text) = stored.split_once('\n')?;
        Some(Help {
            shown: shown.to_string(),
            text: text.to_string(),
        })
    }

    fn remember(key: &str, help: Result<Help, String>) {
        if let Ok(mut helps) = HELPS.lock() {
            helps.insert(key.to_string(), help);
        }
    }

    fn put(image_id: &str, cmd: &ServerCommand, help: &Result<Help, String>) {
        Self::remember(&Self::key(image_id, cmd), help.clone());
        // Only a help read in full goes to disk: a failure may be the engine's, not the image's.
        if let Ok(h) = help {
            let _ = Self::store(&Self::file(image_id, cmd), h);
        }
    }

    fn store(path: &std::path::Path, help: &Help) -> std::io::Result<()> {
        // Written beside it, then renamed: a reader never sees half a help.
        crate::local_dirs::write_private(path, &format!("{}\n{}", help.shown, help.text))
    }
}

/// The program's full help, run in the started container `id` (`name`) of the image whose id
/// is `image_id`, or read from the cache: `Err` says why there is none.
pub async fn help(
    docker: &DockerBackend,
    (id, name): (&str, &str),
    image_id: &str,
    cmd: &ServerCommand,
) -> Result<Help, String> {
    if let Some(found) = HelpCache::get(image_id, cmd) {
        return found;
    }
    let place = Place::Container { docker, id, name };
    // What the image answered is kept; a command that could not run (the engine, a timeout)
    // is not, so the next check tries again.
    let help = read_help(&place, cmd).await?;
    HelpCache::put(image_id, cmd, &help);
    help
}

/// `PROGRAM --help`, followed to its full listing when it is a summary: the outer `Err` when
/// it could not run, the inner one when the image's program failed.
async fn read_help(place: &Place<'_>, cmd: &ServerCommand) -> Result<Result<Help, String>, String> {
    let mut argv = cmd.help_argv("--help");
    let mut captured = capture(place, &argv).await?;
    if captured.code == 0
        && let Some(full) = full_listing_flag(&captured.text)
    {
        argv = cmd.help_argv(full);
        captured = capture(place, &argv).await?;
    }
    let shown = argv.join(" ");
    if captured.code != 0 {
        return Ok(Err(format!(
            "`{shown}` failed in the image (exit code {}):\n{}",
            captured.code,
            indent(&last_lines(&captured.text, 8))
        )));
    }
    Ok(Ok(Help {
        text: captured.text,
        shown,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const SGLANG: &str = include_str!("help_texts/sglang_0.5.23_serve.txt");
    const VLLM: &str = include_str!("help_texts/vllm_0.32.0_serve_help_all.txt");
    const VLLM_SUMMARY: &str = include_str!("help_texts/vllm_0.32.0_serve_help.txt");

    fn argv(text: &str) -> Vec<String> {
        crate::engine::container_inputs::split_words(text).unwrap()
    }

    #[test_case("vllm serve /m --port 8000", Program::VllmServe, 2 ; "vllm serve")]
    #[test_case("/opt/venv/bin/vllm serve /m", Program::VllmServe, 2 ; "vllm by path")]
    #[test_case("python3 -m vllm.entrypoints.openai.api_server --model /m", Program::VllmApiServer, 3 ; "vllm module")]
    #[test_case("sglang serve --model-path /m", Program::SglangServe, 2 ; "sglang serve")]
    #[test_case("python3 -m sglang.launch_server --model-path /m", Program::SglangLaunchServer, 3 ; "sglang module")]
    #[test_case("python3.12 -u -m sglang.launch_server --model-path /m", Program::SglangLaunchServer, 4 ; "versioned python with a switch")]
    #[test_case("/usr/bin/python -m sglang.launch_server", Program::SglangLaunchServer, 3 ; "python by path")]
    fn server_programs_are_recognised(text: &str, program: Program, len: usize) {
        let words = argv(text);
        let cmd = recognise(&words).unwrap();
        assert_eq!(cmd.program, program);
        assert_eq!(cmd.prefix, words[..len]);
    }

    #[test_case("gpuflow-sim --host 0.0.0.0 --port 30000" ; "a stand-in")]
    #[test_case("bash /start.sh --model /m" ; "a wrapper script")]
    #[test_case("python3 /serve.py --model /m" ; "a python script")]
    #[test_case("python3 -m vllm.entrypoints.cli.main serve" ; "another module")]
    #[test_case("vllm bench serve" ; "another vllm command")]
    #[test_case("pythonista -m sglang.launch_server" ; "not python")]
    fn other_commands_are_not_run_with_help(text: &str) {
        assert!(recognise(&argv(text)).is_err(), "{text}");
    }

    fn verdict(help: &str, command: &str) -> Verdict {
        let cmd = recognise(&argv(command)).unwrap();
        judge(
            &cmd,
            &Help {
                text: help.to_string(),
                shown: format!("{} --help", cmd.shown()),
            },
        )
    }

    fn refusal(help: &str, command: &str) -> String {
        match verdict(help, command) {
            Verdict::Refused(m) => m,
            other => panic!("not refused: {other:?}"),
        }
    }

    const SGLANG_CMD: &str =
        "python3 -m sglang.launch_server --model-path /models/m --host 0.0.0.0 --port 30000";

    #[test]
    fn sglang_refuses_the_removed_cuda_graph_max_bs_with_its_real_usage() {
        let m = refusal(
            SGLANG,
            &format!("{SGLANG_CMD} --tp-size 8 --cuda-graph-max-bs 128"),
        );
        for expected in [
            "`python3 -m sglang.launch_server` would refuse its command line before loading anything:",
            "`--cuda-graph-max-bs` could be any of `--cuda-graph-max-bs-decode` or `--cuda-graph-max-bs-prefill`; write the whole name",
            "(the server would say: `error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill`)",
            "its usage (from `python3 -m sglang.launch_server --help` in the image):",
            "usage: sglang serve [-h] --model-path MODEL_PATH",
            "[--cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE]",
        ] {
            assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
        }
        // The usage is cut to what matters, not SGLang's ~470 lines.
        assert!(m.lines().count() < 20, "{m}");
    }

    #[test_case(SGLANG, SGLANG_CMD ; "sglang")]
    #[test_case(VLLM, "vllm serve /models/m --host 0.0.0.0 --port 8000" ; "vllm")]
    fn enable_custom_all_reduce_is_refused_with_the_real_flag(help: &str, command: &str) {
        let m = refusal(help, &format!("{command} --enable-custom-all-reduce"));
        for expected in [
            "`--enable-custom-all-reduce` is not a flag of this command; did you mean `--disable-custom-all-reduce`?",
            "(the server would say: `error: unrecognized arguments: --enable-custom-all-reduce`)",
        ] {
            assert!(m.contains(expected), "missing {expected:?} in:\n{m}");
        }
    }

    #[test]
    fn sglang_tp_passes_with_a_warning_naming_tp_size() {
        let Verdict::Accepted { warnings } = verdict(SGLANG, &format!("{SGLANG_CMD} --tp 8"))
        else {
            panic!()
        };
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("`--tp` is not a flag of `python3 -m sglang.launch_server`: it works only as argparse's abbreviation of `--tp-size`; write `--tp-size`"),
            "{warnings:?}"
        );
    }

    #[test_case(SGLANG, "sglang serve /models/m --tp-size 2 --enable-metrics --speculative-algorithm EAGLE3 --speculative-draft-model-path /d" ; "sglang serve with its model first")]
    #[test_case(VLLM, "vllm serve /models/m -tp 8 --max-model-len 4096 --enforce-eager --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 5}'" ; "vllm serve json")]
    #[test_case(VLLM, "python3 -m vllm.entrypoints.openai.api_server --model /m --max_model_len 4096 --speculative-config.method ngram" ; "vllm underscores and dotted keys")]
    fn right_server_command_lines_pass_without_warnings(help: &str, command: &str) {
        assert_eq!(
            verdict(help, command),
            Verdict::Accepted { warnings: vec![] }
        );
    }

    #[test]
    fn a_stored_help_reads_back_and_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli-help/abc.txt");
        let help = Help {
            text: VLLM.to_string(),
            shown: "vllm serve --help=all".into(),
        };
        HelpCache::store(&path, &help).unwrap();
        assert_eq!(HelpCache::load(&path), Some(help));
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // The key is the image's id, not its tag, and the program.
        let cmd = recognise(&argv("vllm serve /m")).unwrap();
        assert_ne!(
            HelpCache::file("sha256:1", &cmd),
            HelpCache::file("sha256:2", &cmd)
        );
    }

    #[test]
    fn a_summary_or_a_foreign_help_is_not_checked() {
        let cmd = "vllm serve /m --tensor-parallel-size 2";
        assert!(matches!(verdict(VLLM_SUMMARY, cmd), Verdict::Unchecked(_)));
        assert!(matches!(
            verdict("Usage: serve [OPTIONS]\n", cmd),
            Verdict::Unchecked(_)
        ));
    }
}
