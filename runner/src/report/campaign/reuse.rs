//! What sharing servers between cells saved: a cell that adopted a running server did not load
//! it. Each server's load is what its first cell spent on it (`start-container`'s time plus
//! `wait-for-health`'s `ready-after`); a cell that adopted it saved that load, less what it
//! still spent adopting and checking it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::run_events::LoggedCell;
use crate::events::JobResult;

/// The campaign's servers and the loading their reuse saved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReuseData {
    /// Servers started (not adopted).
    pub servers: usize,
    /// Cells that ran.
    pub cells: usize,
    /// Cells that adopted a server an earlier cell started.
    pub reused_cells: usize,
    /// Seconds of loading not spent, summed over the cells that adopted a server.
    pub saved_s: f64,
    /// `2 servers for 6 cells; ~8.4 s of loading saved (4 cells adopted a running server)`;
    /// `None` when no cell started a server.
    pub line: Option<String>,
}

/// Seconds the cell spent getting its servers ready: each `start-container` step, plus the
/// `wait-for-health` time shared among them. `None` when it started no server.
pub fn load_seconds(cell: &LoggedCell) -> Option<f64> {
    (!cell.servers.is_empty())
        .then(|| cell.servers.iter().map(|s| s.seconds).sum::<f64>() + cell.ready_after_s)
}

/// The campaign's reuse, from its cells in the order they were queued.
pub fn summarise(cells: &[LoggedCell]) -> ReuseData {
    // A server's load: what the cell that started it spent, its share of the cell's waiting.
    let share = |cell: &LoggedCell| cell.ready_after_s / cell.servers.len().max(1) as f64;
    let mut loads: HashMap<&str, f64> = HashMap::new();
    for cell in cells {
        for s in cell
            .servers
            .iter()
            .filter(|s| !s.reused && !s.key.is_empty())
        {
            loads.entry(&s.key).or_insert(s.seconds + share(cell));
        }
    }
    let mut data = ReuseData {
        cells: cells
            .iter()
            .filter(|c| matches!(c.result, Some(JobResult::Success | JobResult::Failure)))
            .count(),
        ..ReuseData::default()
    };
    for cell in cells {
        let mut adopted = false;
        for s in &cell.servers {
            if !s.reused {
                data.servers += 1;
                continue;
            }
            adopted = true;
            if let Some(load) = loads.get(s.key.as_str()) {
                data.saved_s += (load - s.seconds - share(cell)).max(0.0);
            }
        }
        data.reused_cells += usize::from(adopted);
    }
    if data.servers > 0 {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        let saved = if data.reused_cells == 0 {
            "no server was reused".to_string()
        } else {
            format!(
                "~{} of loading saved ({} adopted a running server)",
                seconds_text(data.saved_s),
                plural(data.reused_cells, "cell")
            )
        };
        data.line = Some(format!(
            "{} for {}; {saved}",
            plural(data.servers, "server"),
            plural(data.cells, "cell")
        ));
    }
    data
}

/// `8.4 s` under ten seconds, `125 s` above.
fn seconds_text(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::campaign::run_events::ServerStart;

    fn cell(key: &str, reused: bool, start_s: f64, ready_s: f64) -> LoggedCell {
        LoggedCell {
            result: Some(JobResult::Success),
            servers: vec![ServerStart {
                step: "server".into(),
                key: key.into(),
                reused,
                cells_before: 0,
                seconds: start_s,
            }],
            ready_after_s: ready_s,
            ..LoggedCell::default()
        }
    }

    #[test]
    fn each_adopting_cell_saves_its_servers_load_less_its_own_check() {
        // Two servers loading 0.5 + 60 s and 1 + 80 s; their later cells took 0.1 + 0.2 s.
        let cells = [
            cell("a", false, 0.5, 60.0),
            cell("a", true, 0.1, 0.2),
            cell("a", true, 0.1, 0.2),
            cell("b", false, 1.0, 80.0),
            cell("b", true, 0.1, 0.2),
        ];
        let r = summarise(&cells);
        assert_eq!((r.servers, r.cells, r.reused_cells), (2, 5, 3));
        let want = 2.0 * (60.5 - 0.3) + (81.0 - 0.3);
        assert!((r.saved_s - want).abs() < 1e-9, "{}", r.saved_s);
        assert_eq!(
            r.line.as_deref(),
            Some(
                "2 servers for 5 cells; ~201 s of loading saved (3 cells adopted a running server)"
            )
        );
        assert_eq!(load_seconds(&cells[0]), Some(60.5));
    }

    #[test]
    fn without_reuse_or_servers_it_says_so_or_nothing() {
        let r = summarise(&[cell("", false, 1.0, 2.0), cell("", false, 1.0, 2.0)]);
        assert_eq!(
            r.line.as_deref(),
            Some("2 servers for 2 cells; no server was reused")
        );
        let none = summarise(&[LoggedCell {
            result: Some(JobResult::Success),
            ..LoggedCell::default()
        }]);
        assert_eq!(none.line, None);
        assert_eq!(load_seconds(&LoggedCell::default()), None);
    }
}
