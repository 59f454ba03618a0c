//! A search's early round runs the benchmark shorter (docs/campaigns.md, "Maximize and
//! minimize"): the built-in generator's requests or duration scaled by the round's share, at
//! least one request. The share is recorded in the result's definition, so a shortened
//! result is a series of its own and never the baseline of a full-length one.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::bench::{BenchConfig, Stop};

/// `config` shortened to `fraction` of its length; what was done, for the log.
pub fn shorten(config: &mut BenchConfig, fraction: Option<f64>) -> Option<String> {
    let fraction = fraction.filter(|f| *f < 1.0)?;
    let (full, short) = match config.stop {
        Stop::Requests(n) => {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let short = ((n as f64 * fraction).ceil() as u64).max(1);
            config.stop = Stop::Requests(short);
            (n.to_string(), format!("{short} requests"))
        }
        Stop::Duration(d) => {
            let short = d.mul_f64(fraction).max(Duration::from_millis(1));
            config.stop = Stop::Duration(short);
            (
                humantime::format_duration(d).to_string(),
                humantime::format_duration(short).to_string(),
            )
        }
    };
    Some(format!(
        "a search's early round: {} of the full length, {short} per run instead of {full}",
        percent(fraction)
    ))
}

/// The definition a shortened result is recorded with: its share beside the inputs.
pub fn mark(definition: &mut BTreeMap<String, String>, fraction: Option<f64>) {
    if let Some(fraction) = fraction.filter(|f| *f < 1.0) {
        definition.insert("search-budget".into(), percent(fraction));
    }
}

/// A script's length is its own: said once, and it runs in full.
pub fn script_note(fraction: Option<f64>) -> Option<String> {
    let fraction = fraction.filter(|f| *f < 1.0)?;
    Some(format!(
        "a search's early round asks for {} of the full length, but a benchmark `command` sets its own length: it runs in full",
        percent(fraction)
    ))
}

fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::BenchInputs;

    fn config(requests: Option<u64>, duration: Option<&str>) -> BenchConfig {
        let inputs = BenchInputs {
            target: Some("http://h:1".into()),
            requests,
            duration: duration.map(|d| humantime::parse_duration(d).unwrap()),
            ..BenchInputs::default()
        };
        BenchConfig::from_inputs(&inputs).unwrap()
    }

    #[test]
    fn requests_scale_down_to_at_least_one() {
        let mut c = config(Some(40), None);
        let said = shorten(&mut c, Some(0.25)).unwrap();
        assert_eq!(c.stop, Stop::Requests(10));
        assert!(
            said.contains("25% of the full length, 10 requests per run instead of 40"),
            "{said}"
        );
        let mut c = config(Some(3), None);
        shorten(&mut c, Some(0.1));
        assert_eq!(c.stop, Stop::Requests(1));
    }

    #[test]
    fn a_duration_scales_and_full_length_changes_nothing() {
        let mut c = config(None, Some("2m"));
        shorten(&mut c, Some(0.5));
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(60)));
        let mut full = config(Some(40), None);
        assert_eq!(shorten(&mut full, Some(1.0)), None);
        assert_eq!(shorten(&mut full, None), None);
        assert_eq!(full.stop, Stop::Requests(40));
    }

    #[test]
    fn a_shortened_result_is_its_own_series() {
        let mut d = BTreeMap::new();
        mark(&mut d, Some(0.25));
        assert_eq!(d["search-budget"], "25%");
        let mut full = BTreeMap::new();
        mark(&mut full, Some(1.0));
        assert!(full.is_empty());
    }
}
