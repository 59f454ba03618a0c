//! The load generator driven through the library (`gpuflow::bench`), as a benchmark step
//! would drive it, for the tests of its measurements against the simulator and llama-server.

use gpuflow::bench::{self, BenchConfig, BenchInputs, BenchResult};

/// A benchmark of `url` with these inputs (as text, as a flag or an expression gives them).
pub(crate) fn config(url: &str, pairs: &[(&str, &str)]) -> BenchConfig {
    let mut inputs = serde_json::Map::new();
    inputs.insert("target".into(), url.into());
    for (k, v) in pairs {
        inputs.insert((*k).into(), (*v).into());
    }
    BenchConfig::from_inputs(&BenchInputs::from_json(&inputs).unwrap()).unwrap()
}

/// Runs it; a failure fails the test with the benchmark's error.
pub(crate) async fn run_ok(config: &BenchConfig) -> BenchResult {
    match bench::run(config, &|_| {}).await {
        Ok(result) => result,
        Err(err) => panic!("benchmark failed: {err}"),
    }
}
