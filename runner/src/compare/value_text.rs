//! Numbers as the comparison's messages, reports and the CLI show them.

/// A value rounded for reading (two decimals below 100, fewer above), and its unit.
pub fn format_value(v: f64, unit: &str) -> String {
    let digits = if v.abs() >= 1000.0 {
        0
    } else if v.abs() >= 100.0 {
        1
    } else if v.abs() >= 1.0 {
        2
    } else {
        4
    };
    let n = format!("{v:.digits$}");
    if unit.is_empty() {
        n
    } else {
        format!("{n} {unit}")
    }
}
