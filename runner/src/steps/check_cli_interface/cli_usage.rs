//! Reading a command's interface from its help text: which flags it has, which take a value,
//! whether it takes positional arguments. One parser for the option lines of Python's argparse
//! and click, Rust's clap and GNU getopt-style programs, which all write an option as its
//! names, then its value's placeholder, then (after two blanks) its description.
//!
//! It only reads text; running the command and judging arguments against the result belong
//! to `check_cli_interface` and `flag_check`.

/// Which library wrote the help, as far as its wording tells. Decides the rules for what the
/// help leaves unsaid (abbreviated long options, positional arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Argparse,
    Click,
    Clap,
    /// GNU `getopt_long` programs and anything else that writes `--name=VALUE`.
    Getopt,
}

impl Style {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Argparse => "argparse",
            Self::Click => "click",
            Self::Clap => "clap",
            Self::Getopt => "getopt",
        }
    }
}

/// What a flag does with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takes {
    /// A switch: `--verbose`.
    Nothing,
    /// Exactly one value, or with `many` one or more (`--cuda-graph-bs 1 2 4`).
    Value { many: bool },
    /// A value that may be left out: argparse's `[LEVEL]`, clap's `[<LEVEL>]`, GNU's `[=WHEN]`.
    OptionalValue,
}

/// One option as the help lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// Every name, as written: `-p`, `--port`.
    pub names: Vec<String>,
    pub takes: Takes,
    /// The value's placeholder as written (`SERVER_URL`, `<PORT>`, `{a,b}`), for messages.
    pub metavar: Option<String>,
}

impl Flag {
    /// The name messages use: the first long one, else the first.
    pub fn main_name(&self) -> &str {
        self.names
            .iter()
            .find(|n| n.starts_with("--"))
            .unwrap_or(&self.names[0])
    }

    /// `--server-url SERVER_URL`: the flag as the help shows it.
    pub fn display(&self) -> String {
        match &self.metavar {
            Some(m) => format!("{} {m}", self.main_name()),
            None => self.main_name().to_string(),
        }
    }
}

/// A command's interface as its help describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    pub style: Style,
    pub flags: Vec<Flag>,
    /// Whether it takes positional arguments; `None` where the help does not say clearly.
    pub positionals: Option<bool>,
    /// The `usage:` lines (with their continuations), for messages; empty when there are none.
    pub synopsis: String,
}

impl Usage {
    /// Reads `help`; never fails (a text without option lines gives no flags).
    pub fn parse(help: &str) -> Self {
        let style = detect_style(help);
        let mut flags: Vec<Flag> = Vec::new();
        for line in help.lines() {
            // argparse writes every option line two blanks in; deeper lines are descriptions
            // and epilogs (vLLM's `   --json-arg '{...}'` examples), never options.
            if style == Style::Argparse && !is_argparse_option_line(line) {
                continue;
            }
            let Some(flag) = option_line(line) else {
                continue;
            };
            // A name listed twice (GNU's `--check, --check=quiet`) keeps its first listing.
            let mut flag = flag;
            flag.names
                .retain(|n| !flags.iter().any(|f| f.names.contains(n)));
            if !flag.names.is_empty() {
                flags.push(flag);
            }
        }
        let synopsis = synopsis(help);
        let positionals = positionals(style, help, &synopsis);
        Self {
            style,
            flags,
            positionals,
            synopsis,
        }
    }

    /// Whether the parser accepts a unique prefix of a long option (`--max` for
    /// `--max-tokens`): argparse (by default) and getopt_long do, click and clap do not.
    pub fn allows_abbreviations(&self) -> bool {
        matches!(self.style, Style::Argparse | Style::Getopt)
    }

    /// The flag called exactly `name`.
    pub fn flag(&self, name: &str) -> Option<&Flag> {
        self.flags
            .iter()
            .find(|f| f.names.iter().any(|n| n == name))
    }

    /// Every name of every flag, in the help's order.
    #[cfg(test)]
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.flags
            .iter()
            .flat_map(|f| f.names.iter().map(String::as_str))
    }
}

/// Two blanks, then a dash: where argparse's formatter puts an option (its sections, argument
/// groups included, are indented by two).
fn is_argparse_option_line(line: &str) -> bool {
    line.strip_prefix("  ")
        .is_some_and(|rest| rest.starts_with('-'))
}

/// The flag that prints the whole interface, when `help` is only a summary pointing to it:
/// vLLM's `vllm serve --help` lists its config groups and says "Use `--help=all` to show all
/// available flags at once". Judged from the help's own words: it names `--help=all` and has
/// no option lines of its own (but help's). A summary is never taken for the whole interface.
pub fn full_listing_flag(help: &str) -> Option<&'static str> {
    let names_it = help.contains("--help=all");
    let lists_options = help.lines().any(|l| {
        is_argparse_option_line(l)
            && option_line(l).is_some_and(|f| f.names.iter().any(|n| n != "-h" && n != "--help"))
    });
    (names_it && !lists_options).then_some("--help=all")
}

fn detect_style(help: &str) -> Style {
    let has_line = |p: &dyn Fn(&str) -> bool| help.lines().any(|l| p(l.trim_end()));
    if help.contains("Show this message and exit.") {
        Style::Click
    } else if has_line(&|l| l.starts_with("usage: "))
        && has_line(&|l| l == "options:" || l == "optional arguments:")
    {
        Style::Argparse
    } else if help.contains("Print help")
        || has_line(&|l| l == "USAGE:" || l == "FLAGS:" || l == "OPTIONS:")
    {
        Style::Clap
    } else {
        Style::Getopt
    }
}

/// The `usage:` line and the lines that continue it (indented, up to a blank line).
fn synopsis(help: &str) -> String {
    let mut lines = help.lines().skip_while(|l| {
        let l = l.trim_start().to_ascii_lowercase();
        !l.starts_with("usage:")
    });
    let Some(first) = lines.next() else {
        return String::new();
    };
    let mut out = vec![first.trim_end()];
    if first.trim().eq_ignore_ascii_case("usage:") {
        // clap 2/3 put the usage on the next line.
        if let Some(next) = lines.next() {
            out.push(next.trim_end());
        }
    }
    for l in lines {
        if l.trim().is_empty() || !l.starts_with(char::is_whitespace) {
            break;
        }
        out.push(l.trim_end());
    }
    out.join("\n")
}

/// What the help says about positional arguments, by the conventions of each library.
fn positionals(style: Style, help: &str, synopsis: &str) -> Option<bool> {
    let header = |names: &[&str]| help.lines().any(|l| names.contains(&l.trim_end()));
    match style {
        Style::Argparse => Some(header(&["positional arguments:"])),
        Style::Clap => Some(header(&["Arguments:", "ARGS:"])),
        Style::Click => {
            // `Usage: bench.py [OPTIONS] URL`: whatever follows `[OPTIONS]` is positional.
            let first = synopsis.lines().next()?;
            let after = first.split_once("[OPTIONS]")?.1;
            Some(!after.trim().is_empty())
        }
        Style::Getopt => None,
    }
}

/// The flag an option line defines, or `None` when the line is not one.
fn option_line(line: &str) -> Option<Flag> {
    let body = line.trim_start();
    if !body.starts_with('-') {
        return None;
    }
    // The names end where the description starts: two blanks or a tab.
    let end = [body.find("  "), body.find('\t')]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(body.len());
    let definition = &body[..end];
    let mut segments: Vec<(String, Option<(Takes, String)>)> = Vec::new();
    // `-n N, --num N`; click's on/off pairs `--stream / --no-stream`.
    for part in definition.split(", ").flat_map(|p| p.split(" / ")) {
        match segment(part) {
            Some(s) => segments.push(s),
            // The first part must be an option; a later one that is not is description
            // written after one blank.
            None if segments.is_empty() => return None,
            None => break,
        }
    }
    let line_value = segments.iter().find_map(|(_, v)| v.clone());
    let mut names: Vec<String> = Vec::new();
    let mut bare = Vec::new();
    for (name, value) in &segments {
        if value.is_none() {
            bare.push(name.clone());
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let (takes, metavar) = match line_value {
        None => (Takes::Nothing, None),
        // GNU's `--check, --check=quiet`: listed bare and with a value, so the value is optional.
        Some((Takes::Value { .. }, m))
            if segments
                .iter()
                .any(|(n, v)| v.is_some() && bare.contains(n)) =>
        {
            (Takes::OptionalValue, Some(m))
        }
        Some((t, m)) => (t, Some(m)),
    };
    Some(Flag {
        names,
        takes,
        metavar,
    })
}

/// `--name VALUE`, `--name=VALUE`, `--name[=VALUE]`, `--name <VALUE>`, `-n`: the name and,
/// when the part shows one, what it takes and its placeholder.
fn segment(part: &str) -> Option<(String, Option<(Takes, String)>)> {
    let part = part.trim();
    let dashes = part.len() - part.trim_start_matches('-').len();
    if !(1..=2).contains(&dashes) {
        return None;
    }
    let rest = &part[dashes..];
    let first = rest.chars().next()?;
    if !(first.is_ascii_alphanumeric() || first == '?') {
        return None;
    }
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '?')))
        .unwrap_or(rest.len());
    let name = part[..dashes + name_len].to_string();
    let after = &rest[name_len..];
    let value = if after.is_empty() {
        None
    } else if let Some(v) = after.strip_prefix("[=") {
        Some((Takes::OptionalValue, v.trim_end_matches(']').to_string()))
    } else if let Some(v) = after.strip_prefix('=') {
        Some((value_takes(v), v.to_string()))
    } else if after.starts_with('[') {
        Some((Takes::OptionalValue, after.to_string()))
    } else if let Some(v) = after.strip_prefix(' ') {
        Some(placeholder(v.trim())?)
    } else {
        // `--name,` or `--name)`: not an option definition.
        return None;
    };
    Some((name, value.filter(|(_, m)| !m.is_empty())))
}

/// What a placeholder written after a blank says: `[X]` is optional (except click's choice
/// lists `[a|b]`); `<X>`, `{a,b}` and capitalised words are values; a lower-case word starts
/// a description written after one blank, so the flag takes nothing.
fn placeholder(v: &str) -> Option<(Takes, String)> {
    let first = v.chars().next()?;
    let takes = if first == '[' {
        if v.contains('|') {
            value_takes(v)
        } else {
            Takes::OptionalValue
        }
    } else if first == '<' || first == '{' || first.is_ascii_uppercase() || first.is_ascii_digit() {
        value_takes(v)
    } else {
        return Some((Takes::Nothing, String::new()));
    };
    Some((takes, v.to_string()))
}

fn value_takes(placeholder: &str) -> Takes {
    Takes::Value {
        many: placeholder.contains("..."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    const ARGPARSE_BENCHMARK: &str = include_str!("help_texts/argparse_benchmark.txt");
    const ARGPARSE_SERVER: &str = include_str!("help_texts/argparse_server.txt");
    const CLICK: &str = include_str!("help_texts/click_bench.txt");
    const CLAP: &str = include_str!("help_texts/clap_run.txt");
    const GETOPT: &str = include_str!("help_texts/getopt_sort.txt");

    fn takes(help: &str, name: &str) -> Option<Takes> {
        Usage::parse(help).flag(name).map(|f| f.takes)
    }

    const ONE: Option<Takes> = Some(Takes::Value { many: false });
    const MANY: Option<Takes> = Some(Takes::Value { many: true });
    const SWITCH: Option<Takes> = Some(Takes::Nothing);
    const OPTIONAL: Option<Takes> = Some(Takes::OptionalValue);

    // The write-ups' benchmark script (images/python/benchmark_eagle3.py).
    #[test_case(ARGPARSE_BENCHMARK, "--server-url", ONE ; "argparse value")]
    #[test_case(ARGPARSE_BENCHMARK, "--warmup", ONE ; "argparse value last")]
    #[test_case(ARGPARSE_BENCHMARK, "-h", SWITCH ; "argparse help short")]
    #[test_case(ARGPARSE_BENCHMARK, "--port", None ; "argparse absent")]
    // An SGLang-like server: aliases, choices, nargs, store_true, BooleanOptionalAction.
    #[test_case(ARGPARSE_SERVER, "-p", ONE ; "argparse short alias after long")]
    #[test_case(ARGPARSE_SERVER, "--tp", ONE ; "argparse long alias")]
    #[test_case(ARGPARSE_SERVER, "--attention-backend", ONE ; "argparse choices")]
    #[test_case(ARGPARSE_SERVER, "--disable-cuda-graph", SWITCH ; "argparse store true")]
    #[test_case(ARGPARSE_SERVER, "--no-enable-metrics", SWITCH ; "argparse boolean optional")]
    #[test_case(ARGPARSE_SERVER, "--cuda-graph-bs", MANY ; "argparse nargs plus")]
    #[test_case(ARGPARSE_SERVER, "--log-level", OPTIONAL ; "argparse nargs optional")]
    #[test_case(ARGPARSE_SERVER, "--mem-fraction-static", ONE ; "argparse metavar")]
    #[test_case(ARGPARSE_SERVER, "model", None ; "argparse positional is no flag")]
    #[test_case(CLICK, "-c", ONE ; "click short")]
    #[test_case(CLICK, "--max-tokens", ONE ; "click range type")]
    #[test_case(CLICK, "--mode", ONE ; "click choice is a value")]
    #[test_case(CLICK, "--no-stream", SWITCH ; "click off switch")]
    #[test_case(CLICK, "--stream", SWITCH ; "click on switch")]
    #[test_case(CLICK, "--verbose", SWITCH ; "click flag")]
    #[test_case(CLAP, "--input", ONE ; "clap value")]
    #[test_case(CLAP, "--json", SWITCH ; "clap switch")]
    #[test_case(CLAP, "-V", SWITCH ; "clap version")]
    #[test_case(GETOPT, "--random-source", ONE ; "getopt equals value")]
    #[test_case(GETOPT, "-k", ONE ; "getopt short shares the long value")]
    #[test_case(GETOPT, "--check", OPTIONAL ; "getopt listed bare and with a value")]
    #[test_case(GETOPT, "-r", SWITCH ; "getopt switch")]
    #[test_case(GETOPT, "--help", SWITCH ; "getopt help")]
    #[test_case(GETOPT, "-g", SWITCH ; "getopt description after flag")]
    fn flags_of_real_help_texts(help: &str, name: &str, expected: Option<Takes>) {
        assert_eq!(takes(help, name), expected);
    }

    #[test_case(ARGPARSE_BENCHMARK, Style::Argparse, Some(false), 5)]
    #[test_case(ARGPARSE_SERVER, Style::Argparse, Some(true), 10)]
    #[test_case(CLICK, Style::Click, Some(true), 8)]
    #[test_case(CLAP, Style::Clap, Some(true), 10)]
    #[test_case(GETOPT, Style::Getopt, None, 31)]
    fn styles_positionals_and_counts(
        help: &str,
        style: Style,
        positionals: Option<bool>,
        flags: usize,
    ) {
        let usage = Usage::parse(help);
        assert_eq!(usage.style, style);
        assert_eq!(usage.positionals, positionals);
        assert_eq!(usage.flags.len(), flags, "{:#?}", usage.flags);
    }

    const VLLM_SUMMARY: &str = include_str!("help_texts/vllm_0.32.0_serve_help.txt");
    const VLLM_ALL: &str = include_str!("help_texts/vllm_0.32.0_serve_help_all.txt");
    const SGLANG: &str = include_str!("help_texts/sglang_0.5.23_serve.txt");

    #[test]
    fn a_summary_pointing_to_the_full_listing_is_followed() {
        assert_eq!(full_listing_flag(VLLM_SUMMARY), Some("--help=all"));
        // The full listing names `--help=all` too, but lists its options.
        assert_eq!(full_listing_flag(VLLM_ALL), None);
        for help in [
            SGLANG,
            ARGPARSE_BENCHMARK,
            ARGPARSE_SERVER,
            CLICK,
            CLAP,
            GETOPT,
        ] {
            assert_eq!(full_listing_flag(help), None);
        }
    }

    #[test]
    fn the_real_servers_helps_are_argparse_with_every_option() {
        let vllm = Usage::parse(VLLM_ALL);
        assert_eq!(vllm.style, Style::Argparse);
        assert_eq!(vllm.positionals, Some(true));
        for (name, expected) in [
            ("--tensor-parallel-size", ONE),
            ("-tp", ONE),
            ("--enforce-eager", SWITCH),
            ("--no-enforce-eager", SWITCH),
            ("--speculative-config", ONE),
            ("-sc", ONE),
            ("--api-key", MANY),
            // vLLM's epilog shows `--json-arg.key1 value1`: an example, not an option.
            ("--json-arg", None),
        ] {
            assert_eq!(vllm.flag(name).map(|f| f.takes), expected, "{name}");
        }
        let sglang = Usage::parse(SGLANG);
        assert_eq!(sglang.style, Style::Argparse);
        assert_eq!(sglang.positionals, Some(false));
        for (name, expected) in [
            ("--tp-size", ONE),
            ("--tensor-parallel-size", ONE),
            ("--cuda-graph-max-bs-decode", ONE),
            ("--disable-custom-all-reduce", SWITCH),
            ("--cuda-graph-max-bs", None),
            ("--tp", None),
        ] {
            assert_eq!(sglang.flag(name).map(|f| f.takes), expected, "{name}");
        }
    }

    #[test]
    fn the_synopsis_is_the_usage_with_its_continuations() {
        let usage = Usage::parse(ARGPARSE_BENCHMARK);
        assert_eq!(usage.synopsis.lines().count(), 3);
        assert!(usage.synopsis.ends_with("[--warmup WARMUP]"));
        assert_eq!(
            usage.flag("--server-url").map(Flag::display).as_deref(),
            Some("--server-url SERVER_URL")
        );
    }

    #[test_case("  -v, --verbose explain what is being done", "--verbose", SWITCH ; "one blank before the description")]
    #[test_case("      --color[=WHEN]  colorize", "--color", OPTIONAL ; "gnu optional")]
    #[test_case("  -o FILE, --output=FILE  write to FILE", "-o", ONE ; "optparse")]
    #[test_case("  --level [<LEVEL>]  log level", "--level", OPTIONAL ; "clap optional")]
    #[test_case("  --files <FILE>...  inputs", "--files", MANY ; "clap many")]
    fn option_lines(line: &str, name: &str, expected: Option<Takes>) {
        assert_eq!(takes(line, name), expected);
    }

    #[test_case("  - a bullet" ; "bullet")]
    #[test_case("  -- ends the options" ; "double dash")]
    #[test_case("usage: x [-h]" ; "usage")]
    fn not_option_lines(line: &str) {
        assert!(Usage::parse(line).flags.is_empty(), "{line}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn never_panics_and_names_are_options(help in "(( {0,4}-{0,2}[a-zA-Z0-9=\\[\\]<>{}|,./ _-]{0,30})\n){0,8}") {
            let usage = Usage::parse(&help);
            for name in usage.names() {
                proptest::prop_assert!(name.starts_with('-') && name.len() >= 2, "{name:?}");
            }
        }
    }
}
