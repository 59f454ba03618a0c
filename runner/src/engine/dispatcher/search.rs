//! `strategy.search`: instead of every cell, the dispatcher runs only the cells a search needs.
//!
//! `bisect: DIMENSION` runs the probes a binary search needs to find the boundary along one
//! matrix dimension between the cells that succeed and those that fail (a memory fraction
//! that still loads, a batch size still fast enough): ⌈log₂(n + 1)⌉ probes of n values, for
//! each combination of the other dimensions. A probe that fails is an answer, not a failure of
//! the run; the cells the search did not need end skipped. The boundary is the job's output
//! `best` (and `best-cell`).
//!
//! `maximize`/`minimize: METRIC` runs every cell in rounds of successive halving
//! ([`super::halving`]), each later round as new runs of the cells it keeps, with their
//! benchmark shortened in the early rounds; the winner is the job's `best` (its matrix values
//! as JSON), `best-cell` and `best-score`.

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;

use super::halving::{Cell, Halving, RoundEnd, Trial, number};
use crate::engine::executor::Shortened;
use crate::plan::PlannedJob;
use crate::workflow::model::{Job, Matrix, MatrixDim, SearchFind, Uses, Workflow};

/// What the dispatcher does with a ready run.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Start it (it is no search's, or it is the next probe).
    Run,
    /// Not yet: another probe of its search runs, or it is not the next one.
    Wait,
    /// Never: its search ended without it.
    Skip(String),
}

/// One binary search: the runs along the dimension, ordered so that the cells that succeed
/// come first (the listed order for `largest`, reversed for `smallest`).
struct Line {
    job_id: String,
    dimension: String,
    find: SearchFind,
    runs: Vec<usize>,
    values: Vec<String>,
    /// The last position known to succeed (`-1`: none yet).
    ok_upto: isize,
    /// The first position known to fail (`runs.len()`: none yet).
    fails_from: isize,
    /// Each probe's value, and why it failed (`None`: it succeeded).
    probes: Vec<(String, Option<String>)>,
}

impl Line {
    fn done(&self) -> bool {
        self.fails_from - self.ok_upto <= 1
    }

    fn next_probe(&self) -> usize {
        ((self.ok_upto + self.fails_from) / 2) as usize
    }
}

/// The cell a search found: its run, and the outputs the search gives the job (`best`, …).
pub(super) struct Best {
    pub run: usize,
    pub outputs: IndexMap<String, String>,
}

/// How a search ended, for the job's outputs and the log.
pub(super) struct Concluded {
    pub job_id: String,
    pub best: Option<Best>,
    pub summary: String,
}

/// What the end of a search's run led to.
pub(super) enum Answer {
    /// A round of a halving ended: the runs whose cells go on, each to be run again as a new
    /// run named with `label` (`round 2`).
    Round {
        summary: String,
        again: Vec<usize>,
        label: String,
    },
    Concluded(Concluded),
}

/// How a run of a search ended: why it failed (`None`: it succeeded), and what its scored
/// benchmark measured (for a halving).
pub(super) struct TrialEnd {
    pub failure: Option<String>,
    pub metrics: BTreeMap<String, f64>,
    pub measured: bool,
}

/// A halving, and the position (`3`) of the benchmark step it scores.
struct Optimisation {
    halving: Halving,
    step_key: String,
    /// Each cell's matrix values as JSON, by its planned run.
    values: HashMap<usize, String>,
    /// A later run → the planned run of its cell.
    planned_of: HashMap<usize, usize>,
}

/// Every search of the run.
#[derive(Default)]
pub(super) struct Searches {
    lines: Vec<Line>,
    /// Run index → (line, position in it).
    of_run: HashMap<usize, (usize, usize)>,
    optimisations: Vec<Optimisation>,
}

impl Searches {
    /// The searches of `runs`; `groups` is each run's server group.
    pub(super) fn new(wf: &Workflow, runs: &[PlannedJob], groups: &[Option<String>]) -> Self {
        let mut searches = Self::bisects(wf, runs);
        searches.optimisations = optimisations(wf, runs, groups);
        searches
    }

    fn bisects(wf: &Workflow, runs: &[PlannedJob]) -> Self {
        let mut searches = Self::default();
        let mut by_rest: HashMap<(String, String), usize> = HashMap::new();
        // Per line: (listed position, run, value as text).
        let mut cells: HashMap<usize, Vec<(usize, usize, String)>> = HashMap::new();
        for (i, planned) in runs.iter().enumerate() {
            let Some(job) = wf.jobs.get(&planned.job_id) else {
                continue;
            };
            let Some(strategy) = &job.strategy else {
                continue;
            };
            let (Some(search), Some(Matrix::Dims(dims))) = (&strategy.search, &strategy.matrix)
            else {
                continue;
            };
            let Some(dimension) = search.bisect.as_ref().map(|b| &b.value) else {
                continue;
            };
            let Some(MatrixDim::Values(listed)) = dims.dims.get(dimension).map(|d| &d.value) else {
                continue;
            };
            let Some(value) = planned.matrix.get(dimension) else {
                continue;
            };
            let listed: Vec<serde_json::Value> = listed
                .iter()
                .map(|v| crate::plan::to_json(&v.value))
                .collect();
            // A cell whose value is not listed (added by `include`) runs as usual.
            let Some(position) = listed.iter().position(|l| l == value) else {
                continue;
            };
            let mut rest = planned.matrix.clone();
            rest.shift_remove(dimension);
            let key = (
                planned.job_id.clone(),
                serde_json::to_string(&rest).unwrap_or_default(),
            );
            let line = *by_rest.entry(key).or_insert_with(|| {
                searches.lines.push(Line {
                    job_id: planned.job_id.clone(),
                    dimension: dimension.clone(),
                    find: search.find.as_ref().map(|f| f.value).unwrap_or_default(),
                    runs: Vec::new(),
                    values: Vec::new(),
                    ok_upto: -1,
                    fails_from: 0,
                    probes: Vec::new(),
                });
                searches.lines.len() - 1
            });
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            cells.entry(line).or_default().push((position, i, text));
        }
        for (index, line) in searches.lines.iter_mut().enumerate() {
            // In the listed order; `smallest` searches it reversed.
            let mut found = cells.remove(&index).unwrap_or_default();
            found.sort_by_key(|(position, _, _)| *position);
            if line.find == SearchFind::Smallest {
                found.reverse();
            }
            (line.runs, line.values) = found.into_iter().map(|(_, run, text)| (run, text)).unzip();
            line.fails_from = line.runs.len() as isize;
            for (position, &run) in line.runs.iter().enumerate() {
                searches.of_run.insert(run, (index, position));
            }
        }
        searches
    }

    /// Whether run `i` is a probe of a search (its failure answers the search).
    pub(super) fn is_probe(&self, i: usize) -> bool {
        self.of_run.contains_key(&i) || self.optimisation(i).is_some()
    }

    fn optimisation(&self, i: usize) -> Option<&Optimisation> {
        self.optimisations.iter().find(|o| o.halving.has_run(i))
    }

    fn optimisation_mut(&mut self, i: usize) -> Option<&mut Optimisation> {
        self.optimisations.iter_mut().find(|o| o.halving.has_run(i))
    }

    pub(super) fn decide(&mut self, i: usize) -> Decision {
        if let Some(o) = self.optimisation(i) {
            return match o.halving.needless(i) {
                Some(why) => Decision::Skip(why),
                None => Decision::Run,
            };
        }
        let Some(&(index, position)) = self.of_run.get(&i) else {
            return Decision::Run;
        };
        let line = &mut self.lines[index];
        if line.done() {
            return Decision::Skip(format!(
                "not needed: the bisect of `{}` found its boundary without this cell",
                line.dimension
            ));
        }
        // The next probe may have to wait for GPUs: it is asked again, and is still the next.
        if position != line.next_probe() {
            return Decision::Wait;
        }
        Decision::Run
    }

    /// How much shorter run `i`'s scored benchmark measures: an early round of a halving.
    pub(super) fn budget(&self, i: usize) -> Option<Shortened> {
        let o = self.optimisation(i)?;
        let fraction = o.halving.fraction();
        (fraction < 1.0).then(|| Shortened {
            step_key: o.step_key.clone(),
            fraction,
        })
    }

    /// The position (`3`) of the benchmark step that scores run `i`, for a halving's run.
    pub(super) fn scored_step(&self, i: usize) -> Option<&str> {
        self.optimisation(i).map(|o| o.step_key.as_str())
    }

    /// Run `i` of a search ended; what that led to.
    pub(super) fn record(&mut self, i: usize, end: TrialEnd) -> Option<Answer> {
        let Some(o) = self.optimisation_mut(i) else {
            return self.record_probe(i, end.failure).map(Answer::Concluded);
        };
        let trial = match end.failure {
            None => Trial::Measured(end.metrics),
            Some(why) => Trial::Failed {
                why: reason(&why),
                measured: end.measured,
            },
        };
        let round_end = o.halving.record(i, Ok(trial))?;
        Some(o.answer(round_end))
    }

    /// Run `i` of a halving ended without starting, for `why`; what that led to.
    pub(super) fn skipped(&mut self, i: usize, why: &str) -> Option<Answer> {
        let o = self.optimisation_mut(i)?;
        let round_end = o.halving.record(i, Err(why.to_string()))?;
        Some(o.answer(round_end))
    }

    /// Run `run` is the next round's run of the cell whose previous run was `previous`.
    pub(super) fn enlist(&mut self, previous: usize, run: usize) {
        if let Some(o) = self.optimisation_mut(previous) {
            o.halving.enlist(previous, run);
            let planned = o.planned_of.get(&previous).copied().unwrap_or(previous);
            o.planned_of.insert(run, planned);
        }
    }

    /// Probe `i` of a bisect ended: succeeded (`failure` is `None`), or infeasible for that
    /// reason; how its search ended, when this was its last.
    fn record_probe(&mut self, i: usize, failure: Option<String>) -> Option<Concluded> {
        let ok = failure.is_none();
        let &(index, position) = self.of_run.get(&i)?;
        let line = &mut self.lines[index];
        if ok {
            line.ok_upto = line.ok_upto.max(position as isize);
        } else {
            line.fails_from = line.fails_from.min(position as isize);
        }
        line.probes.push((line.values[position].clone(), failure));
        if !line.done() {
            return None;
        }
        let best = usize::try_from(line.ok_upto)
            .ok()
            .map(|p| (line.values[p].clone(), line.runs[p]));
        let tried: Vec<String> = line
            .probes
            .iter()
            .map(|(v, failure)| match failure {
                None => format!("{v} ok"),
                Some(why) if why.is_empty() => format!("{v} failed"),
                Some(why) => format!("{v} failed ({})", reason(why)),
            })
            .collect();
        let which = match line.find {
            SearchFind::Largest => "largest",
            SearchFind::Smallest => "smallest",
        };
        let outcome = match &best {
            Some((value, _)) => {
                format!("the {which} `{}` that succeeds is {value}", line.dimension)
            }
            None => format!("no value of `{}` succeeds", line.dimension),
        };
        Some(Concluded {
            job_id: line.job_id.clone(),
            summary: format!(
                "bisect of `{}`: {} → {outcome} ({} probes of {} cells)",
                line.dimension,
                tried.join(", "),
                line.probes.len(),
                line.runs.len()
            ),
            best: best.map(|(value, run)| Best {
                run,
                outputs: IndexMap::from([("best".to_string(), value)]),
            }),
        })
    }
}

/// Why a probe failed, in short: the cause a step recognised (`cause: CUDA out of memory: …`
/// in wait-for-health's message), else the message's first line; at most 120 characters.
fn reason(text: &str) -> String {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("cause: "))
        .map(|cause| cause.split(": `").next().unwrap_or(cause))
        .unwrap_or_else(|| text.lines().next().unwrap_or(""));
    match line.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

impl Optimisation {
    fn answer(&self, end: RoundEnd) -> Answer {
        match end {
            RoundEnd::Next {
                summary,
                again,
                round,
                ..
            } => Answer::Round {
                summary,
                again,
                label: format!("round {round}"),
            },
            RoundEnd::Done { summary, best } => Answer::Concluded(Concluded {
                job_id: self.halving.job_id.clone(),
                summary,
                best: best.map(|(run, score)| {
                    let planned = self.planned_of.get(&run).copied().unwrap_or(run);
                    let values = self.values.get(&planned).cloned().unwrap_or_default();
                    Best {
                        run,
                        outputs: IndexMap::from([
                            ("best".to_string(), values),
                            ("best-score".to_string(), number(score)),
                        ]),
                    }
                }),
            }),
        }
    }
}

/// A halving for each job whose search is `maximize` or `minimize`, over all its cells.
fn optimisations(
    wf: &Workflow,
    runs: &[PlannedJob],
    groups: &[Option<String>],
) -> Vec<Optimisation> {
    let mut found: Vec<Optimisation> = Vec::new();
    for (i, planned) in runs.iter().enumerate() {
        let Some(job) = wf.jobs.get(&planned.job_id) else {
            continue;
        };
        let Some(search) = job.strategy.as_ref().and_then(|s| s.search.as_ref()) else {
            continue;
        };
        let Some((metric, goal)) = search.objective() else {
            continue;
        };
        let at = match found
            .iter()
            .position(|o| o.halving.job_id == planned.job_id)
        {
            Some(at) => at,
            None => {
                let halving = Halving::new(
                    planned.job_id.clone(),
                    (metric.value.clone(), goal),
                    search.constraints.iter().map(|c| c.value.clone()).collect(),
                    search.budget.unwrap_or_default(),
                );
                found.push(Optimisation {
                    halving,
                    step_key: scored_step_key(job, search.step.as_ref().map(|s| s.value.as_str())),
                    values: HashMap::new(),
                    planned_of: HashMap::new(),
                });
                found.len() - 1
            }
        };
        let o = &mut found[at];
        o.halving.add_cell(
            i,
            Cell {
                name: planned.display_name.clone(),
                group: groups.get(i).cloned().flatten(),
            },
        );
        o.values.insert(
            i,
            serde_json::to_string(&planned.matrix).unwrap_or_default(),
        );
    }
    found
}

/// The position (`3`) of the step `id` names, or of the job's first `benchmark` step (the
/// loader made sure there is one).
fn scored_step_key(job: &Job, id: Option<&str>) -> String {
    let position = job.steps.iter().position(|s| match id {
        Some(id) => s.id.as_ref().is_some_and(|i| i.value == id),
        None => {
            matches!(s.uses.as_ref().map(|u| &u.value), Some(Uses::Builtin(n)) if n == "benchmark")
        }
    });
    (position.unwrap_or(0) + 1).to_string()
}
