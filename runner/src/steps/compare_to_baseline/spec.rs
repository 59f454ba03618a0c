//! `compare-to-baseline`: judges this run's metrics against a baseline with an effect-size
//! threshold and a statistical test.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "compare-to-baseline",
    summary: "Compare the metrics an earlier `benchmark` step of the job recorded with a baseline from the results store (pinned, previous run, a rolling window or a fixed number) and give a verdict, explained in the log; fail on a regression.",
    inputs: &[
        InputSpec {
            name: "metric",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The metric to compare (`output_tok_s`). Either this or `metrics`.",
        },
        InputSpec {
            name: "metrics",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Several metrics at once (`[output_tok_s, ttft_ms, itl_ms]`).",
        },
        InputSpec {
            name: "from",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The id of the `benchmark` step of this job whose recorded result is compared. Defaults to the last `benchmark` step before this one.",
        },
        InputSpec {
            name: "baseline",
            ty: InputType::String,
            required: false,
            default: Some("window"),
            doc: "What to compare with: a pinned baseline's name (`gpuflow baseline set`), `previous` (the last comparable run), `window` (the last `window` comparable runs) or a fixed value (`89.5`).",
        },
        InputSpec {
            name: "window",
            ty: InputType::Integer,
            required: false,
            default: Some("10"),
            doc: "How many past runs `baseline: window` uses.",
        },
        InputSpec {
            name: "tolerance",
            ty: InputType::Percent,
            required: false,
            default: Some("5%"),
            doc: "The smallest change that counts (widened when the baseline is noisy).",
        },
        InputSpec {
            name: "direction",
            ty: InputType::Enum(&["higher", "lower"]),
            required: false,
            default: None,
            doc: "Whether higher or lower is better. Defaults from the metric's unit.",
        },
        InputSpec {
            name: "fail-on",
            ty: InputType::Enum(&["regression", "inconclusive", "never"]),
            required: false,
            default: Some("regression"),
            doc: "Which verdicts fail the step: `regression`; `inconclusive` (a regression, an inconclusive or an incomparable result: anything that is not a clear pass); or `never` (report only). `no-baseline` never fails: a series has to start somewhere.",
        },
        InputSpec {
            name: "allow-incomparable",
            ty: InputType::Bool,
            required: false,
            default: Some("false"),
            doc: "Compare even when the environment fingerprints differ; the report lists the fields that do.",
        },
    ],
    outputs: &[
        OutputSpec {
            name: "verdict",
            doc: "`regression`, `improvement`, `unchanged`, `inconclusive`, `no-baseline` or `incomparable`; with several metrics, the most alarming one. Each metric of several also gets `<metric>-verdict`, `<metric>-ratio`, `<metric>-change-pct`, `<metric>-p-value`, `<metric>-threshold` and `<metric>-baseline`.",
        },
        OutputSpec {
            name: "ratio",
            doc: "Current over baseline (of the first metric when there are several).",
        },
        OutputSpec {
            name: "change-pct",
            doc: "The change in percent, signed so that positive is better.",
        },
        OutputSpec {
            name: "p-value",
            doc: "The statistical test's p-value, when one applies.",
        },
        OutputSpec {
            name: "threshold",
            doc: "The effect-size threshold used, in percent.",
        },
        OutputSpec {
            name: "baseline",
            doc: "What the run was compared with, in words.",
        },
    ],
    shell_inputs: &[],
    example: r"- uses: compare-to-baseline
  with:
    metric: output_tok_s
    baseline: nccl
    tolerance: 3%
    fail-on: regression
",
};
