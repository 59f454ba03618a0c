//! `gpuflow slurm-job RUN_FOLDER N` on the node Slurm placed job N of a run on: the job run by
//! itself (`engine::run_alone`) with the node's own Docker engine and the GPUs Slurm allocated
//! (`SLURM_JOB_GPUS`, the node's numbering, mapped to UUIDs through the node's inventory and
//! leased there against gpuflow processes outside Slurm). Its events and logs go to its folder
//! in the run's folder, as a run's log folder holds them; its end (`result.json`) is what the
//! coordinator and the jobs that need it read.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use tokio_util::sync::CancellationToken;

use super::bundle::{Bundle, JobEnd, Manifest, secret_variable};
use crate::engine::dispatcher::{Alone, run_alone};
use crate::engine::job_gpus::GrantedGpus;
use crate::engine::{Connect, Engines, EventSink, LogStore, RunOptions, Tee};
use crate::events::{JobRef, JobResult, JobSummary};
use crate::gpu::{HostGpus, LeaseDir, Leased, Request, Want};
use crate::hosts::{Host, HostEndpoint};
use crate::plan::Plan;
use crate::workflow::model::Workflow;

/// What the node was given: the run's folder and the job's number.
pub struct NodeJob {
    pub bundle: Bundle,
    pub index: usize,
    pub manifest: Manifest,
}

impl NodeJob {
    /// Reads the run's manifest and checks that the workflow is the one submitted.
    pub fn open(dir: &std::path::Path, index: usize) -> Result<Self, String> {
        let bundle = Bundle::open(dir);
        let manifest = bundle.manifest()?;
        if index >= manifest.jobs.len() {
            return Err(format!(
                "the run has {} jobs; there is no job {index}",
                manifest.jobs.len()
            ));
        }
        let text = std::fs::read(&manifest.workflow)
            .map_err(|e| format!("cannot read the workflow `{}` on this node: {e} (the workspace must be on a folder the nodes share, docs/slurm.md)", manifest.workflow.display()))?;
        if super::sha256_hex(&text) != manifest.workflow_sha256 {
            return Err(format!(
                "the workflow `{}` changed since the run was submitted: the node runs only what was submitted; submit the run again",
                manifest.workflow.display()
            ));
        }
        Ok(Self {
            bundle,
            index,
            manifest,
        })
    }

    /// Runs the job; how it ended (also written to its `result.json`).
    pub async fn run(
        self,
        wf: Arc<Workflow>,
        plan: Plan,
        view: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> Result<JobEnd, String> {
        let planned = plan
            .jobs
            .get(self.index)
            .ok_or_else(|| format!("the plan has no job {}", self.index))?
            .clone();
        let expected = &self.manifest.jobs[self.index];
        if planned.job_id != expected.job_id || planned.cell != expected.cell {
            return Err(format!(
                "job {} of the plan made here is `{}`, not `{}` as submitted: the workflow or gpuflow differs between this node and the submitting machine",
                self.index, planned.display_name, expected.display
            ));
        }
        let node = node_name();
        let host = self.host();
        let gpus = HostGpus::new(host.gpu_discovery(), LeaseDir::for_host(&node));
        let allocated = allocated_gpus();
        let holder = crate::gpu::Holder::new(&self.manifest.run_id, &planned.display_name);
        let granted = lease_allocated(&gpus, &allocated, &holder).await?;
        let mut engines = Engines::none();
        let connect: Connect = Arc::new(move || {
            let host = host.clone();
            Box::pin(async move { host.connect().await })
        });
        let at = engines.add_host(&node, connect);
        engines.assign(&planned.job_id, planned.cell, at);
        engines.set_gpus(&node, gpus);

        let job_dir = self.bundle.job_dir(self.index);
        let store = Arc::new(LogStore::create(&job_dir).map_err(|e| {
            format!(
                "cannot write the job's logs in `{}`: {e}",
                job_dir.display()
            )
        })?);
        let sink: Arc<dyn EventSink> = Arc::new(Tee(vec![store.clone(), view]));
        // The coordinator follows the job through these files as they grow.
        let flushing = store.keep_flushed(crate::run_logs::FOLLOWED_FLUSH);
        let alone = Alone {
            index: self.index,
            needs: self.needs(&plan),
            gpus: granted,
        };
        let (report, outcome) = run_alone(wf, plan, alone, self.options(), sink, engines, cancel)
            .await
            .map_err(|e| e.to_string())?;
        drop(flushing);
        let allowed = report.jobs.first().is_some_and(|j| j.failure_allowed);
        let end = JobEnd {
            result: report.result,
            failure_allowed: allowed,
            outputs: outcome.outputs,
            failure: outcome.failure,
            node,
            gpus: allocated,
        };
        self.bundle.write_end(self.index, &end)?;
        Ok(end)
    }

    /// The host as the node uses it: its own engine (`DOCKER_HOST` or the local socket), the
    /// GPU inventory the run's host names.
    fn host(&self) -> Host {
        Host {
            endpoint: HostEndpoint::FromEnv,
            gpu_inventory: self.manifest.gpu_inventory.clone(),
            ..Host::local()
        }
    }

    fn options(&self) -> RunOptions {
        let m = &self.manifest;
        let mut opts = RunOptions::new(&m.run_id, &m.workspace);
        opts.log_dir = self.bundle.job_dir(self.index);
        opts.store = m.store.clone();
        opts.inputs = m.inputs.clone();
        opts.vars = m.vars.clone();
        opts.registries = m.registries.clone();
        opts.event = m.event.clone();
        opts.secrets = m
            .secrets
            .iter()
            .filter_map(|name| Some((name.clone(), std::env::var(secret_variable(name)).ok()?)))
            .collect();
        opts
    }

    /// `needs` as the dispatcher would make it, from the ends the jobs it needs wrote; a job
    /// that left no end (Slurm stopped it) counts as failed.
    fn needs(&self, plan: &Plan) -> crate::expr::Value {
        let mut results = Vec::new();
        let mut outputs: HashMap<String, IndexMap<String, String>> = HashMap::new();
        let needed = &plan.jobs[self.index].needs;
        for (i, job) in self.manifest.jobs.iter().enumerate() {
            // Only the jobs it needs are read: a large matrix's cells need nothing of each
            // other.
            if !needed.contains(&job.job_id) {
                results.push(None);
                continue;
            }
            let end = self.bundle.end(i);
            let jref = JobRef {
                job: job.job_id.clone(),
                cell: job.cell,
                display: job.display.clone(),
            };
            let (result, allowed) = end.as_ref().map_or((JobResult::Failure, false), |e| {
                (e.result, e.failure_allowed)
            });
            if let Some(end) = end {
                outputs
                    .entry(job.job_id.clone())
                    .or_default()
                    .extend(end.outputs);
            }
            results.push(Some(JobSummary {
                job: jref,
                result,
                duration: std::time::Duration::ZERO,
                failure_allowed: allowed,
            }));
        }
        let skipped: Vec<String> = plan.skipped.iter().map(|s| s.job_id.clone()).collect();
        crate::engine::dispatcher::needs_context(
            &plan.jobs[self.index],
            &plan.jobs,
            &results,
            &outputs,
            &skipped,
        )
    }
}

/// The node's name as Slurm knows it (`SLURMD_NODENAME`), else the machine's.
pub fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "node".to_string())
}

/// The GPUs Slurm allocated to this job, as the node numbers them (`SLURM_JOB_GPUS=0,3`).
fn allocated_gpus() -> Vec<u32> {
    std::env::var("SLURM_JOB_GPUS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|i| i.trim().parse().ok())
        .collect()
}

/// The allocated GPUs, leased on the node: Slurm gave them to this job, so another gpuflow
/// process of the node holding one is running outside Slurm, and the job does not start.
async fn lease_allocated(
    gpus: &HostGpus,
    allocated: &[u32],
    holder: &crate::gpu::Holder,
) -> Result<GrantedGpus, String> {
    if allocated.is_empty() {
        return Ok(GrantedGpus::default());
    }
    let request = Request {
        want: Want::Ids(allocated.iter().map(u32::to_string).collect()),
        placement: None,
    };
    match gpus.try_lease(&request, holder, None).await? {
        Leased::Now(leased) => Ok(GrantedGpus {
            leased: Some(leased),
            asked: crate::backend::GpuRequest::Count(allocated.len() as u32),
        }),
        Leased::Wait => Err(format!(
            "Slurm allocated GPU {} of this node, but a gpuflow process outside Slurm holds one of them (`gpuflow hosts` on the node says which)",
            allocated
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Leased::Never(why) => Err(format!("the GPUs Slurm allocated cannot be used: {why}")),
    }
}
