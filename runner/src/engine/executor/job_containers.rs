//! A job's containers: its `services:` and its `container:`, started on the job's network
//! before the first step, the connection to its host's engine made the first time a step needs
//! it, and everything the job started removed (or kept) at its end.

use std::sync::Arc;

use indexmap::IndexMap;

use super::job_run::JobRun;
use crate::backend::{ContainerSpec, GpuRequest};
use crate::diag::SourceFile;
use crate::engine::container_runner::ContainerRunner;
use crate::engine::containers::JobContainers;
use crate::engine::evaluate::{eval_string, object};
use crate::events::EventKind;
use crate::expr::Value;
use crate::workflow::model::{Container, Job};

impl JobRun {
    /// The job's containers on its host's engine, connecting to it the first time.
    pub(super) async fn containers(&mut self) -> Result<&mut JobContainers, String> {
        if self.containers.is_none() {
            let docker = self.shared.engines.for_job(&self.jref).await?;
            let fresh = self.fresh_server_step();
            self.containers = Some(
                JobContainers::new(docker, &self.shared.opts.run_id, &self.jref)
                    .kept(self.shared.opts.keep_containers)
                    .with_servers(self.shared.servers.clone())
                    .with_fresh_server(fresh),
            );
        }
        Ok(self.containers.as_mut().expect("set above"))
    }

    /// Services, then the job's container: all on the job's network, before the first step.
    pub(super) async fn start_containers(&mut self, job: &Job) -> Result<(), String> {
        if job.container.is_none() && job.services.is_empty() {
            return Ok(());
        }
        let mut job_ctx = IndexMap::new();
        let services = self.start_services(job).await?;
        job_ctx.insert("services".to_string(), Value::Object(services));
        if let Some(container) = &job.container {
            let id = self.start_job_container(container).await?;
            job_ctx.insert("container".into(), object([("id", Value::String(id))]));
        }
        job_ctx.insert("status".into(), Value::String("success".into()));
        self.contexts.insert("job".into(), Value::Object(job_ctx));
        Ok(())
    }

    /// The job's `services:`, started in order; the `services` of its `job` context.
    async fn start_services(&mut self, job: &Job) -> Result<IndexMap<String, Value>, String> {
        let file = self.shared.wf.file.clone();
        let mut services = IndexMap::new();
        for (name, service) in &job.services {
            let spec = self.container_spec(service, &file)?;
            let jref = self.jref.clone();
            let host = self.step_host();
            let containers = self.containers().await?;
            let started = containers
                .start(&host, &jref, name, spec)
                .await
                .map_err(|e| format!("could not start service `{name}`: {e}"))?;
            services.insert(
                name.clone(),
                object([("id", Value::String(started.id.clone()))]),
            );
        }
        Ok(services)
    }

    /// The job's `container:`, which its scripts then run in; its id.
    async fn start_job_container(&mut self, container: &Container) -> Result<String, String> {
        let file = self.shared.wf.file.clone();
        let mut spec = self.container_spec(container, &file)?;
        // The job's container stays up for the steps exec'd into it, whatever its image
        // runs by default; the workspace is where steps start, as on the host.
        spec.entrypoint = Some(vec!["tail".into()]);
        spec.command = Some(vec!["-f".into(), "/dev/null".into()]);
        let workspace = self.shared.opts.workspace.display().to_string();
        spec.volumes.push(crate::backend::VolumeMount {
            source: workspace.clone(),
            target: workspace.clone(),
            read_only: false,
        });
        spec.workdir = Some(workspace);
        if let Some(gpus) = self.job_gpus() {
            spec.gpus = gpus;
        }
        let jref = self.jref.clone();
        let grace = self.shared.opts.grace;
        let host = self.step_host();
        let containers = self.containers().await?;
        let started = containers
            .start(&host, &jref, "job-container", spec)
            .await
            .map_err(|e| format!("could not start the job's container: {e}"))?;
        let (id, shell) = (started.id.clone(), started.shell.clone());
        let docker = containers.docker.clone();
        self.job_container = Some(ContainerRunner::new(
            docker,
            id.clone(),
            "job-container",
            grace,
            shell,
        ));
        Ok(id)
    }

    fn container_spec(
        &self,
        c: &Container,
        file: &Arc<SourceFile>,
    ) -> Result<ContainerSpec, String> {
        let ctx = self.ctx_with_env(None);
        let mut spec = ContainerSpec::new(eval_string(&c.image, &ctx, file)?);
        for (k, v) in &c.env {
            spec.env.insert(k.clone(), eval_string(v, &ctx, file)?);
        }
        for p in &c.ports {
            spec.ports
                .push(crate::engine::container_inputs::port(&eval_string(
                    p, &ctx, file,
                )?)?);
        }
        for v in &c.volumes {
            spec.volumes
                .push(crate::engine::container_inputs::volume(&eval_string(
                    v, &ctx, file,
                )?)?);
        }
        if let Some(o) = &c.options
            && !o.value.trim().is_empty()
        {
            return Err(format!(
                "{}: container `options` are not supported yet",
                file.location(o.span)
            ));
        }
        Ok(spec)
    }

    /// What the job's containers get: the leased GPUs by UUID (UUIDs, unlike indexes, do not
    /// depend on `CUDA_DEVICE_ORDER`), or, when the host's GPUs are not known to the run, the
    /// job's `gpus:` as evaluated when it started.
    pub(super) fn job_gpus(&self) -> Option<GpuRequest> {
        match (&self.gpus, &self.asked_gpus) {
            (Some(leased), _) => Some(GpuRequest::Devices(leased.uuids())),
            (None, GpuRequest::None) => None,
            (None, asked) => Some(asked.clone()),
        }
    }

    /// The label of a `benchmark` step of the job that asks for a freshly started server
    /// (`fresh: true`): known before any server starts, so none is adopted.
    fn fresh_server_step(&self) -> Option<String> {
        let job = self.shared.wf.jobs.get(&self.job_id)?;
        let ctx = self.ctx_with_env(None);
        job.steps.iter().enumerate().find_map(|(i, step)| {
            let benchmark = step.uses.as_ref().is_some_and(|u| {
                matches!(&u.value, crate::workflow::model::Uses::Builtin(b) if b == "benchmark")
            });
            let fresh = step.with.get("fresh").is_some_and(|v| {
                crate::engine::evaluate::eval_value(v, &ctx, &self.shared.wf.file)
                    .is_ok_and(|v| v.to_expr_string() == "true")
            });
            (benchmark && fresh).then(|| {
                step.id
                    .as_ref()
                    .map(|id| id.value.clone())
                    .unwrap_or_else(|| format!("step {}", i + 1))
            })
        })
    }

    /// Leftover processes killed, and the job's containers removed (or, with
    /// `--keep-containers`, named).
    pub(super) async fn clean_up(&mut self) {
        self.host.kill_leftovers();
        if self.shared.opts.keep_containers {
            if let Some(c) = &self.containers
                && !c.started.is_empty()
            {
                let names: Vec<&str> = c.started.values().map(|s| s.docker_name.as_str()).collect();
                self.say(
                    None,
                    &format!(
                        "kept containers (--keep-containers): {}; they stay until `gpuflow gc` removes them",
                        names.join(", ")
                    ),
                );
            }
            return;
        }
        // A cell that leased the GPUs of a server an earlier cell kept, and did not adopt it,
        // gives them back to it: they are the devices it runs on.
        if let Some(lease) = self.gpus.take() {
            self.gpus = self.shared.servers.give_back_lease(&self.jref, lease);
        }
        if let Some(mut containers) = self.containers.take() {
            let shared = self.shared.clone();
            if containers
                .park_reusable(&self.step_host(), &self.jref)
                .await
                && let Some(lease) = self.gpus.take()
            {
                // The parked server keeps running on the job's GPUs: its lease goes with it.
                self.gpus = shared.servers.give_back_lease(&self.jref, lease);
            }
            for problem in containers.remove_all(&self.step_host(), &self.jref).await {
                shared.emit(EventKind::Warning {
                    job: Some(self.jref.clone()),
                    message: format!("could not remove {problem}"),
                });
            }
        }
    }
}
