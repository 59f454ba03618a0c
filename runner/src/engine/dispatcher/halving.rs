//! `strategy.search: { maximize | minimize: METRIC }`: the bookkeeping of successive halving,
//! with no I/O. Round `r` of `R` benchmarks every cell still in the search at `keep^(R - r)`
//! of its full length; the cells that failed or broke a constraint drop out, and the best
//! `keep` share of the others (at least one) go on to the next round. A round that leaves one
//! cell sends it straight to the last round, so the winner is always measured at full length.
//!
//! A cell is known by its first run (the planned one); each later round runs it again as a
//! new run, which [`Halving::enlist`] ties to the cell. A cell whose server failed before
//! anything was measured takes the other cells of its server group (the same server key)
//! out of the search with it: they would start the same server.

use std::collections::{BTreeMap, HashMap};

use crate::workflow::model::{Constraint, Goal, SearchBudget};

/// One cell of the search.
#[derive(Debug)]
pub(super) struct Cell {
    /// Its name (`tune (400)`), for the log.
    pub name: String,
    /// Its server group, for the cells that share a server key.
    pub group: Option<String>,
}

/// How one run of a cell ended.
#[derive(Debug, Clone)]
pub(super) enum Trial {
    /// It ran to its end; the metrics its benchmark recorded.
    Measured(BTreeMap<String, f64>),
    /// It failed: why, and whether its benchmark measured anything before.
    Failed { why: String, measured: bool },
}

/// What the end of a run of the search led to.
#[derive(Debug, PartialEq)]
pub(super) enum RoundEnd {
    /// Another round: the runs whose cells go on (each to be run again), at `fraction`.
    Next {
        summary: String,
        again: Vec<usize>,
        fraction: f64,
        round: u32,
    },
    /// The search is over: its best run and score, if any cell qualified.
    Done {
        summary: String,
        best: Option<(usize, f64)>,
    },
}

/// Where a cell stands in the current round.
#[derive(Debug, Clone)]
enum Standing {
    Waiting,
    Scored(f64),
    Out(String),
}

/// One successive-halving search over the cells of a job.
pub(super) struct Halving {
    pub job_id: String,
    pub metric: String,
    goal: Goal,
    constraints: Vec<Constraint>,
    rounds: u32,
    /// The rounds the budget asks for, once there are cells to compare.
    budget_rounds: u32,
    keep: f64,
    cells: Vec<Cell>,
    /// Run index → cell.
    of_run: HashMap<usize, usize>,
    /// The current round, from 1.
    round: u32,
    /// The cells of the current round, in the order they entered it, and their latest run.
    this_round: Vec<(usize, usize, Standing)>,
    /// Server groups whose server failed before anything was measured, and in which cell.
    failed_groups: HashMap<String, String>,
    /// Runs started, and how long their benchmarks measured in full lengths (what the
    /// search cost).
    runs: usize,
    spent: f64,
}

impl Halving {
    /// A search with no cells yet ([`Halving::add_cell`]), before its first round.
    pub(super) fn new(
        job_id: String,
        (metric, goal): (String, Goal),
        constraints: Vec<Constraint>,
        budget: SearchBudget,
    ) -> Self {
        Self {
            job_id,
            metric,
            goal,
            constraints,
            rounds: 1,
            budget_rounds: budget.rounds(),
            keep: budget.keep(),
            cells: Vec::new(),
            of_run: HashMap::new(),
            round: 1,
            this_round: Vec::new(),
            failed_groups: HashMap::new(),
            runs: 0,
            spent: 0.0,
        }
    }

    /// A cell of the first round, with its planned run. One cell alone is measured once, at
    /// full length: there is nothing to compare it with.
    pub(super) fn add_cell(&mut self, run: usize, cell: Cell) {
        let index = self.cells.len();
        self.cells.push(cell);
        self.of_run.insert(run, index);
        self.this_round.push((index, run, Standing::Waiting));
        self.rounds = if self.cells.len() <= 1 {
            1
        } else {
            self.budget_rounds
        };
        self.round = 1;
    }

    pub(super) fn has_run(&self, run: usize) -> bool {
        self.of_run.contains_key(&run)
    }

    /// The share of the full length the current round measures for.
    pub(super) fn fraction(&self) -> f64 {
        self.keep.powi((self.rounds - self.round) as i32)
    }

    /// Why run `run` need not start (its server group's server failed), if so.
    pub(super) fn needless(&self, run: usize) -> Option<String> {
        let cell = &self.cells[*self.of_run.get(&run)?];
        let failed_in = self.failed_groups.get(cell.group.as_ref()?)?;
        Some(format!(
            "not tried: {failed_in} failed before measuring, with the same server key"
        ))
    }

    /// A later round's run of the cell whose previous run was `previous`.
    pub(super) fn enlist(&mut self, previous: usize, run: usize) {
        let Some(&cell) = self.of_run.get(&previous) else {
            return;
        };
        self.of_run.insert(run, cell);
        if let Some(entry) = self.this_round.iter_mut().find(|(c, _, _)| *c == cell) {
            entry.1 = run;
        }
    }

    /// Run `run` of the current round ended (`None`: it never started, for `why`); the end of
    /// its round once it was the last.
    pub(super) fn record(&mut self, run: usize, trial: Result<Trial, String>) -> Option<RoundEnd> {
        let &cell = self.of_run.get(&run)?;
        let standing = match trial {
            Err(why) => Standing::Out(why),
            Ok(trial) => {
                self.runs += 1;
                if !matches!(
                    trial,
                    Trial::Failed {
                        measured: false,
                        ..
                    }
                ) {
                    self.spent += self.fraction();
                }
                self.judge(cell, trial)
            }
        };
        let entry = self
            .this_round
            .iter_mut()
            .find(|(c, r, _)| *c == cell && *r == run)?;
        entry.2 = standing;
        if self
            .this_round
            .iter()
            .any(|(_, _, s)| matches!(s, Standing::Waiting))
        {
            return None;
        }
        Some(self.end_round())
    }

    /// A finished run's standing: failed, out of bounds, or its score.
    fn judge(&mut self, cell: usize, trial: Trial) -> Standing {
        let metrics = match trial {
            Trial::Failed { why, measured } => {
                if !measured && let Some(group) = &self.cells[cell].group {
                    self.failed_groups
                        .entry(group.clone())
                        .or_insert_with(|| self.cells[cell].name.clone());
                }
                return Standing::Out(format!("failed ({why})"));
            }
            Trial::Measured(metrics) => metrics,
        };
        for c in &self.constraints {
            match metrics.get(&c.metric) {
                Some(v) if c.op.holds(*v, c.value) => {}
                Some(v) => return Standing::Out(format!("`{c}` does not hold ({})", number(*v))),
                None => return Standing::Out(missing(&c.metric, &metrics)),
            }
        }
        match metrics.get(&self.metric) {
            Some(v) if v.is_finite() => Standing::Scored(*v),
            _ => Standing::Out(missing(&self.metric, &metrics)),
        }
    }

    /// Every cell of the round is in: the next round's cells, or the winner.
    fn end_round(&mut self) -> RoundEnd {
        let mut scored: Vec<(usize, usize, f64)> = self
            .this_round
            .iter()
            .filter_map(|(c, r, s)| match s {
                Standing::Scored(v) => Some((*c, *r, *v)),
                _ => None,
            })
            .collect();
        // Best first; among equal scores, the cell listed first.
        let goal = self.goal;
        scored.sort_by(|a, b| {
            let order = a.2.total_cmp(&b.2);
            let order = if goal == Goal::Maximize {
                order.reverse()
            } else {
                order
            };
            order.then(a.0.cmp(&b.0))
        });
        let said = self.round_said();
        if self.round >= self.rounds || scored.is_empty() {
            let best = scored.first().map(|&(c, r, v)| (c, r, v));
            let outcome = match best {
                Some((c, _, v)) => format!(
                    "the best is {} with `{}` {} ({} runs measuring for {} full lengths; the grid measures for {})",
                    self.cells[c].name,
                    self.metric,
                    number(v),
                    self.runs,
                    number(self.spent),
                    self.cells.len()
                ),
                None => format!(
                    "no cell {}",
                    if self.constraints.is_empty() {
                        format!("measured `{}`", self.metric)
                    } else {
                        format!("measured `{}` within the constraints", self.metric)
                    }
                ),
            };
            return RoundEnd::Done {
                summary: format!("{said} → {outcome}"),
                best: best.map(|(_, r, v)| (r, v)),
            };
        }
        let kept = kept_count(scored.len(), self.keep);
        let again: Vec<(usize, usize)> = scored[..kept].iter().map(|&(c, r, _)| (c, r)).collect();
        // One cell left: nothing to compare; it goes straight to full length.
        self.round = if kept == 1 {
            self.rounds
        } else {
            self.round + 1
        };
        self.this_round = again
            .iter()
            .map(|&(c, r)| (c, r, Standing::Waiting))
            .collect();
        let names: Vec<&str> = again
            .iter()
            .map(|&(c, _)| self.cells[c].name.as_str())
            .collect();
        RoundEnd::Next {
            summary: format!(
                "{said} → keeps {} for round {} at {}",
                names.join(", "),
                self.round,
                percent(self.fraction())
            ),
            again: again.into_iter().map(|(_, r)| r).collect(),
            fraction: self.fraction(),
            round: self.round,
        }
    }

    /// `maximize `output_tok_s`, round 1 of 3 at 25%: tune (1) 98.2, tune (2) failed (…)`.
    fn round_said(&self) -> String {
        let cells: Vec<String> = self
            .this_round
            .iter()
            .map(|(c, _, s)| {
                let name = &self.cells[*c].name;
                match s {
                    Standing::Scored(v) => format!("{name} {}", number(*v)),
                    Standing::Out(why) => format!("{name} dropped: {why}"),
                    Standing::Waiting => format!("{name} ?"),
                }
            })
            .collect();
        format!(
            "{} `{}`, round {} of {} at {}: {}",
            self.goal.as_str(),
            self.metric,
            self.round,
            self.rounds,
            percent(self.fraction()),
            cells.join(", ")
        )
    }
}

/// How many of `scored` cells a round keeps: the `keep` share, rounded up, at least one.
fn kept_count(scored: usize, keep: f64) -> usize {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let kept = (scored as f64 * keep).ceil() as usize;
    kept.clamp(1, scored.max(1))
}

/// Why a metric could not be read: which the result has instead.
fn missing(metric: &str, metrics: &BTreeMap<String, f64>) -> String {
    let names: Vec<&str> = metrics.keys().map(String::as_str).collect();
    let suggestion = crate::diag::did_you_mean(metric, &names)
        .map(|s| format!("; {s}"))
        .unwrap_or_default();
    format!("its result has no `{metric}`{suggestion}")
}

/// A score as the log shows it: at most three decimals, no trailing zeros.
pub(super) fn number(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

fn percent(fraction: f64) -> String {
    format!("{}%", number(fraction * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::model::Constraint;

    fn search(scores: &[f64], budget: SearchBudget, constraints: &[&str]) -> Halving {
        let mut h = Halving::new(
            "j".into(),
            ("tok_s".into(), Goal::Maximize),
            constraints
                .iter()
                .map(|c| Constraint::parse(c).unwrap())
                .collect(),
            budget,
        );
        for i in 0..scores.len() {
            let cell = Cell {
                name: format!("c{i}"),
                group: None,
            };
            h.add_cell(i, cell);
        }
        h
    }

    fn measured(v: f64) -> Result<Trial, String> {
        Ok(Trial::Measured(BTreeMap::from([
            ("tok_s".to_string(), v),
            ("errors".to_string(), 0.0),
        ])))
    }

    /// Runs the search where cell i always scores `scores[i]`; the runs of each round (as
    /// cells), and how it ended.
    fn play(h: &mut Halving, scores: &[f64]) -> (Vec<Vec<usize>>, RoundEnd) {
        let mut next_run = scores.len();
        let mut runs: Vec<(usize, usize)> = (0..scores.len()).map(|i| (i, i)).collect();
        let mut rounds = Vec::new();
        loop {
            rounds.push(runs.iter().map(|(c, _)| *c).collect());
            let mut end = None;
            for &(cell, run) in &runs {
                end = h.record(run, measured(scores[cell]));
            }
            match end.expect("the round ends with its last run") {
                RoundEnd::Next { again, .. } => {
                    runs = again
                        .iter()
                        .map(|&prev| {
                            let cell = h.of_run[&prev];
                            next_run += 1;
                            h.enlist(prev, next_run);
                            (cell, next_run)
                        })
                        .collect();
                }
                done => return (rounds, done),
            }
        }
    }

    #[test]
    fn halving_keeps_the_better_half_until_the_best_runs_at_full_length() {
        let scores = [10.0, 80.0, 30.0, 70.0, 20.0, 60.0, 40.0, 50.0];
        let mut h = search(&scores, SearchBudget::default(), &[]);
        assert_eq!(h.fraction(), 0.25);
        let (rounds, end) = play(&mut h, &scores);
        assert_eq!(
            rounds,
            [vec![0, 1, 2, 3, 4, 5, 6, 7], vec![1, 3, 5, 7], vec![1, 3]]
        );
        let RoundEnd::Done { summary, best } = end else {
            panic!()
        };
        let (run, score) = best.unwrap();
        assert_eq!((h.of_run[&run], score), (1, 80.0));
        // 8 × ¼ + 4 × ½ + 2 × 1 = 6 full lengths instead of 8.
        assert!(
            summary.ends_with("the best is c1 with `tok_s` 80 (14 runs measuring for 6 full lengths; the grid measures for 8)"),
            "{summary}"
        );
        assert!(
            summary.starts_with("maximize `tok_s`, round 3 of 3 at 100%: c1 80, c3 70"),
            "{summary}"
        );
    }

    #[test]
    fn a_round_that_leaves_one_cell_sends_it_to_full_length() {
        let scores = [1.0, 3.0, 2.0];
        let budget = SearchBudget {
            rounds: Some(4),
            keep: Some(0.3),
        };
        let mut h = search(&scores, budget, &[]);
        let (rounds, end) = play(&mut h, &scores);
        assert_eq!(rounds, [vec![0, 1, 2], vec![1]]);
        assert!(matches!(
            end,
            RoundEnd::Done {
                best: Some((_, 3.0)),
                ..
            }
        ));
        assert_eq!(h.fraction(), 1.0);
    }

    #[test]
    fn a_minimize_prefers_the_lowest_and_one_cell_runs_once_in_full() {
        let mut h = search(&[5.0, 2.0, 9.0], SearchBudget::default(), &[]);
        h.goal = Goal::Minimize;
        let (rounds, end) = play(&mut h, &[5.0, 2.0, 9.0]);
        assert_eq!(rounds[1], [1, 0]);
        assert!(matches!(
            end,
            RoundEnd::Done {
                best: Some((_, 2.0)),
                ..
            }
        ));

        let mut single = search(&[7.0], SearchBudget::default(), &[]);
        assert_eq!(single.fraction(), 1.0);
        let (rounds, _) = play(&mut single, &[7.0]);
        assert_eq!(rounds.len(), 1);
    }

    #[test]
    fn failed_cells_and_broken_constraints_drop_out_and_say_why() {
        let mut h = search(
            &[10.0, 20.0, 30.0, 40.0],
            SearchBudget::default(),
            &["tok_s < 35"],
        );
        assert_eq!(h.record(0, measured(10.0)), None);
        h.record(1, Err("not tried: c9 failed".into()));
        h.record(
            2,
            Ok(Trial::Failed {
                why: "out of memory".into(),
                measured: false,
            }),
        );
        let Some(RoundEnd::Next { summary, again, .. }) = h.record(3, measured(40.0)) else {
            panic!()
        };
        assert_eq!(again, [0]);
        assert_eq!(
            summary,
            "maximize `tok_s`, round 1 of 3 at 25%: c0 10, c1 dropped: not tried: c9 failed, c2 dropped: failed (out of memory), c3 dropped: `tok_s < 35` does not hold (40) → keeps c0 for round 3 at 100%"
        );
    }

    #[test]
    fn a_missing_metric_is_named_with_what_the_result_has() {
        let mut h = search(&[1.0], SearchBudget::default(), &[]);
        h.metric = "tok_z".into();
        let Some(RoundEnd::Done { summary, best }) = h.record(0, measured(1.0)) else {
            panic!()
        };
        assert_eq!(best, None);
        assert!(
            summary.contains("c0 dropped: its result has no `tok_z`; did you mean `tok_s`?"),
            "{summary}"
        );
        assert!(summary.ends_with("→ no cell measured `tok_z`"), "{summary}");
    }

    #[test]
    fn a_server_that_failed_before_measuring_takes_its_group_out() {
        let mut h = Halving::new(
            "j".into(),
            ("tok_s".into(), Goal::Maximize),
            Vec::new(),
            SearchBudget::default(),
        );
        for (i, group) in ["a", "a", "b"].iter().enumerate() {
            let cell = Cell {
                name: format!("c{i}"),
                group: Some((*group).into()),
            };
            h.add_cell(i, cell);
        }
        assert_eq!(h.needless(1), None);
        h.record(
            0,
            Ok(Trial::Failed {
                why: "oom".into(),
                measured: false,
            }),
        );
        assert_eq!(
            h.needless(1).as_deref(),
            Some("not tried: c0 failed before measuring, with the same server key")
        );
        assert_eq!(h.needless(2), None);
    }

    #[test]
    fn kept_count_is_the_share_rounded_up_at_least_one() {
        assert_eq!(kept_count(8, 0.5), 4);
        assert_eq!(kept_count(3, 0.5), 2);
        assert_eq!(kept_count(1, 0.5), 1);
        assert_eq!(kept_count(10, 0.01), 1);
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(100.0), "100");
        assert_eq!(percent(0.125), "12.5%");
    }
}
