//! `gpuflow bench URL`: the `benchmark` step's load generator outside a workflow. Flags carry
//! the step's input names (`--output-tokens` is `output-tokens:`), and are read by the same
//! `BenchInputs::from_json` and `BenchConfig::from_inputs`, so both accept and refuse the
//! same things. Prints the readable
//! table (or `--json`), a live progress line on stderr when it is a terminal, and writes the
//! result files with `--save-result`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::bench::{
    self, BenchConfig, BenchError, BenchInputs, BenchResult, ConfigError, Progress,
};
use crate::diag::ExitCode;

#[derive(Debug, clap::Args)]
#[allow(clippy::struct_field_names)]
pub struct Args {
    /// The server's base URL, e.g. `http://localhost:30000`.
    #[arg(value_name = "URL")]
    url: String,

    /// `completions` (/v1/completions) or `chat` (/v1/chat/completions).
    #[arg(long)]
    endpoint: Option<String>,
    /// The model name sent in requests (default: the first of /v1/models).
    #[arg(long)]
    model: Option<String>,
    /// `single-stream`, `concurrency` or `request-rate` (default: from the load flags given).
    #[arg(long)]
    mode: Option<String>,
    /// Requests in flight; a comma-separated list sweeps (`1,8,64`).
    #[arg(long, short = 'c', value_name = "N[,N…]")]
    concurrency: Option<String>,
    /// Open loop: requests per second.
    #[arg(long, value_name = "RATE")]
    request_rate: Option<String>,
    /// Open loop arrivals: `poisson`, `constant` or `gamma`.
    #[arg(long)]
    arrival: Option<String>,
    /// Gamma arrivals' shape (1.0 is Poisson; lower is burstier).
    #[arg(long)]
    burstiness: Option<String>,
    /// Seed of the arrival schedule and synthetic prompts.
    #[arg(long)]
    seed: Option<String>,
    /// Measured requests per run.
    #[arg(long, short = 'n')]
    requests: Option<String>,
    /// Or: how long each run sends requests (`30s`).
    #[arg(long)]
    duration: Option<String>,
    /// Repetitions (each reported, with median, 95% interval and variation).
    #[arg(long)]
    runs: Option<String>,
    /// Warm-up requests before each run, excluded from every metric.
    #[arg(long)]
    warmup: Option<String>,
    /// `synthetic`, `jsonl` or `sharegpt`.
    #[arg(long)]
    prompts: Option<String>,
    /// The prompt file for `--prompts jsonl` or `sharegpt`.
    #[arg(long)]
    prompt_file: Option<String>,
    /// Length of synthetic prompts, in tokens (words).
    #[arg(long)]
    input_tokens: Option<String>,
    /// Tokens to generate per request.
    #[arg(long)]
    output_tokens: Option<String>,
    /// `true` or `false` (default: true for synthetic prompts).
    #[arg(long)]
    ignore_eos: Option<String>,
    /// A request taking longer is a timeout error (`10m`).
    #[arg(long)]
    request_timeout: Option<String>,
    /// A stream silent this long is a timeout error (`1m`).
    #[arg(long)]
    idle_timeout: Option<String>,
    /// Fail when more requests than this fail (`5%`).
    #[arg(long)]
    max_error_rate: Option<String>,
    /// A service-level objective for goodput, e.g. `--slo ttft_ms=500` (repeatable).
    #[arg(long, value_name = "NAME=MS")]
    slo: Vec<String>,

    /// Print the result as JSON (vLLM's `--save-result` keys) instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the JSON result to FILE, and one line per request to FILE's `.requests.jsonl`.
    #[arg(long, value_name = "FILE")]
    save_result: Option<PathBuf>,
}

impl Args {
    /// The flags as the `benchmark` step's inputs, as text: they are read as the step's are,
    /// so both accept and refuse the same values.
    fn inputs(&self) -> Result<BenchInputs, ConfigError> {
        let mut inputs = serde_json::Map::new();
        inputs.insert("target".to_owned(), self.url.clone().into());
        let flags = [
            ("endpoint", &self.endpoint),
            ("model", &self.model),
            ("mode", &self.mode),
            ("concurrency", &self.concurrency),
            ("request-rate", &self.request_rate),
            ("arrival", &self.arrival),
            ("burstiness", &self.burstiness),
            ("seed", &self.seed),
            ("requests", &self.requests),
            ("duration", &self.duration),
            ("runs", &self.runs),
            ("warmup", &self.warmup),
            ("prompts", &self.prompts),
            ("prompt-file", &self.prompt_file),
            ("input-tokens", &self.input_tokens),
            ("output-tokens", &self.output_tokens),
            ("ignore-eos", &self.ignore_eos),
            ("request-timeout", &self.request_timeout),
            ("idle-timeout", &self.idle_timeout),
            ("max-error-rate", &self.max_error_rate),
        ];
        for (name, value) in flags {
            if let Some(value) = value {
                inputs.insert(name.to_owned(), value.clone().into());
            }
        }
        if !self.slo.is_empty() {
            inputs.insert("slo".to_owned(), self.slo.join(",").into());
        }
        BenchInputs::from_json(&inputs)
    }
}

/// The flag a step input is given with here.
fn flag(input: &str) -> String {
    if input == "target" {
        "URL".to_owned()
    } else {
        format!("--{input}")
    }
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = match args
        .inputs()
        .and_then(|inputs| BenchConfig::from_inputs(&inputs))
    {
        Ok(config) => config,
        Err(err) => {
            // Messages name step inputs; here they are flags.
            let message = err.message.replace(
                &format!("input `{}`", err.input),
                &format!("`{}`", flag(&err.input)),
            );
            eprintln!("error: {message}");
            if let Some(hint) = err.hint {
                eprintln!("  = help: {hint}");
            }
            return Ok(ExitCode::Usage);
        }
    };
    let live = std::io::stderr().is_terminal();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let progress = |p: Progress| {
        if live {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", progress_line(&p));
            let _ = err.flush();
        }
    };
    let outcome = runtime.block_on(bench::run(&config, &progress));
    if live {
        eprint!("\r\x1b[2K");
    }
    let (result, failure) = match outcome {
        Ok(result) => (result, None),
        Err(BenchError::TooManyErrors { message, result }) => (*result, Some(message)),
        Err(err) => {
            eprintln!("error: {err}");
            if let Some(hint) = err.hint() {
                eprintln!("  = help: {hint}");
            }
            return Ok(ExitCode::Failure);
        }
    };
    print_result(&result, args)?;
    if let Some(message) = failure {
        eprintln!("error: {message}");
        eprintln!("  = help: raise `--max-error-rate` to accept some failures");
        return Ok(ExitCode::Failure);
    }
    Ok(ExitCode::Success)
}

fn print_result(result: &BenchResult, args: &Args) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(&result.to_json())?
        )?;
    } else {
        write!(stdout, "{}", bench::report::render_table(result))?;
    }
    if let Some(path) = &args.save_result {
        let written = result
            // No secrets reach `gpuflow bench`: nothing to mask.
            .write_files(path, &crate::events::Masker::default())
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))?;
        for p in written {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// `concurrency 8 · run 2/3 · 120/200 requests · 1 error · 5321.4 tok/s · 12.3s`
fn progress_line(p: &Progress) -> String {
    let mut parts = vec![p.level.clone()];
    if p.levels > 1 {
        parts[0] = format!("{} ({}/{})", p.level, p.level_index + 1, p.levels);
    }
    parts.push(format!("run {}/{}", p.run, p.runs));
    let total = p.total.map_or_else(String::new, |t| format!("/{t}"));
    if p.warmup {
        parts.push(format!("warm-up {}{total}", p.done));
        return parts.join(" · ");
    }
    parts.push(format!("{}{total} requests", p.done));
    if p.errors > 0 {
        parts.push(format!(
            "{} error{}",
            p.errors,
            if p.errors == 1 { "" } else { "s" }
        ));
    }
    parts.push(format!("{:.1} tok/s", p.output_tok_s));
    parts.push(format!("{:.1}s", p.elapsed.as_secs_f64()));
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_progress_line_says_where_it_is() {
        let p = Progress {
            level: "concurrency 8".into(),
            level_index: 1,
            levels: 3,
            run: 2,
            runs: 3,
            warmup: false,
            done: 120,
            total: Some(200),
            errors: 1,
            elapsed: Duration::from_millis(12_300),
            output_tok_s: 5321.44,
        };
        assert_eq!(
            progress_line(&p),
            "concurrency 8 (2/3) · run 2/3 · 120/200 requests · 1 error · 5321.4 tok/s · 12.3s"
        );
    }
}
