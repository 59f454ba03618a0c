//! A run's job graph as SVG: one box per job, in columns by how deep its `needs` go, each
//! matrix cell a row coloured by its state, an arrow from each needed job. Every cell's row
//! has an id (`cell-N`, N the job run's number on the page) so the page's script recolours it
//! as the run goes.

use std::collections::HashMap;
use std::fmt::Write;

use super::run_view::JobView;
use crate::report::chart::escape;

const BOX_WIDTH: f64 = 210.0;
const COLUMN_GAP: f64 = 70.0;
const ROW: f64 = 22.0;
const HEADER: f64 = 26.0;
const BOX_GAP: f64 = 18.0;
const MARGIN: f64 = 10.0;
/// Cells drawn per job; a 64-cell matrix shows its first ones and how many more.
const CELLS_SHOWN: usize = 12;

/// One job (all its cells) and where it sits.
struct Group<'a> {
    job: &'a str,
    needs: &'a [String],
    /// Page numbers of its job runs.
    runs: Vec<usize>,
    level: usize,
    x: f64,
    y: f64,
    height: f64,
}

pub fn svg(jobs: &[JobView]) -> String {
    let mut groups: Vec<Group> = Vec::new();
    let mut by_job: HashMap<&str, usize> = HashMap::new();
    for (i, j) in jobs.iter().enumerate() {
        let g = *by_job.entry(&j.job).or_insert_with(|| {
            groups.push(Group {
                job: &j.job,
                needs: &j.needs,
                runs: Vec::new(),
                level: 0,
                x: 0.0,
                y: 0.0,
                height: 0.0,
            });
            groups.len() - 1
        });
        groups[g].runs.push(i);
    }
    levels(&mut groups, &by_job);
    let mut column_bottom: HashMap<usize, f64> = HashMap::new();
    for g in &mut groups {
        let rows = g.runs.len().min(CELLS_SHOWN) + usize::from(g.runs.len() > CELLS_SHOWN);
        g.height = HEADER + ROW * rows as f64 + 6.0;
        g.x = MARGIN + g.level as f64 * (BOX_WIDTH + COLUMN_GAP);
        let bottom = column_bottom.entry(g.level).or_insert(MARGIN);
        g.y = *bottom;
        *bottom += g.height + BOX_GAP;
    }
    let width = groups.iter().map(|g| g.x + BOX_WIDTH).fold(0.0, f64::max) + MARGIN;
    let height = column_bottom.values().copied().fold(0.0, f64::max) + MARGIN;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="job graph">"#
    );
    for g in &groups {
        for need in g.needs {
            let Some(&from) = by_job.get(need.as_str()) else {
                continue;
            };
            let (a, b) = (&groups[from], g);
            let (x1, y1) = (a.x + BOX_WIDTH, a.y + HEADER / 2.0);
            let (x2, y2) = (b.x, b.y + HEADER / 2.0);
            let mid = (x1 + x2) / 2.0;
            let _ = write!(
                out,
                r##"<path class="edge" d="M{x1:.1},{y1:.1} C{mid:.1},{y1:.1} {mid:.1},{y2:.1} {x2:.1},{y2:.1}" fill="none" stroke="#8c96a5" stroke-width="1.5"/>"##
            );
        }
    }
    for g in &groups {
        let _ = write!(
            out,
            r##"<g class="job"><rect x="{:.1}" y="{:.1}" width="{BOX_WIDTH}" height="{:.1}" rx="6" fill="#ffffff" stroke="#cbd2d9"/><text x="{:.1}" y="{:.1}" font-weight="bold" font-size="13">{}</text>"##,
            g.x,
            g.y,
            g.height,
            g.x + 8.0,
            g.y + 17.0,
            escape(g.job)
        );
        for (row, &i) in g.runs.iter().take(CELLS_SHOWN).enumerate() {
            let y = g.y + HEADER + row as f64 * ROW;
            let j = &jobs[i];
            let label = if j.display == j.job {
                j.job.clone()
            } else {
                j.display.clone()
            };
            let _ = write!(
                out,
                r##"<a href="#job-{i}"><rect id="cell-{i}" class="cell state-{}" x="{:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="3"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}" font-size="12">{}</text></a>"##,
                escape(&j.state),
                g.x + 6.0,
                BOX_WIDTH - 12.0,
                ROW - 4.0,
                escape(&label),
                escape(&j.state),
                g.x + 12.0,
                y + 13.5,
                escape(&shorten(&label, 28))
            );
        }
        if g.runs.len() > CELLS_SHOWN {
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#52606d">+{} more cells</text>"##,
                g.x + 12.0,
                g.y + HEADER + CELLS_SHOWN as f64 * ROW + 13.5,
                g.runs.len() - CELLS_SHOWN
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

/// Each job's column: 0 without `needs`, else one more than the deepest job it needs
/// (`needs` has no cycles: the loader refused those).
fn levels(groups: &mut [Group], by_job: &HashMap<&str, usize>) {
    for _ in 0..groups.len() {
        let mut changed = false;
        for g in 0..groups.len() {
            let level = groups[g]
                .needs
                .iter()
                .filter_map(|n| by_job.get(n.as_str()))
                .map(|&n| groups[n].level + 1)
                .max()
                .unwrap_or(0);
            if level != groups[g].level {
                groups[g].level = level;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max - 1).collect();
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventKind, JobRef};
    use crate::serve::run_view::RunView;

    fn queued(view: &mut RunView, job: &str, cell: usize, needs: &[&str]) {
        view.apply(&Event {
            elapsed: std::time::Duration::ZERO,
            kind: EventKind::JobQueued {
                job: JobRef {
                    job: job.into(),
                    cell,
                    display: format!("{job} ({cell})"),
                },
                matrix: Default::default(),
                needs: needs.iter().map(ToString::to_string).collect(),
            },
        });
    }

    #[test]
    fn dependants_sit_in_later_columns_and_big_matrices_are_cut() {
        let mut view = RunView::default();
        for cell in 0..20 {
            queued(&mut view, "bench", cell, &["build"]);
        }
        queued(&mut view, "build", 0, &[]);
        queued(&mut view, "report", 0, &["bench"]);
        let svg = svg(&view.jobs);
        // build is in column 0, bench in 1, report in 2.
        let x_of = |id: usize| {
            let at = svg.find(&format!(r#"id="cell-{id}""#)).unwrap();
            let x = &svg[at..];
            let x = &x[x.find("x=\"").unwrap() + 3..];
            x[..x.find('"').unwrap()].parse::<f64>().unwrap()
        };
        assert!(x_of(20) < x_of(0) && x_of(0) < x_of(21));
        assert!(svg.contains("+8 more cells"));
        assert!(!svg.contains(r#"id="cell-12""#));
        assert_eq!(svg.matches("class=\"edge\"").count(), 2);
    }
}
