//! `start-container`'s memory estimate for a model server (docs/memory.md): the server's
//! memory flags from its command, the model's `config.json` read in a container with the same
//! volumes, and the memory of its GPUs, into a [`crate::memory::Estimate`]. Preflight refuses a
//! server whose weights alone exceed its budget before any job starts; the step estimates
//! again with the GPUs the job leased, says it and keeps it with the container, where
//! `wait-for-health` finds it to set beside what the server reports.

use std::sync::Arc;

use indexmap::IndexMap;

use crate::backend::ContainerSpec;
use crate::engine::containers::JobContainers;
use crate::events::{EventKind, JobRef, Stream};
use crate::expr::Value;
use crate::gpu::{Fit, Inventory, Request};
use crate::memory::{Estimate, ModelShape, ServerFlags};
use crate::steps::{FileInContainer as InContainer, FilePlace as _, StepGpus, StepHost};

/// A `config.json` larger than this is not a model's configuration.
const CONFIG_LIMIT: u64 = 4 * 1024 * 1024;

/// The memory flags of the server `spec` runs, when it is an SGLang or vLLM server (or
/// `gpuflow-sim` with SGLang's flags) whose model is a folder in the container, with the
/// step's `preload-overhead` for its tensor-parallel size; `Err` for a `preload-overhead`
/// that does not read.
pub fn server_flags(
    spec: &ContainerSpec,
    inputs: &IndexMap<String, Value>,
) -> Result<Option<ServerFlags>, String> {
    let Some(words) = spec.command.as_deref() else {
        return Ok(None);
    };
    // A flag with a value that is not a number is the server's to refuse, in its words.
    let Some(mut flags) = ServerFlags::parse(words).ok().flatten() else {
        return Ok(None);
    };
    if ServerFlags::config_path(&flags.model).is_none() {
        return Ok(None);
    }
    if let Some(table) = inputs.get("preload-overhead") {
        flags.overhead_mib = preload_overhead(table, flags.tp)?;
    }
    Ok(Some(flags))
}

/// `preload-overhead`'s figure for `tp` GPUs: the entry of the largest GPU count at most `tp`
/// (`{1: 1g, 8: 3g}` gives 1 GiB at TP 4), `None` when every count given is larger.
fn preload_overhead(table: &Value, tp: u64) -> Result<Option<f64>, String> {
    let mut best: Option<(u64, f64)> = None;
    for (count, size) in crate::engine::container_inputs::map(table, "preload-overhead")? {
        let gpus: u64 = count
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                format!(
                    "`preload-overhead` has the key `{count}`: the keys are GPU counts (`1`, `8`)"
                )
            })?;
        let bytes = crate::engine::container_inputs::byte_size(&size).ok_or_else(|| {
            format!("`preload-overhead` gives `{size}` for {gpus} GPUs, not a size (`1g`, `1536m`)")
        })?;
        if gpus <= tp && best.is_none_or(|(c, _)| gpus > c) {
            best = Some((gpus, bytes as f64 / (1024.0 * 1024.0)));
        }
    }
    Ok(best.map(|(_, mib)| mib))
}

/// The GPUs a server gets, for messages (`1 × NVIDIA L40S`), and the smallest one's memory.
pub struct GpuMemory {
    pub mib: u64,
    pub described: String,
}

/// The memory of the GPUs at `positions` of `inv`; `None` for none.
pub fn of_positions(inv: &Inventory, positions: &[usize]) -> Option<GpuMemory> {
    let gpus: Vec<_> = positions.iter().filter_map(|&p| inv.gpus.get(p)).collect();
    let smallest = gpus.iter().min_by_key(|g| g.memory_mib)?;
    let stand_in = if matches!(inv.source, crate::gpu::Source::StandIn { .. }) {
        ", stand-in"
    } else {
        ""
    };
    Some(GpuMemory {
        mib: smallest.memory_mib,
        described: format!(
            "{} × {} of {} MiB{stand_in}",
            gpus.len(),
            smallest.model,
            smallest.memory_mib
        ),
    })
}

/// The GPUs `request` would be leased on a host with every GPU free: the memory a job will
/// have, known before it starts. `None` when it can never be met (the job says so itself).
pub fn for_request(inv: &Inventory, request: &Request) -> Option<GpuMemory> {
    match crate::gpu::allocator::choose(inv, &vec![true; inv.gpus.len()], request) {
        Fit::Now(positions) => of_positions(inv, &positions),
        Fit::Wait | Fit::Never(_) => None,
    }
}

/// The model's shape from `config.json` in `place`; `None` when the folder has none.
async fn read_model(place: &InContainer, model: &str) -> Result<Option<ModelShape>, String> {
    let Some(path) = ServerFlags::config_path(model) else {
        return Ok(None);
    };
    let Some(text) = place.read_text(&path, CONFIG_LIMIT).await? else {
        return Ok(None);
    };
    ModelShape::from_config_json(&text)
        .map(Some)
        .map_err(|e| format!("`{path}` {}: {e}", place.describe()))
}

/// The estimate of the server `flags` describes on GPUs of `gpu_mib`, its configs read in
/// `place`; `None` when the model folder has no `config.json`.
pub async fn estimate(
    place: &InContainer,
    flags: &ServerFlags,
    gpu_mib: u64,
) -> Result<Option<Estimate>, String> {
    let Some(model) = read_model(place, &flags.model).await? else {
        return Ok(None);
    };
    let draft = match &flags.draft_model {
        Some(d) => read_model(place, d).await?,
        None => None,
    };
    Estimate::new(&model, draft.as_ref(), flags, gpu_mib).map(Some)
}

/// Why the server cannot load, with the numbers and the fixes.
pub fn refusal(e: &Estimate, flags: &ServerFlags, gpus: &GpuMemory, container: &str) -> String {
    let numbers: String = e.describe().lines().map(|l| format!("\n  {l}")).collect();
    format!(
        "the weights of `{}` do not fit the memory `{} {}` leaves on {}: container `{container}` would fail its load with no memory left for the KV cache{numbers}\n  {}",
        flags.model,
        e.kind.fraction_flag(),
        e.fraction,
        gpus.described,
        e.fixes()
    )
}

/// The estimate in one line, for the step's log.
pub fn summary(e: &Estimate, gpus: &GpuMemory) -> String {
    format!(
        "memory estimate on {}: weights {:.2} GiB per GPU, budget {:.2} GiB ({} {}), KV cache room {} tokens, margin {:.2} GiB",
        gpus.described,
        e.weights_mib / 1024.0,
        e.budget_mib / 1024.0,
        e.kind.fraction_flag(),
        e.fraction,
        e.kv_tokens,
        e.kv_mib / 1024.0
    )
}

/// The container `start-container` just started, and where its step says things.
pub struct Started<'a> {
    pub host: &'a Arc<dyn StepHost>,
    pub job: &'a JobRef,
    pub step: &'a str,
    pub container: &'a str,
    pub id: String,
}

/// At the step's place, the server started: its estimate on the GPUs the job leased, said in
/// the step's log and kept with the container for `wait-for-health`; the step's outputs
/// `kv-cache-tokens-estimate` and `weights-gib-per-gpu`. Refusing is preflight's: the server
/// runs already, so a problem is only said.
pub async fn record(
    containers: &mut JobContainers,
    at: &Started<'_>,
    flags: &ServerFlags,
    gpus: &StepGpus,
) -> IndexMap<String, String> {
    let say = |text: String| {
        at.host.emit(EventKind::LogLine {
            job: at.job.clone(),
            step: Some(at.step.to_string()),
            container: None,
            stream: Stream::Runner,
            text,
        });
    };
    let positions: Vec<usize> = gpus
        .leased
        .iter()
        .filter_map(|(_, uuid)| gpus.inventory.gpus.iter().position(|g| &g.uuid == uuid))
        .collect();
    let Some(gpu) = of_positions(&gpus.inventory, &positions) else {
        return IndexMap::new();
    };
    let place = InContainer {
        docker: containers.docker.clone(),
        id: at.id.clone(),
        name: at.container.to_string(),
    };
    let mut outputs = IndexMap::new();
    match estimate(&place, flags, gpu.mib).await {
        Ok(Some(e)) => {
            say(summary(&e, &gpu));
            outputs.insert("kv-cache-tokens-estimate".into(), e.kv_tokens.to_string());
            outputs.insert(
                "weights-gib-per-gpu".into(),
                format!("{:.2}", e.weights_mib / 1024.0),
            );
            if let Some(s) = containers.started.get_mut(at.container) {
                s.memory = Some(e);
            }
        }
        Ok(None) => {}
        Err(why) => say(format!("no memory estimate: {why}")),
    }
    outputs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &[(&str, &str)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                .collect(),
        )
    }

    #[test]
    fn the_preload_overhead_of_the_largest_gpu_count_at_most_the_servers_applies() {
        let t = table(&[("1", "1g"), ("8", "3g")]);
        assert_eq!(preload_overhead(&t, 1).unwrap(), Some(1024.0));
        assert_eq!(preload_overhead(&t, 4).unwrap(), Some(1024.0));
        assert_eq!(preload_overhead(&t, 8).unwrap(), Some(3072.0));
        assert_eq!(preload_overhead(&t, 16).unwrap(), Some(3072.0));
        // Every count larger than the server's: the default applies.
        assert_eq!(preload_overhead(&table(&[("8", "3g")]), 2).unwrap(), None);
        // A bad key or size says which and how to write it.
        let e = preload_overhead(&table(&[("eight", "3g")]), 8).unwrap_err();
        assert!(e.contains("the keys are GPU counts"), "{e}");
        let e = preload_overhead(&table(&[("8", "lots")]), 8).unwrap_err();
        assert!(e.contains("gives `lots` for 8 GPUs, not a size"), "{e}");
    }
}
