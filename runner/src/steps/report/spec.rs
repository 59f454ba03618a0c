//! `report`: renders a report of the run and optionally commits it to a results branch.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "report",
    summary: "Render a Markdown or HTML report of the run (the verdicts its `compare-to-baseline` steps gave, metric tables, charts, environment) or the campaign report of one of its jobs, say in its log where it is, and optionally commit it to a results branch.",
    inputs: &[
        InputSpec {
            name: "template",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "A Tera template in the repository (`reports/eagle3.md.tera`). Defaults to the built-in template.",
        },
        InputSpec {
            name: "format",
            ty: InputType::Enum(&["markdown", "html"]),
            required: false,
            default: Some("markdown"),
            doc: "The output format.",
        },
        InputSpec {
            name: "output",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The folder to write the report, its charts and `record.json` into, relative to the workspace. Defaults to `.gpuflow/runs/<run id>/report/`.",
        },
        InputSpec {
            name: "title",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The report's title. Defaults to `<workflow>: <run id>`.",
        },
        InputSpec {
            name: "commit",
            ty: InputType::Map,
            required: false,
            default: None,
            doc: "Commit the report and a JSON record under `runs/<run id>/` on a branch without touching the work tree, index or HEAD: `{branch: gpuflow-results, push: origin}` (both optional; `{}` takes the defaults). See docs/reports.md.",
        },
        InputSpec {
            name: "campaign",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "A job of this run (one that ran before, through `needs`): render its campaign report instead — each matrix cell's server key, status and metrics with intervals, the best configuration, a throughput-latency Pareto chart and the loading saved by reusing servers (docs/campaigns.md). Written to `.gpuflow/runs/<run id>/campaign-<job>/`, committed under `runs/<run id>/campaign-<job>/`.",
        },
        InputSpec {
            name: "throughput",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "With `campaign`: the throughput metric, up the chart and what makes a cell best without a search. Defaults to `output_throughput`, else `output_tok_s`.",
        },
        InputSpec {
            name: "latency",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "With `campaign`: the latency metric, across the chart. Defaults to `ttft_ms`.",
        },
        InputSpec {
            name: "latency-percentile",
            ty: InputType::Number,
            required: false,
            default: None,
            doc: "With `campaign`: the percentile of the latency's samples the chart shows (`99`). Defaults to 50.",
        },
    ],
    outputs: &[
        OutputSpec {
            name: "path",
            doc: "Where the report was written.",
        },
        OutputSpec {
            name: "commit",
            doc: "The commit holding the report, when `commit` is set.",
        },
    ],
    shell_inputs: &[],
    example: r"- uses: report
  with:
    template: reports/eagle3.md.tera
    commit:
      branch: gpuflow-results
",
};
