//! Judging arguments against a command's [`Usage`]: every flag exists, takes a value where one
//! is given and none where none is, the way the command's own parser would read them; and, for
//! a flag that does not exist, the real flag that was most likely meant.
//!
//! Knows nothing of how the usage was obtained or how problems are shown.

use super::cli_usage::{Flag, Takes, Usage};

/// One way the arguments do not fit the usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// No such flag; `closest` is the real flag most likely meant.
    Unknown { flag: String, closest: Option<Flag> },
    /// An abbreviation several long flags start with.
    Ambiguous {
        flag: String,
        candidates: Vec<String>,
    },
    /// A flag that needs a value, given none.
    MissingValue { flag: Flag, given: String },
    /// A switch given a value (`--flag=x`, or a word after it where the command takes no
    /// positional arguments).
    UnexpectedValue { flag: Flag, value: String },
    /// A word that is no flag's value, where the command takes no positional arguments.
    UnexpectedArgument { value: String },
}

impl Problem {
    /// One line for the step's log: what is wrong and how to fix it.
    pub fn message(&self) -> String {
        match self {
            Self::Unknown { flag, closest } => match closest {
                Some(c) => format!(
                    "`{flag}` is not a flag of this command; did you mean `{}`?",
                    c.display()
                ),
                None => format!("`{flag}` is not a flag of this command"),
            },
            Self::Ambiguous { flag, candidates } => format!(
                "`{flag}` could be any of {}; write the whole name",
                crate::diag::join_quoted(candidates, "or")
            ),
            Self::MissingValue { flag, given } => format!(
                "`{given}` needs a value (`{}`), and none follows it",
                flag.display()
            ),
            Self::UnexpectedValue { flag, value } => format!(
                "`{}` takes no value, but is given `{value}`",
                flag.main_name()
            ),
            Self::UnexpectedArgument { value } => format!(
                "`{value}` is neither a flag nor a flag's value, and the command takes no positional arguments"
            ),
        }
    }
}

/// What a checked argument list used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub problems: Vec<Problem>,
    /// Abbreviations the command accepts, as (given, full name): fine today, but they break
    /// when the command gains a second flag with the same start.
    pub abbreviations: Vec<(String, String)>,
}

enum Found<'a> {
    Exact(&'a Flag),
    Abbreviation(&'a Flag, String),
    Ambiguous(Vec<String>),
    Unknown,
}

fn find<'a>(usage: &'a Usage, name: &str) -> Found<'a> {
    if let Some(f) = usage.flag(name) {
        return Found::Exact(f);
    }
    if name.starts_with("--") && usage.allows_abbreviations() {
        let matches: Vec<(&Flag, &String)> = usage
            .flags
            .iter()
            .flat_map(|f| f.names.iter().map(move |n| (f, n)))
            .filter(|(_, n)| n.starts_with(name))
            .collect();
        match matches.as_slice() {
            [(f, n)] => return Found::Abbreviation(f, (*n).clone()),
            [] => {}
            _ => {
                return Found::Ambiguous(matches.iter().map(|(_, n)| (*n).clone()).collect());
            }
        }
    }
    Found::Unknown
}

/// A word a parser would read as a flag rather than as a value: `-x`, `--x`, not `-1`/`-`.
fn looks_like_flag(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-') && word.parse::<f64>().is_err()
}

/// Reads `args` as the command's parser would and says what does not fit `usage`.
pub fn check_args(usage: &Usage, args: &[String]) -> Checked {
    let mut out = Checked::default();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        if word == "--" {
            if usage.positionals == Some(false)
                && let Some(rest) = args.get(i)
            {
                out.problems.push(Problem::UnexpectedArgument {
                    value: rest.clone(),
                });
            }
            break;
        }
        if !looks_like_flag(word) {
            if usage.positionals == Some(false) {
                out.problems.push(Problem::UnexpectedArgument {
                    value: word.clone(),
                });
            }
            continue;
        }
        let (name, inline) = match word.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (word.clone(), None),
        };
        let (flag, inline) = match find(usage, &name) {
            Found::Exact(f) => (f, inline),
            Found::Abbreviation(f, full) => {
                out.abbreviations.push((name.clone(), full));
                (f, inline)
            }
            Found::Ambiguous(candidates) => {
                out.problems.push(Problem::Ambiguous {
                    flag: name,
                    candidates,
                });
                continue;
            }
            Found::Unknown => match short_with_value(usage, word) {
                // `-n5`: a short flag with its value attached.
                Some((f, v)) => (f, Some(v)),
                None => {
                    out.problems.push(Problem::Unknown {
                        closest: closest_flag(usage, &name).cloned(),
                        flag: name,
                    });
                    // Its value, if it has one, is not a positional argument to report.
                    if args.get(i).is_some_and(|next| !looks_like_flag(next)) {
                        i += 1;
                    }
                    continue;
                }
            },
        };
        match (flag.takes, inline) {
            (Takes::Nothing, Some(value)) => out.problems.push(Problem::UnexpectedValue {
                flag: flag.clone(),
                value,
            }),
            (Takes::Nothing, None) => {
                if usage.positionals == Some(false)
                    && let Some(next) = args.get(i).filter(|n| !looks_like_flag(n))
                {
                    out.problems.push(Problem::UnexpectedValue {
                        flag: flag.clone(),
                        value: next.clone(),
                    });
                    i += 1;
                }
            }
            (_, Some(_)) => {}
            (Takes::Value { many }, None) => match args.get(i) {
                Some(next) if !looks_like_flag(next) => {
                    i += 1;
                    while many && args.get(i).is_some_and(|n| !looks_like_flag(n)) {
                        i += 1;
                    }
                }
                _ => out.problems.push(Problem::MissingValue {
                    flag: flag.clone(),
                    given: name,
                }),
            },
            (Takes::OptionalValue, None) => {
                if args.get(i).is_some_and(|n| !looks_like_flag(n)) {
                    i += 1;
                }
            }
        }
    }
    out
}

/// `-n5` when `-n` takes a value.
fn short_with_value<'a>(usage: &'a Usage, word: &str) -> Option<(&'a Flag, String)> {
    if word.starts_with("--") || word.len() <= 2 {
        return None;
    }
    let flag = usage.flag(word.get(..2)?)?;
    (flag.takes != Takes::Nothing).then(|| (flag, word[2..].to_string()))
}

/// Words that name the same thing in the flags of LLM servers and benchmark scripts: the
/// write-ups passed `--port`, `--num-prompts` and `--output-len` to a script whose flags were
/// `--server-url`, `--num-runs` and `--max-tokens`. Spelling alone cannot find those.
const SAME_MEANING: &[&[&str]] = &[
    &[
        "port",
        "host",
        "url",
        "server-url",
        "base-url",
        "server",
        "address",
        "addr",
        "endpoint",
        "api-base",
        "api-url",
        "target",
        "server-address",
    ],
    &[
        "output-len",
        "output-length",
        "max-tokens",
        "max-new-tokens",
        "output-tokens",
        "gen-len",
        "osl",
        "max-output-tokens",
        "new-tokens",
        "num-tokens",
        "tokens",
        "random-output-len",
        "max-length",
    ],
    &[
        "num-prompts",
        "num-requests",
        "num-runs",
        "runs",
        "iterations",
        "iters",
        "num-iters",
        "repeat",
        "repeats",
        "trials",
        "num-samples",
        "requests",
        "prompts",
        "n",
    ],
    &[
        "warmup",
        "warmup-runs",
        "num-warmup",
        "warmup-requests",
        "warmup-iters",
        "n-warmup",
    ],
    &[
        "input-len",
        "input-length",
        "prompt-len",
        "isl",
        "random-input-len",
        "prompt-tokens",
    ],
    &[
        "concurrency",
        "max-concurrency",
        "parallel",
        "num-parallel",
        "clients",
        "workers",
    ],
    &["request-rate", "rate", "qps", "rps"],
    &["model", "model-path", "model-name", "served-model-name"],
];

/// A flag name without dashes, lower case, `_` read as `-`.
fn normalize(name: &str) -> String {
    name.trim_start_matches('-')
        .replace('_', "-")
        .to_ascii_lowercase()
}

/// The real flag most likely meant by `given`: the same name but for case and `_`; else one
/// that means the same ([`SAME_MEANING`]); else one spelt nearly the same (as
/// [`crate::diag::did_you_mean`] judges, on names without dashes so `--` adds nothing); else
/// one sharing a word (`--num-prompts` → `--num-runs`).
pub fn closest_flag<'a>(usage: &'a Usage, given: &str) -> Option<&'a Flag> {
    let wanted = normalize(given);
    let named: Vec<(&Flag, String)> = usage
        .flags
        .iter()
        .flat_map(|f| f.names.iter().map(move |n| (f, normalize(n))))
        .filter(|(_, n)| n.len() > 1 || wanted.len() == 1)
        .collect();
    let similarity = |n: &str| strsim::jaro_winkler(&wanted, n);
    let best = |candidates: &mut dyn Iterator<Item = &(&'a Flag, String)>| {
        candidates
            .max_by(|a, b| similarity(&a.1).total_cmp(&similarity(&b.1)))
            .map(|(f, _)| *f)
    };
    if let Some((f, _)) = named.iter().find(|(_, n)| *n == wanted) {
        return Some(f);
    }
    // A name listed in a group is a real word, not a typo: its meaning decides first.
    if let Some(group) = SAME_MEANING.iter().find(|g| g.contains(&wanted.as_str()))
        && let Some(f) = best(&mut named.iter().filter(|(_, n)| group.contains(&n.as_str())))
    {
        return Some(f);
    }
    // The threshold `did_you_mean` uses for keys.
    if let Some(f) = best(&mut named.iter().filter(|(_, n)| similarity(n) > 0.8)) {
        return Some(f);
    }
    let words: Vec<&str> = wanted.split('-').filter(|w| w.len() > 1).collect();
    let shared = |n: &str| n.split('-').filter(|w| words.contains(w)).count();
    named
        .iter()
        .filter(|(_, n)| shared(n) > 0)
        .max_by(|a, b| {
            shared(&a.1)
                .cmp(&shared(&b.1))
                .then(similarity(&a.1).total_cmp(&similarity(&b.1)))
        })
        .map(|(f, _)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const BENCHMARK: &str = include_str!("help_texts/argparse_benchmark.txt");
    const SERVER: &str = include_str!("help_texts/argparse_server.txt");
    const CLICK: &str = include_str!("help_texts/click_bench.txt");
    const CLAP: &str = include_str!("help_texts/clap_run.txt");
    const GETOPT: &str = include_str!("help_texts/getopt_sort.txt");

    fn check(help: &str, args: &str) -> Checked {
        let args = crate::engine::container_inputs::split_words(args).unwrap();
        check_args(&Usage::parse(help), &args)
    }

    fn messages(help: &str, args: &str) -> Vec<String> {
        check(help, args)
            .problems
            .iter()
            .map(Problem::message)
            .collect()
    }

    #[test]
    fn the_write_ups_flags_are_refused_with_the_real_ones_suggested() {
        assert_eq!(
            messages(BENCHMARK, "--port 30000 --num-prompts 5 --output-len 256"),
            [
                "`--port` is not a flag of this command; did you mean `--server-url SERVER_URL`?",
                "`--num-prompts` is not a flag of this command; did you mean `--num-runs NUM_RUNS`?",
                "`--output-len` is not a flag of this command; did you mean `--max-tokens MAX_TOKENS`?",
            ]
        );
    }

    #[test_case(BENCHMARK, "--server-url http://localhost:30000 --max-tokens 256 --num-runs 5 --warmup 1" ; "argparse right flags")]
    #[test_case(BENCHMARK, "--server-url=http://localhost:30000" ; "argparse inline value")]
    #[test_case(SERVER, "/models/qwen --tp 8 --cuda-graph-bs 1 2 4 --log-level --disable-cuda-graph" ; "argparse positional nargs and optional")]
    #[test_case(SERVER, "m --port -1" ; "negative number is a value")]
    #[test_case(CLICK, "http://x --max-tokens 256 --no-stream -c 4" ; "click")]
    #[test_case(CLAP, "wf.yml --input a=b --json" ; "clap")]
    #[test_case(GETOPT, "-k2 --check --random-source=/dev/urandom -r file" ; "getopt")]
    fn right_arguments_pass(help: &str, args: &str) {
        assert_eq!(check(help, args), Checked::default());
    }

    #[test_case(BENCHMARK, "--max-tokens", "`--max-tokens` needs a value (`--max-tokens MAX_TOKENS`), and none follows it" ; "missing at end")]
    #[test_case(BENCHMARK, "--max-tokens --warmup 1", "`--max-tokens` needs a value (`--max-tokens MAX_TOKENS`), and none follows it" ; "missing before flag")]
    #[test_case(SERVER, "m --disable-cuda-graph=1", "`--disable-cuda-graph` takes no value, but is given `1`" ; "switch with inline value")]
    #[test_case(BENCHMARK, "-h 3", "`--help` takes no value, but is given `3`" ; "switch with a word and no positionals")]
    #[test_case(BENCHMARK, "extra", "`extra` is neither a flag nor a flag's value, and the command takes no positional arguments" ; "positional")]
    #[test_case(CLICK, "u --max 3", "`--max` is not a flag of this command; did you mean `--max-tokens INTEGER RANGE`?" ; "click has no abbreviations")]
    #[test_case(SERVER, "m --t 8", "`--t` could be any of `--tp-size` or `--tp`; write the whole name" ; "ambiguous abbreviation")]
    fn wrong_arguments_are_refused(help: &str, args: &str, expected: &str) {
        assert_eq!(messages(help, args), [expected]);
    }

    #[test]
    fn argparse_accepts_a_unique_abbreviation_and_says_so() {
        let checked = check(BENCHMARK, "--num 3");
        assert_eq!(checked.problems, []);
        assert_eq!(
            checked.abbreviations,
            [("--num".to_string(), "--num-runs".to_string())]
        );
    }

    #[test_case("--max-token", "--max-tokens" ; "typo")]
    #[test_case("--server_url", "--server-url" ; "underscore")]
    #[test_case("--host", "--server-url" ; "same meaning")]
    #[test_case("--max-new-tokens", "--max-tokens" ; "vllm name")]
    #[test_case("--num-warmup", "--warmup" ; "warmup")]
    fn closest_flags(given: &str, expected: &str) {
        let usage = Usage::parse(BENCHMARK);
        assert_eq!(
            closest_flag(&usage, given).map(Flag::main_name),
            Some(expected)
        );
    }

    #[test]
    fn nothing_is_suggested_for_an_unrelated_flag() {
        let usage = Usage::parse(BENCHMARK);
        assert_eq!(closest_flag(&usage, "--quantization"), None);
    }
}
