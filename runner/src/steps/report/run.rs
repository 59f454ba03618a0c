//! The `report` built-in: renders the current run's report from the results store and the
//! run's log folder, writes it, and with `commit:` commits it to a results branch
//! (docs/reports.md). The report itself is [`crate::report`]'s; this file only maps the step's
//! inputs onto it and runs the blocking work (SQLite, git) off the async runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;

use crate::compare::StepInputs;
use crate::events::Masker;
use crate::events::{EventKind, ReportFile, Stream};
use crate::expr::Value;
use crate::report::campaign::{self, CampaignData, CampaignOptions, CampaignSource};
use crate::report::{
    BranchFile, DEFAULT_BRANCH, Format, ReportData, ReportSource, ResultsBranch, Template,
    commit_report, report_files, write_files,
};
use crate::steps::{Outputs, StepCall, StepError};
use crate::store::{ResultStore, now_ms};

/// The step's inputs, checked.
struct ReportInputs {
    template: Option<PathBuf>,
    format: Format,
    output: Option<PathBuf>,
    title: Option<String>,
    /// `(branch, push)` when `commit:` is set.
    commit: Option<(String, Option<String>)>,
    /// `campaign:`: the job whose campaign report this is, and its metrics.
    campaign: Option<(String, CampaignOptions)>,
    /// The run's secrets, masked in every file written and committed.
    masker: Arc<Masker>,
}

/// Runs the step; says in its log where the report went (and the commit), and returns its
/// outputs.
pub async fn run(call: StepCall<'_, '_>) -> Result<Outputs, StepError> {
    let StepCall {
        inputs,
        host,
        job,
        step,
        ..
    } = call;
    let step = step.key;
    let mut parsed = parse(inputs)?;
    parsed.masker = host.masker().clone();
    let workspace = host.workspace().to_path_buf();
    let run_id = host.run_id().to_owned();
    let log_dir = host.log_dir().to_path_buf();
    // The store the run's benchmark steps write to (`--store`, as the worker runs triggered
    // runs), not the workspace's default one: that may not exist, or hold other runs.
    let store_path = host.store().to_path_buf();
    let (outputs, said) = tokio::task::spawn_blocking(move || {
        report(&parsed, &workspace, &store_path, &run_id, &log_dir)
    })
    .await
    .map_err(|e| format!("the report step stopped unexpectedly: {e}"))??;
    // A step that says only "success" leaves the reader to guess where the report is.
    for text in said {
        host.emit(EventKind::LogLine {
            job: job.clone(),
            step: Some(step.to_string()),
            container: None,
            stream: Stream::Runner,
            text,
        });
    }
    if let Some(path) = outputs.get("path") {
        host.emit(EventKind::ReportWritten(ReportFile {
            job: job.clone(),
            step: step.to_string(),
            path: path.clone(),
            commit: outputs.get("commit").cloned(),
        }));
    }
    Ok(outputs)
}

fn parse(inputs: &IndexMap<String, Value>) -> Result<ReportInputs, String> {
    let text = |k: &str| {
        inputs
            .get(k)
            .map(Value::to_expr_string)
            .filter(|s| !s.is_empty())
    };
    let format = match text("format") {
        None => Format::Markdown,
        Some(f) => Format::parse(&f)
            .ok_or_else(|| format!("`format` is `{f}`: use `markdown` or `html`"))?,
    };
    let commit = match inputs.get("commit") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some((DEFAULT_BRANCH.to_string(), None)),
        Some(Value::String(s)) if s == "true" => Some((DEFAULT_BRANCH.to_string(), None)),
        Some(Value::String(s)) if s == "false" || s.is_empty() => None,
        Some(Value::Object(map)) => {
            let field = |k: &str| {
                map.iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case(k))
                    .map(|(_, v)| v.to_expr_string())
                    .filter(|s| !s.is_empty())
            };
            if let Some((unknown, _)) = map
                .iter()
                .find(|(k, _)| !["branch", "push"].contains(&k.to_ascii_lowercase().as_str()))
            {
                return Err(format!(
                    "`commit` has no field `{unknown}`: it takes `branch` and `push`"
                ));
            }
            Some((
                field("branch").unwrap_or_else(|| DEFAULT_BRANCH.to_string()),
                field("push"),
            ))
        }
        Some(other) => {
            return Err(format!(
                "`commit` is {} `{}`: give `{{branch: gpuflow-results, push: origin}}` or `true`",
                other.kind(),
                other.to_expr_string()
            ));
        }
    };
    let latency_percentile = match text("latency-percentile") {
        None => None,
        Some(p) => match p.parse::<f64>() {
            Ok(n) if n > 0.0 && n <= 100.0 => Some(n),
            _ => {
                return Err(format!(
                    "`latency-percentile` is `{p}`: give a percentile from 1 to 100 (`99`)"
                ));
            }
        },
    };
    let campaign = text("campaign").map(|job| {
        let options = CampaignOptions {
            throughput: text("throughput"),
            latency: text("latency"),
            latency_percentile,
        };
        (job, options)
    });
    Ok(ReportInputs {
        template: text("template").map(PathBuf::from),
        format,
        output: text("output").map(PathBuf::from),
        title: text("title"),
        commit,
        campaign,
        masker: Arc::default(),
    })
}

fn report(
    inputs: &ReportInputs,
    workspace: &Path,
    store_path: &Path,
    run_id: &str,
    log_dir: &Path,
) -> Result<(IndexMap<String, String>, Vec<String>), String> {
    let template = match &inputs.template {
        None => None,
        Some(path) => {
            let source = std::fs::read_to_string(workspace.join(path))
                .map_err(|e| format!("cannot read template `{}`: {e}", path.display()))?;
            Some(Template {
                name: path.display().to_string(),
                source,
            })
        }
    };
    if !store_path.is_file() {
        return Err(format!(
            "no results store at `{}`: put the `report` step after a `benchmark` step",
            store_path.display()
        ));
    }
    let store = ResultStore::open(store_path).map_err(|e| e.to_string())?;
    let rendered = match &inputs.campaign {
        None => render_run(inputs, &store, run_id, log_dir, template.as_ref())?,
        Some((job, options)) => render_campaign(
            inputs,
            &store,
            run_id,
            log_dir,
            (job, options),
            template.as_ref(),
        )?,
    };
    // And every file as it is written: the template's own text is not data.
    let masker = &inputs.masker;
    let files: Vec<BranchFile> = rendered
        .files
        .into_iter()
        .map(|f| match String::from_utf8(f.contents) {
            Ok(text) => BranchFile {
                contents: masker.mask(&text).into_bytes(),
                path: f.path,
            },
            Err(e) => BranchFile {
                contents: e.into_bytes(),
                path: f.path,
            },
        })
        .collect();
    let out = match &inputs.output {
        Some(p) => workspace.join(p),
        None => rendered.folder,
    };
    write_files(&out, &files)
        .map_err(|e| format!("cannot write the report to `{}`: {e}", out.display()))?;
    let path = out.join(format!("report.{}", inputs.format.extension()));
    let mut said = vec![format!("wrote the report `{}`", path.display())];
    let mut outputs = IndexMap::from([("path".to_string(), path.display().to_string())]);
    if let Some((branch, push)) = &inputs.commit {
        let committed = ResultsBranch::new(workspace, branch)
            .map(|b| b.push_to(push.clone()))
            .and_then(|b| match &rendered.data {
                Data::Run(data) => commit_report(&b, data, &files),
                Data::Campaign(data) => campaign::commit_campaign(&b, data, &files),
            })
            .map_err(|e| match e.hint() {
                Some(h) => format!("{e} (help: {h})"),
                None => e.to_string(),
            })?;
        let under = match &rendered.data {
            Data::Run(_) => format!("runs/{run_id}/"),
            Data::Campaign(data) => format!("runs/{run_id}/{}/", campaign::folder(&data.job)),
        };
        said.push(format!(
            "committed {} to `{}` under `{under}`",
            &committed.commit[..12.min(committed.commit.len())],
            committed.reference
        ));
        if let Some(remote) = &committed.pushed_to {
            said.push(format!("pushed `{}` to {remote}", committed.reference));
        }
        outputs.insert("commit".to_string(), committed.commit);
    }
    Ok((outputs, said))
}

/// A report rendered, before it is masked and written: its files, the folder they go to
/// unless `output` names another, and its data (the commit's message is made of it).
struct Rendered {
    files: Vec<BranchFile>,
    folder: PathBuf,
    data: Data,
}

enum Data {
    Run(Box<ReportData>),
    Campaign(Box<CampaignData>),
}

/// The campaign report of `job`, a job of this run.
fn render_campaign(
    inputs: &ReportInputs,
    store: &ResultStore,
    run_id: &str,
    log_dir: &Path,
    (job, options): (&str, &CampaignOptions),
    template: Option<&Template>,
) -> Result<Rendered, String> {
    let source = CampaignSource {
        store,
        run_id,
        run_dir: log_dir,
        job,
        options: options.clone(),
        title: inputs.title.clone(),
        now_ms: now_ms(),
    };
    let data = campaign::gather(&source).map_err(|e| match e.hint() {
        Some(h) => format!("{e} (help: {h})"),
        None => e.to_string(),
    })?;
    // Masked before it is rendered, as the run's report is (`render_run` says why).
    let data = mask_data(&inputs.masker, data)?;
    let files = campaign::campaign_files(&data, inputs.format, template).map_err(|e| {
        format!("{e} (help: docs/reports.md lists the variables and filters a template can use)")
    })?;
    Ok(Rendered {
        files,
        folder: log_dir.join(campaign::folder(job)),
        data: Data::Campaign(Box::new(data)),
    })
}

/// The run's own report.
fn render_run(
    inputs: &ReportInputs,
    store: &ResultStore,
    run_id: &str,
    log_dir: &Path,
    template: Option<&Template>,
) -> Result<Rendered, String> {
    let data = ReportData::gather(&ReportSource {
        store,
        run_id,
        run_dir: Some(log_dir),
        compare: StepInputs::default(),
        title: inputs.title.clone(),
        now_ms: now_ms(),
    })
    .map_err(|e| match e.hint() {
        Some(h) => format!("{e} (help: {h})"),
        None => e.to_string(),
    })?;
    // What the store and the logs hold was masked when written, but the report also shows the
    // step's own inputs (a title) and may outlive the run on a results branch. The data is
    // masked before it is rendered: a template escapes (HTML's `&amp;`), quotes (`md_cell`'s
    // `\|`) or cuts (`truncate`) what it shows, and what it makes of a secret is no longer the
    // secret the masker looks for. The commit's message and `record.json` come from it too.
    let data = mask_data(&inputs.masker, data)?;
    let files = report_files(&data, inputs.format, template).map_err(|e| {
        format!("{e} (help: docs/reports.md lists the variables and filters a template can use)")
    })?;
    Ok(Rendered {
        files,
        folder: log_dir.join("report"),
        data: Data::Run(Box::new(data)),
    })
}

/// `data` with every text in it masked. Unlike [`Masker::mask_serde`], data that does not
/// read back once masked is an error, never the unmasked data: a report is not written then.
fn mask_data<T>(masker: &Masker, data: T) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut json =
        serde_json::to_value(&data).map_err(|e| format!("cannot mask the report's data: {e}"))?;
    if !masker.mask_json(&mut json) {
        return Ok(data);
    }
    serde_json::from_value(json).map_err(|e| format!("cannot mask the report's data: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, Value)]) -> IndexMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn commit_takes_a_map_or_true() {
        let p = parse(&map(&[(
            "commit",
            Value::Object(map(&[("branch", Value::String("res".into()))])),
        )]))
        .unwrap();
        assert_eq!(p.commit, Some(("res".into(), None)));
        let p = parse(&map(&[("commit", Value::Bool(true))])).unwrap();
        assert_eq!(p.commit, Some((DEFAULT_BRANCH.into(), None)));
        let p = parse(&map(&[])).unwrap();
        assert_eq!(p.commit, None);
    }

    #[test]
    fn campaign_inputs_are_read_and_a_bad_percentile_refused() {
        let p = parse(&map(&[
            ("campaign", Value::String("tune".into())),
            ("latency", Value::String("tpot_ms".into())),
            ("latency-percentile", Value::Number(99.0)),
        ]))
        .unwrap();
        let (job, options) = p.campaign.unwrap();
        assert_eq!(job, "tune");
        assert_eq!(options.latency.as_deref(), Some("tpot_ms"));
        assert_eq!(options.latency_percentile, Some(99.0));
        assert_eq!(options.throughput, None);
        assert!(parse(&map(&[])).unwrap().campaign.is_none());
        let err = parse(&map(&[("latency-percentile", Value::Number(0.0))]))
            .err()
            .unwrap();
        assert!(err.contains("from 1 to 100"), "{err}");
    }

    #[test]
    fn unknown_commit_fields_and_formats_are_refused() {
        let err = parse(&map(&[(
            "commit",
            Value::Object(map(&[("brnch", Value::String("x".into()))])),
        )]))
        .err()
        .unwrap();
        assert!(err.contains("`brnch`"), "{err}");
        let err = parse(&map(&[("format", Value::String("pdf".into()))]))
            .err()
            .unwrap();
        assert!(err.contains("`pdf`"), "{err}");
    }

    /// The rendered forms of a secret (HTML-escaped, a Markdown cell's `\|`, cut short by a
    /// user's template) are not the secret: the data is masked before rendering.
    #[test]
    fn a_secret_is_masked_before_the_report_is_rendered() {
        let secret = "tok&en<|x>1";
        let masker = Masker::new([secret.to_string()]);
        let mut data = ReportData::empty_for_tests("r-1");
        data.title = format!("perf {secret}");
        let data = mask_data(&masker, data).unwrap();
        assert_eq!(data.title, "perf ***");
        let cut = Template {
            name: "t.md".into(),
            source: "{{ title | md_cell }} {{ title | truncate(length=8) }}".into(),
        };
        for (format, template) in [
            (Format::Html, None),
            (Format::Markdown, None),
            (Format::Markdown, Some(&cut)),
        ] {
            for f in report_files(&data, format, template).unwrap() {
                let text = String::from_utf8(f.contents).unwrap();
                assert!(
                    !text.contains("tok&") && !text.contains("tok&amp;en") && !text.contains("en<"),
                    "{}: {text}",
                    f.path
                );
            }
        }
    }

    #[test]
    fn a_missing_store_says_where_the_step_belongs() {
        let dir = tempfile::tempdir().unwrap();
        let inputs = parse(&map(&[])).unwrap();
        let store = crate::store::default_path(dir.path());
        let err = report(&inputs, dir.path(), &store, "r", &dir.path().join("runs/r")).unwrap_err();
        assert!(err.contains("after a `benchmark` step"), "{err}");
    }
}
