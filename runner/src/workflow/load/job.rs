//! Reading one job: its keys, `gpus`, `strategy.matrix`, `container`/`services`, and its
//! steps (read by `step.rs`), with the per-job check that step ids are unique.

use indexmap::IndexMap;

use super::reader::{Reader, is_expression, to_value};
use crate::diag::{Span, Spanned, did_you_mean, join_quoted};
use crate::workflow::model::{
    Container, GITHUB_ONLY_JOB_KEYS, GpuConstraint, GpuDevices, GpuRequest, Job, Matrix, MatrixDim,
    MatrixDims, MatrixRow, Strategy,
};
use crate::workflow::yaml::{Node, NodeKind};

const JOB_KEYS: &[&str] = &[
    "name",
    "needs",
    "if",
    "runs-on",
    "gpus",
    "env",
    "strategy",
    "timeout-minutes",
    "continue-on-error",
    "outputs",
    "container",
    "services",
    "defaults",
    "steps",
];

impl Reader {
    pub fn job(
        &mut self,
        id: &Spanned<String>,
        node: &Node,
        ctx: &mut super::LoadContext<'_>,
    ) -> Option<Job> {
        let entries = self.map(&id.value, node, "a job (a mapping with `steps`)")?;
        if entries.iter().any(|e| e.key.value == "uses") {
            let e = entries.iter().find(|e| e.key.value == "uses")?;
            let d = self
                .err(e.key.span, "reusable workflows (`uses:` on a job) are not supported")
                .label("a job-level `uses:`")
                .hint("put the steps in a composite action (`actions/<name>/action.yml`) and use it from a step");
            self.report(d);
            return None;
        }
        self.check_keys(entries, JOB_KEYS, GITHUB_ONLY_JOB_KEYS, "a job");
        let mut job = Job {
            id: id.clone(),
            span: node.span,
            name: None,
            needs: Vec::new(),
            condition: None,
            runs_on: Vec::new(),
            gpus: None,
            env: IndexMap::new(),
            strategy: None,
            timeout_minutes: None,
            continue_on_error: None,
            outputs: IndexMap::new(),
            container: None,
            services: IndexMap::new(),
            defaults: Default::default(),
            steps: Vec::new(),
        };
        let mut steps_seen = false;
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "name" => job.name = self.optional_string("name", v),
                "needs" => {
                    job.needs = self.string_list("needs", v, "a job id or a list of job ids")
                }
                "if" => job.condition = self.optional_string("if", v),
                "runs-on" => job.runs_on = self.runs_on(v),
                "gpus" => job.gpus = self.gpus("gpus", v),
                "env" => job.env = self.env("env", v),
                "strategy" => job.strategy = self.strategy(v),
                "timeout-minutes" => {
                    job.timeout_minutes =
                        self.positive_or_expr("timeout-minutes", v, "minutes", false)
                }
                "continue-on-error" => {
                    job.continue_on_error = self.bool_or_expr("continue-on-error", v)
                }
                "outputs" => {
                    job.outputs =
                        self.string_map("outputs", v, "a mapping of output names to values")
                }
                "container" => job.container = self.container("container", v),
                "services" => {
                    if let Some(services) =
                        self.map("services", v, "a mapping of service names to containers")
                    {
                        for s in services {
                            if let Some(c) = self.container(&s.key.value, &s.value) {
                                job.services.insert(s.key.value.clone(), c);
                            }
                        }
                    }
                }
                "defaults" => job.defaults = self.defaults("defaults", v),
                "steps" => {
                    steps_seen = true;
                    job.steps = self.steps(&e.key, v, ctx);
                }
                _ => {}
            }
        }
        self.check_search_step(&job);
        if !steps_seen {
            let d = self
                .err(id.span, format!("job `{}` has no `steps`", id.value))
                .label("this job has nothing to run")
                .hint("add `steps:` with at least one `run:` or `uses:` step");
            self.report(d);
        }
        Some(job)
    }

    /// `runs-on`: a host name or label, a list of labels, or GitHub's `{group, labels}` form,
    /// read as its labels. gpuflow has no runner groups (hosts come from its host
    /// configuration), so `group` is accepted with a warning and ignored rather than refusing
    /// a workflow written for GitHub.
    fn runs_on(&mut self, node: &Node) -> Vec<Spanned<String>> {
        const EXPECTED: &str = "a host name, a list of labels or `{labels: [...]}`";
        let NodeKind::Map(entries) = &node.kind else {
            return self.string_list("runs-on", node, EXPECTED);
        };
        self.check_keys(entries, &["labels"], &["group"], "`runs-on`");
        entries
            .iter()
            .find(|e| e.key.value == "labels")
            .map(|e| self.string_list("runs-on.labels", &e.value, "a label or a list of labels"))
            .unwrap_or_default()
    }

    /// `steps:` of a job or action: a non-empty list, step ids unique.
    pub fn steps(
        &mut self,
        key: &Spanned<String>,
        node: &Node,
        ctx: &mut super::LoadContext<'_>,
    ) -> Vec<crate::workflow::model::Step> {
        let items = match &node.kind {
            NodeKind::Seq(items) => items.as_slice(),
            _ => {
                self.wrong_type("steps", node, "a list of steps");
                return Vec::new();
            }
        };
        if items.is_empty() {
            let d = self
                .err(key.span, "`steps` is empty")
                .label("no steps here")
                .hint("add at least one step, e.g. `- run: echo hello`");
            self.report(d);
        }
        let steps: Vec<_> = items.iter().filter_map(|n| self.step(n, ctx)).collect();
        let mut ids: IndexMap<&str, Span> = IndexMap::new();
        for step in &steps {
            let Some(id) = &step.id else { continue };
            if let Some(first) = ids.get(id.value.as_str()) {
                let d = self
                    .err(id.span, format!("duplicate step id `{}`", id.value))
                    .label("used again here")
                    .related(&self.file.clone(), *first, "first used here")
                    .hint("step ids must be unique within a job: rename one");
                self.report(d);
            } else {
                ids.insert(&id.value, id.span);
            }
        }
        steps
    }

    /// `gpus:`: `all`, a count, device ids, an expression, or `{count | ids, constraint}`.
    pub fn gpus(&mut self, key: &str, node: &Node) -> Option<GpuRequest> {
        let devices = match &node.kind {
            NodeKind::Null => return None,
            NodeKind::Map(entries) => {
                self.check_keys(entries, &["count", "ids", "constraint"], &[], "`gpus`");
                let count = entries.iter().find(|e| e.key.value == "count");
                let ids = entries.iter().find(|e| e.key.value == "ids");
                let constraint = entries
                    .iter()
                    .find(|e| e.key.value == "constraint")
                    .and_then(
                        |e| match e.value.as_str().and_then(GpuConstraint::from_name) {
                            Some(c) => Some(Spanned::new(c, e.value.span)),
                            None => {
                                let d = self
                                    .err(
                                        e.value.span,
                                        format!("unknown GPU constraint `{}`", e.value.text),
                                    )
                                    .label("not a constraint")
                                    .maybe_hint(did_you_mean(&e.value.text, GpuConstraint::NAMES))
                                    .note(format!(
                                        "constraints are {}",
                                        join_quoted(GpuConstraint::NAMES, "and")
                                    ));
                                self.report(d);
                                None
                            }
                        },
                    );
                let devices = match (count, ids) {
                    (Some(c), None) => self.gpu_devices(key, &c.value, false)?,
                    (None, Some(i)) => match &i.value.kind {
                        NodeKind::Seq(_) => self.gpu_devices(key, &i.value, true)?,
                        _ => {
                            self.wrong_type("ids", &i.value, "a list of device ids");
                            return None;
                        }
                    },
                    (Some(c), Some(i)) => {
                        let d = self
                            .err(i.key.span, "`gpus` takes `count` or `ids`, not both")
                            .label("`ids` here")
                            .related(&self.file.clone(), c.key.span, "`count` here")
                            .hint("keep `ids` to pick devices, or `count` to take any free ones");
                        self.report(d);
                        return None;
                    }
                    (None, None) => {
                        let d = self
                            .err(node.span, "`gpus` needs `count` or `ids`")
                            .label("neither `count` nor `ids` here")
                            .hint("add `count: 2` (any two free GPUs) or `ids: [0, 1]`");
                        self.report(d);
                        return None;
                    }
                };
                return Some(GpuRequest {
                    span: node.span,
                    devices,
                    constraint,
                });
            }
            _ => self.gpu_devices(key, node, true)?,
        };
        Some(GpuRequest {
            span: node.span,
            devices,
            constraint: None,
        })
    }

    /// `allow_list`: whether device ids may be listed (`gpus:` and `ids:`, not `count:`).
    fn gpu_devices(&mut self, key: &str, node: &Node, allow_list: bool) -> Option<GpuDevices> {
        let expected = if allow_list {
            "`all`, a number of GPUs, or a list of device ids"
        } else {
            "`all` or a number of GPUs"
        };
        match &node.kind {
            NodeKind::Int(n) if *n >= 1 => {
                u32::try_from(*n).ok().map(GpuDevices::Count).or_else(|| {
                    let d = self
                        .err(node.span, format!("`{key}` asks for too many GPUs: `{n}`"))
                        .label("too large");
                    self.report(d);
                    None
                })
            }
            NodeKind::Int(n) => {
                let d = self
                    .err(
                        node.span,
                        format!("`{key}` must be at least 1, found `{n}`"),
                    )
                    .label("not a positive number of GPUs")
                    .hint(format!("remove `{key}:` to run without GPUs"));
                self.report(d);
                None
            }
            NodeKind::String(s) if s == "all" => Some(GpuDevices::All),
            NodeKind::String(s) if is_expression(s) => {
                Some(GpuDevices::Expr(Spanned::new(s.clone(), node.content)))
            }
            NodeKind::Seq(items) if allow_list => {
                if items.is_empty() {
                    let d = self
                        .err(node.span, format!("`{key}` lists no devices"))
                        .label("empty list")
                        .hint(format!(
                            "list device ids (`[0, 1]`), or remove `{key}:` to run without GPUs"
                        ));
                    self.report(d);
                    return None;
                }
                let mut ids: Vec<Spanned<String>> = Vec::new();
                for item in items {
                    let ok = match &item.kind {
                        NodeKind::Int(i) => *i >= 0,
                        NodeKind::String(s) => is_device_id(s) || is_expression(s),
                        _ => false,
                    };
                    if !ok {
                        let d = self
                            .err(item.span, format!("`{}` is not a GPU device id", item.text))
                            .label("expected an index (`0`) or a UUID (`GPU-…`, `MIG-…`)")
                            .hint("`nvidia-smi -L` lists the indexes and UUIDs of a host's GPUs");
                        self.report(d);
                        continue;
                    }
                    if let Some(first) = ids.iter().find(|i| i.value == item.text) {
                        let d = self
                            .err(
                                item.span,
                                format!("device `{}` is listed twice in `{key}`", item.text),
                            )
                            .label("listed again here")
                            .related(&self.file.clone(), first.span, "first listed here");
                        self.report(d);
                        continue;
                    }
                    ids.push(Spanned::new(item.text.clone(), item.content));
                }
                Some(GpuDevices::Ids(ids))
            }
            NodeKind::String(s) => {
                let d = self
                    .err(
                        node.span,
                        format!("`{key}` expects {expected}, found `{s}`"),
                    )
                    .label(format!("expected {expected}"))
                    .maybe_hint(
                        (allow_list && s.contains(','))
                            .then(|| format!("write device ids as a list: `{key}: [{s}]`")),
                    );
                self.report(d);
                None
            }
            _ => {
                self.wrong_type(key, node, expected);
                None
            }
        }
    }

    fn strategy(&mut self, node: &Node) -> Option<Strategy> {
        let entries = self.map(
            "strategy",
            node,
            "a mapping with `matrix`, `fail-fast`, `max-parallel`, `search`",
        )?;
        self.check_keys(
            entries,
            &["matrix", "fail-fast", "max-parallel", "search"],
            &[],
            "`strategy`",
        );
        let mut s = Strategy::default();
        let mut search_at = Span::default();
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "matrix" => s.matrix = self.matrix(&e.key, v),
                "fail-fast" => s.fail_fast = self.bool_or_expr("fail-fast", v),
                "max-parallel" => {
                    s.max_parallel = self.positive_or_expr("max-parallel", v, "jobs", true)
                }
                "search" => {
                    s.search = self.search(v);
                    search_at = e.key.span;
                }
                _ => {}
            }
        }
        if let Some(search) = &s.search {
            self.check_search_matrix(search, s.matrix.as_ref(), search_at);
        }
        Some(s)
    }

    fn matrix(&mut self, key: &Spanned<String>, node: &Node) -> Option<Matrix> {
        if let NodeKind::String(s) = &node.kind
            && is_expression(s)
        {
            return Some(Matrix::Expr(Spanned::new(s.clone(), node.content)));
        }
        if node.is_null() {
            return None;
        }
        let entries = self.map(
            "matrix",
            node,
            "a mapping of dimensions to lists of values, or an expression",
        )?;
        let mut m = MatrixDims::default();
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "include" | "exclude" => {
                    let rows = self.matrix_rows(&e.key.value, v);
                    if e.key.value == "include" {
                        m.include = rows;
                    } else {
                        m.exclude = rows;
                    }
                }
                dim => {
                    let value = match &v.kind {
                        NodeKind::String(s) if is_expression(s) => {
                            MatrixDim::Expr(Spanned::new(s.clone(), v.content))
                        }
                        NodeKind::Seq(items) if items.is_empty() => {
                            let d = self
                                .err(v.span, format!("matrix dimension `{dim}` has no values"))
                                .label("empty list")
                                .hint("give at least one value, or remove the dimension");
                            self.report(d);
                            continue;
                        }
                        NodeKind::Seq(items) => {
                            MatrixDim::Values(items.iter().map(|n| to_value(n, false)).collect())
                        }
                        _ => {
                            let d = self
                                .err(
                                    v.span,
                                    format!(
                                        "matrix dimension `{dim}` must be a list, found {}",
                                        v.kind_name()
                                    ),
                                )
                                .label("expected a list of values")
                                .maybe_hint(
                                    v.is_scalar()
                                        .then(|| format!("write `{dim}: [{}]`", v.text)),
                                );
                            self.report(d);
                            continue;
                        }
                    };
                    m.dims.insert(dim.to_owned(), Spanned::new(value, v.span));
                }
            }
        }
        // Only when nothing was written: a dimension that was wrong is already reported.
        if entries.iter().all(|e| e.key.value == "exclude") {
            let d = self
                .err(key.span, "the matrix has no dimensions")
                .label("no values to combine")
                .hint("add a dimension (`gpu: [h100, b200]`) or an `include:` list");
            self.report(d);
            return None;
        }
        Some(Matrix::Dims(m))
    }

    fn matrix_rows(&mut self, key: &str, node: &Node) -> Vec<Spanned<MatrixRow>> {
        let Some(items) = node.as_seq() else {
            self.wrong_type(key, node, "a list of mappings");
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| match item.as_map() {
                Some(entries) => Some(Spanned::new(
                    entries
                        .iter()
                        .map(|e| (e.key.value.clone(), to_value(&e.value, false)))
                        .collect(),
                    item.span,
                )),
                None => {
                    let d = self
                        .err(
                            item.span,
                            format!(
                                "each `{key}` entry must be a mapping, found {}",
                                item.kind_name()
                            ),
                        )
                        .label("expected `dimension: value` pairs");
                    self.report(d);
                    None
                }
            })
            .collect()
    }

    fn container(&mut self, key: &str, node: &Node) -> Option<Container> {
        if node.is_null() {
            return None;
        }
        if let Some(image) = node.scalar_string() {
            return Some(Container {
                image,
                env: IndexMap::new(),
                ports: Vec::new(),
                volumes: Vec::new(),
                options: None,
            });
        }
        let entries = self.map(key, node, "an image name or a mapping with `image`")?;
        self.check_keys(
            entries,
            &["image", "env", "ports", "volumes", "options"],
            &["credentials"],
            "a container",
        );
        let mut image = None;
        let mut c = Container {
            image: Spanned::default(),
            env: IndexMap::new(),
            ports: Vec::new(),
            volumes: Vec::new(),
            options: None,
        };
        for e in entries {
            let v = &e.value;
            match e.key.value.as_str() {
                "image" => image = self.string("image", v),
                "env" => c.env = self.env("env", v),
                "ports" => c.ports = self.string_list("ports", v, "a list of ports"),
                "volumes" => c.volumes = self.string_list("volumes", v, "a list of volumes"),
                "options" => c.options = self.optional_string("options", v),
                _ => {}
            }
        }
        match image {
            Some(i) => {
                c.image = i;
                Some(c)
            }
            None => {
                if !entries.iter().any(|e| e.key.value == "image") {
                    let d = self
                        .err(node.span, format!("`{key}` needs an `image`"))
                        .label("no `image:` here")
                        .hint("add `image: <name>`");
                    self.report(d);
                }
                None
            }
        }
    }
}

/// A GPU index (`0`), UUID (`GPU-8a1…`) or MIG device (`MIG-…`).
fn is_device_id(s: &str) -> bool {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        || ((s.starts_with("GPU-") || s.starts_with("MIG-")) && s.len() > 4)
}
