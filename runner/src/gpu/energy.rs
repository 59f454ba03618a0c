//! Energy from power telemetry: the trapezoidal integral of one GPU's power over a window of
//! time, the window a benchmark measured (its warm-up and the pauses between runs left out).
//!
//! Power is taken as the straight line between two readings (the trapezoidal rule), so a
//! window's ends, which fall between readings, get the power interpolated there; a reading
//! without power (NVML did not answer) is skipped, its neighbours joined; before the first
//! reading and after the last the nearest one's power is held (the sampler reads when it
//! starts, before anything is measured, and once more when it stops, after).

/// Joules drawn between `from_ms` and `to_ms` (milliseconds since sampling started, as
/// `t_ms`), from the readings `power_w` taken at `t_ms` (ascending). `None` when no reading
/// has a power; an empty or reversed window drew nothing.
pub fn energy_j(t_ms: &[u64], power_w: &[Option<f64>], from_ms: f64, to_ms: f64) -> Option<f64> {
    let points: Vec<(f64, f64)> = t_ms
        .iter()
        .zip(power_w)
        .filter_map(|(t, p)| p.map(|p| (*t as f64, p)))
        .collect();
    if points.is_empty() {
        return None;
    }
    if to_ms <= from_ms {
        return Some(0.0);
    }
    let mut knots = vec![from_ms];
    knots.extend(
        points
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| *t > from_ms && *t < to_ms),
    );
    knots.push(to_ms);
    let millijoules: f64 = knots
        .windows(2)
        .map(|w| (w[1] - w[0]) * (power_at(&points, w[0]) + power_at(&points, w[1])) / 2.0)
        .sum();
    Some(millijoules / 1000.0)
}

/// The power at `t` on the line through the readings, held flat beyond the first and last.
fn power_at(points: &[(f64, f64)], t: f64) -> f64 {
    let after = points.partition_point(|(pt, _)| *pt <= t);
    match (after.checked_sub(1).map(|i| points[i]), points.get(after)) {
        (Some((_, p)), None) | (None, Some(&(_, p))) => p,
        (Some((t0, p0)), Some(&(t1, p1))) => p0 + (p1 - p0) * (t - t0) / (t1 - t0),
        (None, None) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn a_constant_draw_is_power_times_time() {
        let t = [0, 100, 200, 300];
        let p = [Some(300.0); 4];
        // 300 W for 0.25 s, whatever the window's ends.
        let e = energy_j(&t, &p, 30.0, 280.0);
        assert!(close(e, 75.0), "{e:?}");
    }

    #[test]
    fn irregular_intervals_are_weighted_by_their_length() {
        let t = [0, 50, 200, 210];
        let p = [Some(100.0), Some(200.0), Some(200.0), Some(0.0)];
        // 50 ms at a mean 150 W, 150 ms at 200 W, 10 ms at a mean 100 W.
        let e = energy_j(&t, &p, 0.0, 210.0);
        assert!(
            close(e, (50.0 * 150.0 + 150.0 * 200.0 + 10.0 * 100.0) / 1000.0),
            "{e:?}"
        );
    }

    #[test]
    fn a_missing_reading_joins_its_neighbours_rather_than_counting_as_zero() {
        let t = [0, 100, 200];
        let p = [Some(100.0), None, Some(300.0)];
        let e = energy_j(&t, &p, 0.0, 200.0);
        assert!(close(e, 0.2 * 200.0), "{e:?}");
        assert_eq!(energy_j(&t, &[None, None, None], 0.0, 200.0), None);
    }

    #[test]
    fn a_window_shorter_than_one_interval_gets_the_power_between_its_readings() {
        let t = [0, 100];
        let p = [Some(100.0), Some(300.0)];
        // 150 W at 25 ms, 250 W at 75 ms: 50 ms at a mean 200 W.
        let e = energy_j(&t, &p, 25.0, 75.0);
        assert!(close(e, 10.0), "{e:?}");
        assert!(close(energy_j(&t, &p, 40.0, 40.0), 0.0));
        assert!(close(energy_j(&t, &p, 60.0, 40.0), 0.0));
    }

    #[test]
    fn beyond_the_readings_the_nearest_power_is_held() {
        let t = [100, 200];
        let p = [Some(100.0), Some(300.0)];
        // 100 W from 0 to 100 ms, the ramp to 300 W, then 300 W to 400 ms.
        let e = energy_j(&t, &p, 0.0, 400.0);
        assert!(
            close(e, (100.0 * 100.0 + 100.0 * 200.0 + 200.0 * 300.0) / 1000.0),
            "{e:?}"
        );
    }
}
