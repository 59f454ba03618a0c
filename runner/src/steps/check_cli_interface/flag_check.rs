//! Judging arguments against a command's [`Usage`]: every flag exists, takes a value where one
//! is given and none where none is, the way the command's own parser would read them; and, for
//! a flag that does not exist, the real flag that was most likely meant.
//!
//! Knows nothing of how the usage was obtained or how problems are shown.

use super::cli_usage::{Flag, Style, Takes, Usage};

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

/// How the command's parser reads one word of its arguments.
enum Read<'a> {
    /// A positional argument or a flag's value.
    Arg,
    /// `--`: every word after it is positional.
    EndOfOptions,
    /// A flag (or what the parser takes for one): what it is, the name as given, and a value
    /// attached to it (`--name=value`, `-n5`).
    Flag {
        found: Found<'a>,
        name: String,
        inline: Option<String>,
    },
}

/// Reads `word` as the usage's parser would: argparse's own rules for argparse, the common
/// ground of the others otherwise.
fn read<'a>(usage: &'a Usage, word: &str) -> Read<'a> {
    if word == "--" {
        return Read::EndOfOptions;
    }
    if usage.style == Style::Argparse {
        return read_argparse(usage, word);
    }
    if !looks_like_flag(word) {
        return Read::Arg;
    }
    let (name, inline) = match word.split_once('=') {
        Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
        _ => (word.to_string(), None),
    };
    let found = match usage.flag(&name) {
        Some(f) => Found::Exact(f),
        None if name.starts_with("--") && usage.allows_abbreviations() => {
            from_matches(long_prefix_matches(usage, &name))
        }
        None => match short_with_value(usage, word) {
            // `-n5`: a short flag with its value attached.
            Some((f, v)) => {
                return Read::Flag {
                    found: Found::Exact(f),
                    name: f.names[0].clone(),
                    inline: Some(v),
                };
            }
            None => Found::Unknown,
        },
    };
    Read::Flag {
        found,
        name,
        inline,
    }
}

/// The flags a prefix selects, one per option string, as argparse's `_get_option_tuples`
/// collects them: two option strings of one flag are two matches.
fn from_matches<'a>(matches: Vec<(&'a Flag, &'a String)>) -> Found<'a> {
    match matches.as_slice() {
        [(f, n)] => Found::Abbreviation(f, (*n).clone()),
        [] => Found::Unknown,
        _ => Found::Ambiguous(matches.iter().map(|(_, n)| (*n).clone()).collect()),
    }
}

fn long_prefix_matches<'a>(usage: &'a Usage, prefix: &str) -> Vec<(&'a Flag, &'a String)> {
    usage
        .flags
        .iter()
        .flat_map(|f| f.names.iter().map(move |n| (f, n)))
        .filter(|(_, n)| n.starts_with(prefix))
        .collect()
}

/// argparse's `_negative_number_matcher`.
static NEGATIVE_NUMBER: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"^-\d+$|^-\d*\.\d+$").expect("a valid pattern"));

/// CPython's `ArgumentParser._parse_optional` and `_get_option_tuples` (identical in 3.11,
/// 3.12 and 3.13 for these cases), with the default `allow_abbrev=True` that SGLang and vLLM
/// keep:
/// - a word not starting with `-`, or `-` alone, is an argument;
/// - an option string exactly, or exactly before a `=`, is that option;
/// - `--prefix[=value]`: every option string starting with the prefix; one is an
///   abbreviation, several are "ambiguous option: … could match …";
/// - `-xyz`: the option `-x` with `yz` attached, and every option string starting with
///   `-xyz` (single-dash long options such as vLLM's `-tp`), counted together;
/// - else a negative number (`-1`, `-.5`) is an argument (neither server has an option that
///   looks like one), so is a word with a blank in it (`-x y`);
/// - anything else is an option the parser does not know ("unrecognized arguments").
fn read_argparse<'a>(usage: &'a Usage, word: &str) -> Read<'a> {
    let flag = |found, name: &str, inline: Option<&str>| Read::Flag {
        found,
        name: name.to_string(),
        inline: inline.map(String::from),
    };
    if !word.starts_with('-') {
        return Read::Arg;
    }
    if let Some(f) = usage.flag(word) {
        return flag(Found::Exact(f), word, None);
    }
    if word.len() == 1 {
        return Read::Arg;
    }
    if let Some((name, value)) = word.split_once('=')
        && let Some(f) = usage.flag(name)
    {
        return flag(Found::Exact(f), name, Some(value));
    }
    let tuples: Vec<(&Flag, &String, Option<&str>)> = if word.starts_with("--") {
        let (prefix, explicit) = match word.split_once('=') {
            Some((p, v)) => (p, Some(v)),
            None => (word, None),
        };
        long_prefix_matches(usage, prefix)
            .into_iter()
            .map(|(f, n)| (f, n, explicit))
            .collect()
    } else {
        let (short, attached) =
            word.split_at(word.char_indices().nth(2).map_or(word.len(), |(i, _)| i));
        usage
            .flags
            .iter()
            .flat_map(|f| f.names.iter().map(move |n| (f, n)))
            .filter_map(|(f, n)| {
                if n == short {
                    Some((f, n, Some(attached)))
                } else {
                    n.starts_with(word).then_some((f, n, None))
                }
            })
            .collect()
    };
    match tuples.as_slice() {
        [] => {}
        [(f, n, explicit)] => {
            let given = word.split_once('=').map_or(word, |(p, _)| p);
            let found = if n.as_str() == given || (!word.starts_with("--") && explicit.is_some()) {
                Found::Exact(f)
            } else {
                Found::Abbreviation(f, (*n).clone())
            };
            let name = if matches!(found, Found::Exact(_)) {
                n.as_str()
            } else {
                given
            };
            return flag(found, name, *explicit);
        }
        _ => {
            let names = tuples.iter().map(|(_, n, _)| (*n).clone()).collect();
            return flag(Found::Ambiguous(names), word, None);
        }
    }
    let negative = &*NEGATIVE_NUMBER;
    if negative.is_match(word)
        && !usage
            .flags
            .iter()
            .flat_map(|f| &f.names)
            .any(|n| negative.is_match(n))
    {
        return Read::Arg;
    }
    if word.contains(' ') {
        return Read::Arg;
    }
    let name = match word.split_once('=') {
        Some((n, _)) if word.starts_with("--") => n,
        _ => word,
    };
    flag(Found::Unknown, name, None)
}

/// A word a parser would read as a flag rather than as a value: `-x`, `--x`, not `-1`/`-`.
fn looks_like_flag(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-') && word.parse::<f64>().is_err()
}

/// Whether the word at `i` is an argument (a value), not a flag, for the usage's parser.
fn is_arg(usage: &Usage, args: &[String], i: usize) -> bool {
    args.get(i)
        .is_some_and(|w| matches!(read(usage, w), Read::Arg))
}

/// Reads `args` as the command's parser would and says what does not fit `usage`.
pub fn check_args(usage: &Usage, args: &[String]) -> Checked {
    let mut out = Checked::default();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let (found, name, inline) = match read(usage, word) {
            Read::EndOfOptions => {
                if usage.positionals == Some(false)
                    && let Some(rest) = args.get(i)
                {
                    out.problems.push(Problem::UnexpectedArgument {
                        value: rest.clone(),
                    });
                }
                break;
            }
            Read::Arg => {
                if usage.positionals == Some(false) {
                    out.problems.push(Problem::UnexpectedArgument {
                        value: word.clone(),
                    });
                }
                continue;
            }
            Read::Flag {
                found,
                name,
                inline,
            } => (found, name, inline),
        };
        let flag = match found {
            Found::Exact(f) => f,
            Found::Abbreviation(f, full) => {
                out.abbreviations.push((name.clone(), full));
                f
            }
            Found::Ambiguous(candidates) => {
                out.problems.push(Problem::Ambiguous {
                    flag: name,
                    candidates,
                });
                if inline.is_none() && is_arg(usage, args, i) {
                    i += 1;
                }
                continue;
            }
            Found::Unknown => {
                out.problems.push(Problem::Unknown {
                    closest: closest_flag(usage, &name).cloned(),
                    flag: name,
                });
                // Its value, if it has one, is not a positional argument to report.
                if inline.is_none() && is_arg(usage, args, i) {
                    i += 1;
                }
                continue;
            }
        };
        match (flag.takes, inline) {
            (Takes::Nothing, Some(value)) => out.problems.push(Problem::UnexpectedValue {
                flag: flag.clone(),
                value,
            }),
            (Takes::Nothing, None) => {
                if usage.positionals == Some(false) && is_arg(usage, args, i) {
                    out.problems.push(Problem::UnexpectedValue {
                        flag: flag.clone(),
                        value: args[i].clone(),
                    });
                    i += 1;
                }
            }
            (_, Some(_)) => {}
            (Takes::Value { many }, None) => {
                if is_arg(usage, args, i) {
                    i += 1;
                    while many && is_arg(usage, args, i) {
                        i += 1;
                    }
                } else {
                    out.problems.push(Problem::MissingValue {
                        flag: flag.clone(),
                        given: name,
                    });
                }
            }
            (Takes::OptionalValue, None) => {
                if is_arg(usage, args, i) {
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

    /// Real help texts of the servers: SGLang 0.5.23's `sglang serve --help` (its own argument
    /// definitions) and vLLM 0.32.0's `vllm serve --help=all` (captured from the program).
    const SGLANG: &str = include_str!("help_texts/sglang_0.5.23_serve.txt");
    const VLLM: &str = include_str!("help_texts/vllm_0.32.0_serve_help_all.txt");

    #[test_case(SGLANG, "--model-path /models/m --tp-size 8 --cuda-graph-max-bs-decode 128 --disable-custom-all-reduce" ; "sglang exact")]
    #[test_case(SGLANG, "--model-path=/models/m --mem-fraction-static=0.8 --tensor-parallel-size 2" ; "sglang equals and alias")]
    #[test_case(SGLANG, "--model-path /m --speculative-algorithm EAGLE3 --speculative-draft-model-path /d --speculative-num-steps 3 --enable-metrics" ; "sglang speculative")]
    #[test_case(VLLM, "/models/m --tensor-parallel-size 8 --max-model-len 4096 --enforce-eager --gpu-memory-utilization 0.9" ; "vllm exact")]
    #[test_case(VLLM, "/models/m -tp 8 -q fp8" ; "vllm single dash long options")]
    #[test_case(VLLM, "/models/m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 5}'" ; "vllm json value")]
    #[test_case(VLLM, "/models/m -sc='{\"method\": \"ngram\"}'" ; "vllm short alias with equals")]
    #[test_case(VLLM, "/models/m --port -1" ; "negative number value")]
    #[test_case(VLLM, "/models/m --api-key '-a b'" ; "a dash word with a blank is a value")]
    fn real_server_arguments_pass(help: &str, args: &str) {
        let checked = check(help, args);
        assert_eq!(checked.problems, [], "{args}");
    }

    #[test]
    fn sglang_tp_works_only_as_an_abbreviation_of_tp_size() {
        let checked = check(SGLANG, "--model-path /m --tp 8");
        assert_eq!(checked.problems, []);
        assert_eq!(
            checked.abbreviations,
            [("--tp".to_string(), "--tp-size".to_string())]
        );
    }

    #[test]
    fn the_removed_cuda_graph_max_bs_is_ambiguous_as_argparse_says() {
        assert_eq!(
            check(SGLANG, "--model-path /m --cuda-graph-max-bs 128").problems,
            [Problem::Ambiguous {
                flag: "--cuda-graph-max-bs".into(),
                candidates: vec![
                    "--cuda-graph-max-bs-decode".into(),
                    "--cuda-graph-max-bs-prefill".into()
                ],
            }]
        );
        // The value after `=` does not change the prefix.
        assert_eq!(
            messages(SGLANG, "--model-path /m --cuda-graph-max-bs=128"),
            [
                "`--cuda-graph-max-bs=128` could be any of `--cuda-graph-max-bs-decode` or `--cuda-graph-max-bs-prefill`; write the whole name"
            ]
        );
    }

    #[test_case(SGLANG ; "sglang")]
    #[test_case(VLLM ; "vllm")]
    fn enable_custom_all_reduce_is_unknown_and_its_opposite_suggested(help: &str) {
        let problems = check(help, "--enable-custom-all-reduce").problems;
        let [Problem::Unknown { flag, closest }] = problems.as_slice() else {
            panic!("{problems:?}")
        };
        assert_eq!(flag, "--enable-custom-all-reduce");
        assert_eq!(
            closest.as_ref().map(Flag::main_name),
            Some("--disable-custom-all-reduce")
        );
    }

    #[test]
    fn vllm_single_dash_prefixes_follow_argparse() {
        // `-t` starts only `-tp`: an abbreviation; `-d` starts `-dp`, `-dpa`, `-dcp`, …
        let checked = check(VLLM, "/m -t 2");
        assert_eq!(checked.problems, []);
        assert_eq!(checked.abbreviations, [("-t".into(), "-tp".into())]);
        let problems = check(VLLM, "/m -dp 2 -d 1").problems;
        assert!(
            matches!(problems.as_slice(), [Problem::Ambiguous { flag, candidates }] if flag == "-d" && candidates.len() > 5),
            "{problems:?}"
        );
        // A short option with its value attached: `-n` takes one.
        assert_eq!(check(VLLM, "/m -n2").problems, []);
        // `-tp8` is neither `-t` with `p8` nor a prefix of an option: unknown.
        assert!(matches!(
            check(VLLM, "/m -tp8").problems.as_slice(),
            [Problem::Unknown { flag, .. }] if flag == "-tp8"
        ));
    }

    #[test]
    fn a_dash_word_where_a_value_belongs_is_a_flag_to_argparse() {
        // `--max-model-len --enforce-eager`: argparse finds no value for the first.
        assert!(matches!(
            check(VLLM, "/m --max-model-len --enforce-eager").problems.as_slice(),
            [Problem::MissingValue { given, .. }] if given == "--max-model-len"
        ));
        // A dash word that matches no option is still an option to argparse, not a value.
        let problems = check(VLLM, "/m --api-key -abc").problems;
        assert!(
            matches!(problems.as_slice(), [Problem::MissingValue { given, .. }, Problem::Unknown { flag, .. }] if given == "--api-key" && flag == "-abc"),
            "{problems:?}"
        );
        // A prefix of a real option is that option, even where a value was meant.
        assert!(matches!(
            check(VLLM, "/m --api-key --enforce").problems.as_slice(),
            [Problem::MissingValue { given, .. }] if given == "--api-key"
        ));
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
