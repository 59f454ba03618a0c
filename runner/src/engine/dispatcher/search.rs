//! `strategy.search: { bisect: DIMENSION }`: instead of every cell, the dispatcher runs only the
//! probes a binary search needs to find the boundary along one matrix dimension between the
//! cells that succeed and those that fail (a memory fraction that still loads, a batch size
//! still fast enough): ⌈log₂(n + 1)⌉ probes of n values, for each combination of the other
//! dimensions. A probe that fails is an answer, not a failure of the run; the cells the search
//! did not need end skipped. The boundary is the job's output `best` (and `best-cell`).

use std::collections::HashMap;

use crate::plan::PlannedJob;
use crate::workflow::model::{Matrix, MatrixDim, SearchFind, Workflow};

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

/// How a search ended, for the job's outputs and the log.
pub(super) struct Concluded {
    pub job_id: String,
    /// The boundary: the value of the dimension, and the run that had it.
    pub best: Option<(String, usize)>,
    pub summary: String,
}

/// Every search of the run.
#[derive(Default)]
pub(super) struct Searches {
    lines: Vec<Line>,
    /// Run index → (line, position in it).
    of_run: HashMap<usize, (usize, usize)>,
}

impl Searches {
    pub(super) fn new(wf: &Workflow, runs: &[PlannedJob]) -> Self {
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
            let dimension = &search.bisect.value;
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
        self.of_run.contains_key(&i)
    }

    pub(super) fn decide(&mut self, i: usize) -> Decision {
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

    /// Probe `i` ended: succeeded (`failure` is `None`), or infeasible for that reason; how
    /// its search ended, when this was its last.
    pub(super) fn record(&mut self, i: usize, failure: Option<String>) -> Option<Concluded> {
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
            best,
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
