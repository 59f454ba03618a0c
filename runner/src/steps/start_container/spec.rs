//! `start-container`: a long-lived container (typically an inference server) that later
//! steps name with `container:`.

use crate::steps::spec::{BuiltinSpec, InputSpec, InputType, OutputSpec};

pub static SPEC: BuiltinSpec = BuiltinSpec {
    name: "start-container",
    summary: "Start a container that lives until the job ends (or a `stop-container` step); later steps refer to it by name.",
    inputs: &[
        InputSpec {
            name: "image",
            ty: InputType::String,
            required: true,
            default: None,
            doc: "The image to run (`lmsysorg/sglang:latest`). Pulled when missing.",
        },
        InputSpec {
            name: "name",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The name later steps use in `container:`. Defaults to the step's `id`.",
        },
        InputSpec {
            name: "command",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The command to run, split like a shell would (`python3 -m sglang.launch_server --tp-size 8`). Defaults to the image's command.",
        },
        InputSpec {
            name: "entrypoint",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Replaces the image's entrypoint.",
        },
        InputSpec {
            name: "env",
            ty: InputType::Map,
            required: false,
            default: None,
            doc: "Environment variables inside the container (`NCCL_DEBUG: INFO`, `HF_TOKEN: ${{ secrets.HF_TOKEN }}`: secrets stay masked in the output). From an expression (a composite action's text input), `NAME=VALUE` lines. `NVIDIA_VISIBLE_DEVICES` is refused when `gpus` is set (gpuflow sets it).",
        },
        InputSpec {
            name: "ports",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Published ports, as `HOST:CONTAINER` (`30000:30000`).",
        },
        InputSpec {
            name: "volumes",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Mounts, as `SOURCE:TARGET[:ro]` (`/models:/models:ro`). A `SOURCE` that is an absolute path is a folder (or file) on the Docker engine's host and must exist: the step fails naming it rather than letting Docker create it empty and owned by root. Any other `SOURCE` is a named Docker volume, created empty when missing. An item holding several lines is one mount a line, and an empty one none: a composite action passes its text inputs so.",
        },
        InputSpec {
            name: "required-paths",
            ty: InputType::List,
            required: false,
            default: None,
            doc: "Paths the command needs in the container before it starts, such as the model's folder (`/models/Qwen3-235B`). Looked for in a throw-away container of the image with the same volumes: by preflight, before any job starts, and by this step before it creates the container. A missing one fails with the volume it was expected from (and where that is on the host) and how to fix it. Empty items and lines are left out.",
        },
        InputSpec {
            name: "workdir",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The working folder inside the container.",
        },
        InputSpec {
            name: "network",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The Docker network to join (`host` shares the host's network).",
        },
        InputSpec {
            name: "memory",
            ty: InputType::ByteSize,
            required: false,
            default: None,
            doc: "A memory limit for the container (swap included). Past it the kernel OOM-kills the container, and a `wait-for-health` watching it fails at once saying so.",
        },
        InputSpec {
            name: "preload-overhead",
            ty: InputType::Map,
            required: false,
            default: None,
            doc: "For the memory estimate of an SGLang or vLLM server (docs/memory.md): what each GPU loses before the weights load (the CUDA context, NCCL and custom all-reduce buffers), by the server's tensor-parallel size: `{1: 1g, 8: 3g}` (a size applies from its GPU count up to the next one given). Default 1 GiB at every size, an allowance, not a measurement; set it from what the server's log says is free before its load (SGLang's first `avail mem`).",
        },
        InputSpec {
            name: "restart",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "Docker's restart policy: `no` (the default), `always`, `unless-stopped`, `on-failure` or `on-failure:N`. A `wait-for-health` watching the container fails at its first restart.",
        },
        InputSpec {
            name: "shm-size",
            ty: InputType::ByteSize,
            required: false,
            default: None,
            doc: "Size of `/dev/shm`. Not needed with `ipc: host`, the default when GPUs are requested.",
        },
        InputSpec {
            name: "ipc",
            ty: InputType::Enum(&["host", "private", "shareable", "none"]),
            required: false,
            default: None,
            doc: "IPC namespace. Defaults to `host` when GPUs are requested (NVIDIA's recommendation for PyTorch servers), else Docker's default.",
        },
        InputSpec {
            name: "ulimits",
            ty: InputType::Map,
            required: false,
            default: None,
            doc: "Resource limits (`memlock: -1`, `stack: 67108864`). With GPUs, NVIDIA's recommended memlock and stack limits are the defaults.",
        },
        InputSpec {
            name: "gpus",
            ty: InputType::Gpus,
            required: false,
            default: None,
            doc: "GPUs for the container: `all`, a count, or device ids / UUIDs; `none` for none of the job's (a client or sidecar in a GPU job). Defaults to the GPUs allocated to the job.",
        },
        InputSpec {
            name: "user",
            ty: InputType::String,
            required: false,
            default: None,
            doc: "The user to run as (`1000:1000`).",
        },
        InputSpec {
            name: "pull",
            ty: InputType::Enum(&["missing", "always", "never"]),
            required: false,
            default: Some("missing"),
            doc: "When to pull the image: `missing` pulls it when the engine lacks it, `always` pulls it once per run (at preflight, before any job starts), `never` refuses an image the engine lacks. Each tag is resolved once per run: every container of the run is created from the image it named then, even if the tag moves meanwhile.",
        },
        InputSpec {
            name: "credentials",
            ty: InputType::Fields(&["username", "password"]),
            required: false,
            default: None,
            doc: "A login for the image's registry, as GitHub's `container.credentials`: `{username: me, password: ${{ secrets.REGISTRY_TOKEN }}}`. Sent to the engine with the pull only (never in a command line, an environment or a file), and the password is masked in every output. Both empty: none. Without it, the login `gpuflow.toml` gives the image's registry (`[registries.\"HOST\"]`), if any, is sent (docs/running.md#private-registries). A registry that refuses the login fails the step before anything starts, with the registry's answer.",
        },
        InputSpec {
            name: "init",
            ty: InputType::Bool,
            required: false,
            default: Some("true"),
            doc: "Run an init process as PID 1, so the server gets signals and stops promptly.",
        },
        InputSpec {
            name: "reuse",
            ty: InputType::Bool,
            required: false,
            default: Some("true"),
            doc: "Share the server with the job's other matrix cells that would start the same one (the same server key: image id, command, entrypoint, env, mounts, ports, GPUs, memory and IPC settings): they run one after another, the first starts it, the next ones adopt it running, the last stops it. `false` starts a fresh server in every cell (docs/campaigns.md).",
        },
        InputSpec {
            name: "keep-warm",
            ty: InputType::Duration,
            required: false,
            default: None,
            doc: "Keep the server running this long (at most `24h`) after the run, on its GPUs: a later run whose step would start the same server (the same server key) adopts it instead of loading it again. Each adoption starts the time again. `gpuflow servers` lists warm servers, `gpuflow servers stop` stops them (docs/campaigns.md#warm-servers-across-runs). Needs `reuse`.",
        },
    ],
    outputs: &[
        OutputSpec {
            name: "name",
            doc: "The container's name, for `container:` in later steps.",
        },
        OutputSpec {
            name: "id",
            doc: "The Docker container id.",
        },
        OutputSpec {
            name: "reused",
            doc: "`true` when a running server was adopted (an earlier cell's, or one an earlier run kept warm): no new container. Else `false`.",
        },
        OutputSpec {
            name: "server-key",
            doc: "The server key, for a cell of a job whose cells can share servers; empty otherwise.",
        },
        OutputSpec {
            name: "cells-before",
            doc: "How many cells the adopted server served before this one, in this run and the earlier runs that kept it warm (`0` for a fresh server).",
        },
        OutputSpec {
            name: "kv-cache-tokens-estimate",
            doc: "For an SGLang or vLLM server (`command` with its model in a folder) on GPUs leased to the job: the KV cache room in tokens estimated from the model's `config.json`, the memory flags and the GPUs' memory (docs/memory.md). Preflight refuses a server whose weights alone exceed its budget.",
        },
        OutputSpec {
            name: "weights-gib-per-gpu",
            doc: "With `kv-cache-tokens-estimate`: the estimated weights each GPU holds, in GiB (`14.96`).",
        },
    ],
    shell_inputs: &[],
    example: r"- id: server
  uses: start-container
  with:
    image: lmsysorg/sglang:latest
    command: python3 -m sglang.launch_server --model-path /models/qwen --tp-size 8 --port 30000
    gpus: all
    ports: ['30000:30000']
    volumes: ['/models:/models:ro']
",
};
