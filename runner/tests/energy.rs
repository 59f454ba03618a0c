//! Energy per token (docs/benchmark.md, "Energy"): a `benchmark` step of `gpuflow run`
//! against `gpuflow-sim` on this machine, on two stand-in GPUs whose file scripts their power
//! draw (docs/gpus.md). The telemetry goes through the sampler as NVML's would, and the energy
//! recorded must be that power × each run's measured seconds; doubling the power doubles the
//! energy per output token, which `compare-to-baseline` calls a regression. No Docker engine:
//! the server runs on the host.

use gpuflow::store::{ResultFilter, ResultStore, StoredResult};

use crate::support::Workspace;
use crate::support::sim::SimProcess;

/// Two stand-in GPUs drawing `gpu0` and `gpu1` watts.
fn inventory(gpu0: f64, gpu1: f64) -> String {
    format!(
        "model = \"NVIDIA L40S\"\n[[gpus]]\nindex = 0\npower-w = {gpu0}\n[[gpus]]\nindex = 1\npower-w = {gpu1}\n"
    )
}

/// A job on both GPUs: a two-run benchmark at concurrency 2 after a warm-up, compared on its
/// energy per output token with the previous run.
fn workflow(port: u16) -> String {
    format!(
        r#"
name: energy
on: workflow_dispatch
jobs:
  bench:
    gpus: 2
    steps:
      - id: bench
        uses: benchmark
        with:
          target: http://127.0.0.1:{port}
          concurrency: 2
          output-tokens: 24
          requests: 8
          runs: 2
          warmup: 2
      - id: compare
        uses: compare-to-baseline
        with:
          metric: joules_per_output_token
          baseline: previous
      - if: always()
        run: echo "result-file=${{{{ steps.bench.outputs.result-file }}}}"
"#
    )
}

/// `gpuflow run --plain w.yml` on the stand-in GPUs `inventory`: exit code and all it said.
fn run(repo: &Workspace, inventory: &str, port: u16) -> (Option<i32>, String) {
    repo.write("inventory.toml", inventory);
    repo.write("w.yml", &workflow(port));
    let leases = repo.path().join("leases");
    std::fs::create_dir_all(&leases).unwrap();
    let out = repo
        .gpuflow()
        .without_docker()
        .env(
            gpuflow::gpu::STAND_IN_ENV,
            repo.path().join("inventory.toml"),
        )
        .env("GPUFLOW_LEASE_DIR", &leases)
        .args(["run", "--plain", "w.yml"])
        .output();
    (out.code(), out.all())
}

fn samples<'a>(result: &'a StoredResult, name: &str) -> &'a [f64] {
    &result
        .metric(name)
        .unwrap_or_else(|| panic!("no `{name}` among {:?}", result.metrics))
        .samples
}

/// Equal within 0.1%: the power is constant, so the integral is exact but for rounding;
/// a warm-up, a pause between runs or a GPU counted wrongly would be far more.
fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= expected.abs() * 1e-3,
        "{what}: {actual} vs {expected}"
    );
}

/// The `duration` (seconds measured, all runs) in the result file the run's last step named.
fn measured_seconds(out: &str) -> f64 {
    let path = out
        .lines()
        .filter_map(|l| l.rsplit_once("result-file=").map(|(_, path)| path))
        .find(|path| path.starts_with('/'))
        .unwrap_or_else(|| panic!("no result file: {out}"));
    let path = path.trim();
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}\n{out}"));
    let json: serde_json::Value = serde_json::from_slice(&text).unwrap();
    json["duration"].as_f64().unwrap()
}

#[test]
fn energy_is_scripted_power_times_measured_time_and_doubled_power_is_a_regression() {
    let sim = SimProcess::start(&["--ttft", "10ms", "--tokens-per-second", "200"]);
    let port = sim.addr().port();
    let repo = Workspace::repository()
        .file("README.md", "energy\n")
        .committed("start");

    let (code, out) = run(&repo, &inventory(300.0, 100.0), port);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("GPU telemetry (stand-in: the file's scripted values, not real GPUs)"),
        "{out}"
    );
    assert!(
        out.contains("J per output token (stand-in power, made up)"),
        "{out}"
    );
    let seconds = measured_seconds(&out);

    let store = ResultStore::open(&repo.path().join(".gpuflow/results.db")).unwrap();
    let find = |store: &ResultStore| {
        store
            .find(&ResultFilter {
                metric: "energy_j".into(),
                limit: 10,
                ..Default::default()
            })
            .unwrap()
    };
    let first = find(&store).remove(0);
    let energy = samples(&first, "energy_j");
    assert_eq!(energy.len(), 2, "one sample per measured run: {energy:?}");
    assert_close(energy.iter().sum(), 400.0 * seconds, "both GPUs, 400 W");
    for (i, e) in energy.iter().enumerate() {
        assert_close(
            samples(&first, "energy_j_gpu0")[i],
            0.75 * e,
            "GPU 0's share",
        );
        assert_close(
            samples(&first, "energy_j_gpu1")[i],
            0.25 * e,
            "GPU 1's share",
        );
        // Energy per token = 400 W × seconds / tokens = 400 / the run's output tok/s.
        let per_token = samples(&first, "joules_per_output_token")[i];
        let tok_s = samples(&first, "output_throughput")[i];
        assert_close(per_token * tok_s, 400.0, "joules per output token");
    }
    let direction = first.metric("joules_per_output_token").unwrap().direction;
    assert_eq!(direction, gpuflow::store::Direction::Lower);
    let info = &first.fingerprint.info;
    assert_eq!(
        info.power.as_deref(),
        Some("0: 300.0 W; 1: 100.0 W (stand-in)")
    );
    assert_eq!(
        info.telemetry.as_ref().unwrap()["stand_in"],
        true,
        "the stored telemetry says it is made up"
    );

    // Twice the power: twice the energy per token, a regression that fails the run.
    let (code, out) = run(&repo, &inventory(600.0, 200.0), port);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("joules_per_output_token (GPU energy per output token of a measured run, median of runs; stand-in power, made up): regression"),
        "{out}"
    );
    let second = find(&store)
        .into_iter()
        .find(|r| r.run_id != first.run_id)
        .unwrap();
    let per_token =
        |r: &StoredResult| gpuflow::compare::center(samples(r, "joules_per_output_token")).unwrap();
    let ratio = per_token(&second) / per_token(&first);
    assert!((1.5..2.7).contains(&ratio), "doubled power: {ratio}");
}
