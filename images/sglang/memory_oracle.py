#!/usr/bin/env python3
"""SGLang's own memory arithmetic, run from the pinned release's sources: gpuflow's oracle.

gpuflow estimates an SGLang server's KV-cache room before it starts (runner/src/memory/,
docs/memory.md). This harness answers the same questions with SGLang 0.5.23's own code, so the
test runner/tests/memory_oracle.rs can compare the two without a GPU:

    memory_oracle.py < cases.json > answers.json

Input: a JSON list of cases,
    {"gpu_mib": 46068, "args": ["--model-path", "/m", "--tp-size", "8", ...],
     "config": {...the model's config.json...}, "draft_config": {...} or null}
`args` are `python -m sglang.launch_server`'s arguments. Output: a JSON list, one object per
case, in order:
    {"mem_fraction_static": f,       # the given fraction, else SGLang's default for this GPU
     "chunked_prefill_size": n,      # SGLang's GPU-size default (or the given one)
     "decode_max_bs": n,             # the decode CUDA-graph max batch size it settled on
     "prefill_graph_bs_count": n,    # how many prefill CUDA-graph sizes it will capture
     "gpu_mem_mib": x,               # the GPU size SGLang read (nvidia-smi's smallest)
     "cell_size": bytes,             # KV bytes per token per GPU, the EAGLE draft's included
     "kv_cache_dtype": "...",        # the dtype of the pool, as SGLang resolved it
     "error": null or text}          # why SGLang's code refused or failed, then no numbers

Run it with the venv and sources images/sglang/sglang-parser.sh makes:
    SGLANG_PARSER_ROOT=<cache>/lib <cache>/venv/bin/python images/sglang/memory_oracle.py

What runs for real (SGLang's code, executed as it is in the wheel):

  - `sglang.srt.server_args.prepare_server_args(args)`: the real parser (via parser.py).
  - The CUDA-graph step of SGLang's resolution pipeline, `handle_cuda_graph_config`
    (arg_groups/cuda_graph_hook.py: `parse_cuda_graph_config`, `apply_cuda_graph_compatibility`
    and the breakable-graph compatibility rules, DeepEP and disaggregation adjustments,
    validation), imported as the real module.
  - `sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings`, imported as the real module:
    chunked prefill and decode max batch size by GPU size, the CUDA-graph batch sizes
    (`generate_*_cuda_graph_batch_sizes`), `reserve_for_graph_mb`, the 10 GiB floor above
    60 GiB, `round((gpu_mem - reserved) / gpu_mem, 3)`.
  - The GPU size it reads: `get_device_memory_capacity` -> `get_nvgpu_memory_capacity`
    (utils/common.py), which runs `nvidia-smi --query-gpu=memory.total ...`: the `nvidia-smi`
    it finds first on PATH is a script this harness writes, printing the case's `gpu_mib` once
    per GPU of the tensor-parallel group. SGLang's own parsing of that output runs.
  - Resolution's bookkeeping: `declare_resolution`, `post_capture_kv_sizing_planned`
    (overrides.py), `resolving_view`, `resolved_view`, `model_config_of`, `use_mla_backend`
    (model_override_base.py), `attn_dp_enabled_of`, `get_platform` (runtime_context.py, the
    real module), `envs` (environ.py, the real module).
  - The model's shape as SGLang reads it: `ModelConfig._derive_model_shapes`,
    `_config_draft_model`, `_derive_hybrid_model`, `get_total_num_kv_heads`,
    `get_num_kv_heads` (configs/model_config.py) on the case's config, and
    `_get_and_verify_dtype` (the served dtype of `--dtype`).
  - The KV dtype: `configure_kv_cache_dtype` (mem_cache/kv_cache_dtype.py).
  - The KV cell: `create_memory_pool_configurator` and `DefaultPoolConfigurator.__init__` /
    `_compute_cell_size` (model_executor/pool_configurator.py), with the layer count from
    `resolve_layer_indices` (model_runner_components/layer_setup.py), MLA's
    `calculate_mla_kv_cache_dim`, and the EAGLE draft's layer count from
    `_resolve_eagle_aux_hidden_state` (model_runner_components/spec_aux_hidden_state.py) and
    `SpeculativeAlgorithm` (speculative/spec_info.py).

Where a definition's file imports torch (or transformers, CUDA kernels, ...) at top level,
the definitions are taken from the real file's syntax tree by name and executed unchanged, as
parser.py's EXTRACTED does; what they need from the modules they did not import is handed to
them below, each with why. Nothing SGLang computes is re-typed here.

What is stubbed, and why (inputs only; each stub is also commented where it is made):

  - The platform: `is_cuda()` is True and `current_platform` is an in-tree platform (not
    out-of-tree), and the platform facts `get_platform()` answers are set through SGLang's own
    `override_platform` (CUDA; not HIP, NPU, XPU, MUSA or MPS): gpuflow models NVIDIA GPUs, and
    the probes ask torch and the driver.
  - `device` is declared "cuda", what SGLang's `handle_missing_default_values` declares on a
    CUDA machine (its `get_device()` asks torch). The pipeline's other earlier steps are not
    run: for these command lines (no PD disaggregation, DP attention, context parallelism,
    hardware runtimes or plugins) they declare nothing the memory step reads.
  - torch's dtypes: small objects with the element size torch gives them (bfloat16 2, float8
    1, ...) and `torch._utils._element_size` reading it: all of torch the KV cell needs.
  - The Hugging Face config: the case's config.json as an attribute namespace, as transformers'
    `PretrainedConfig` exposes it (its `dtype` is config.json's `torch_dtype`, as transformers
    aliases it). ModelConfig's `__init__` (which downloads and parses it with transformers) is
    not run; its shape derivations named above are.
  - The runtime's published config bags SGLang's pool code reads after the server is set up
    (`get_parallel()`, `get_schedule()`, `get_memory()`, `get_spec()`): objects carrying the
    parsed server arguments' values for the fields read (tensor-parallel size,
    `--max-total-tokens`, the draft's path; no decode context parallelism, no HiSparse).
  - ModelConfig's `is_multimodal` is `is_multimodal_model(architectures)` (SGLang's own
    list): `__init__` also counts vision and audio sub-configs, which these configs lack.
  - No model object (`model=None` where SGLang passes the loaded model): one pipeline stage
    holds every layer, and the checkpoint asks for no FP8 KV cache of its own.
  - `mambaish_config` is None and `compute_page_shard_scratch_bytes` is 0: the models here
    have no Mamba or linear-attention layers (the real function walks SGLang's registry of
    hybrid configs, all transformers classes), and logical-page KV sharding
    (`--enable-kv-cache-sharding`, refused here) is off.
  - `fused_entry_bytes` is None: the draft fuses into a host sub-pool only under the unified
    memory pool with a hybrid SWA or Mamba host, neither of which these cases are.
  - Speculative-algorithm plugins: none registered (`get_spec` of the plugin registry is None).
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
# parser.py is loaded from the clone: no __pycache__ left beside it.
sys.dont_write_bytecode = True


def _load_harness():
    """parser.py, the SGLang parser harness: its import shims and extraction are reused."""
    spec = importlib.util.spec_from_file_location("gpuflow_sglang_parser", os.path.join(HERE, "parser.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
ROOT = harness.ROOT
# What an extracted definition's file may still import for real: the standard library and the
# pure-Python packages of the venv (msgspec: SGLang's records are msgspec Structs).
IMPORTABLE = set(sys.stdlib_module_names) | harness.EXTRA_IMPORTABLE | {"msgspec", "__future__"}


class Partial(harness.UnavailableModule):
    """A module holding some definitions from its real file (executed unchanged) and the inputs
    handed to them; any other name is a placeholder that raises if used, naming the module."""


def _real(module: types.ModuleType, rel: str, wanted: list[str]) -> types.ModuleType:
    """Executes, in `module`, the definitions `wanted` from the real file `rel` (under ROOT),
    with the file's imports of IMPORTABLE. "Class.method" takes one method of a class: the class
    is defined (its bases and decorators as they are) with only the methods asked for, and no
    class attributes (its other methods and attributes need what is not here)."""
    path = os.path.join(ROOT, rel)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    plain = {w for w in wanted if "." not in w}
    methods: dict[str, set[str]] = {}
    for w in wanted:
        if "." in w:
            cls, meth = w.split(".", 1)
            methods.setdefault(cls, set()).add(meth)
    body, found = [], set()
    for node in tree.body:
        key = harness._module_key(node)
        if key is not None and key in IMPORTABLE:
            body.append(node)
            continue
        names = set(harness._defined_names(node))
        if names & plain:
            body.append(node)
            found |= names & plain
        elif isinstance(node, ast.ClassDef) and node.name in methods:
            keep = [
                n
                for n in node.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in methods[node.name]
            ]
            found |= {f"{node.name}.{n.name}" for n in keep}
            cls = copy.copy(node)
            cls.body = keep or [ast.Pass()]
            body.append(cls)
    missing = sorted(set(wanted) - found)
    if missing:
        raise SystemExit(f"gpuflow sglang memory oracle: {path} no longer defines {', '.join(missing)}; update {__file__}")
    module.__file__ = path
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), module.__dict__)
    return module


def _partial(name: str, why: str, rel: str | None, wanted: list[str], **inputs) -> types.ModuleType:
    """sys.modules[name]: `wanted` from the real file `rel`, `inputs` as its other globals."""
    module = Partial(name, why)
    module.__dict__.update(inputs)
    if rel is not None:
        _real(module, rel, wanted)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module


def _shim_package(name: str) -> None:
    """A package whose __init__ is skipped (it imports torch); its submodules load from files."""
    package = types.ModuleType(name)
    package.__path__ = [os.path.join(ROOT, *name.split("."))]
    package.__file__ = None
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, package)


class TorchDtype:
    """Stands in for a `torch.dtype`: its name and element size (what torch says of it)."""

    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return f"torch.{self.name}"


# torch, as far as SGLang's KV-cell code uses it: the dtypes it names, their element sizes
# (torch._utils._element_size) and the dtype type (isinstance checks). No float4 type: the
# FP4 KV branches (`is_float4_e2m1fn_x2`) are not taken, as with a torch that lacks it.
TORCH = types.SimpleNamespace(
    dtype=TorchDtype,
    float32=TorchDtype("float32", 4),
    float16=TorchDtype("float16", 2),
    bfloat16=TorchDtype("bfloat16", 2),
    float8_e4m3fn=TorchDtype("float8_e4m3fn", 1),
    float8_e4m3fnuz=TorchDtype("float8_e4m3fnuz", 1),
    float8_e5m2=TorchDtype("float8_e5m2", 1),
    _utils=types.SimpleNamespace(_element_size=lambda dtype: dtype.itemsize),
)


def _is_cuda() -> bool:
    # Input: the GPUs gpuflow models are NVIDIA's. SGLang asks torch.cuda.is_available().
    return True


class _InTreePlatform:
    # Input: SGLang's `current_platform` (sglang/srt/platforms, torch) is an out-of-tree plugin
    # only when one is installed; with CUDA it is the in-tree one, whose memory query is
    # nvidia-smi's.
    @staticmethod
    def is_out_of_tree() -> bool:
        return False

    @staticmethod
    def is_cpu() -> bool:
        return False


def _cuda_mem_fallback(reason: str):
    # SGLang falls back to torch.cuda.mem_get_info() when nvidia-smi fails; here that means the
    # fake nvidia-smi did not answer, which is this harness's fault: say so.
    raise RuntimeError(f"gpuflow memory oracle: the fake nvidia-smi did not answer ({reason})")



# The resolution bookkeeping overrides.py takes from model_override_base.py and re-exports.
BASE_REEXPORTS = (
    "ResolvedView",
    "ResolvingConfig",
    "resolving_view",
    "_declaration_overlay",
    "resolved_view",
    "record_of",
    "attention_backends_of",
    "use_mla_backend",
    "model_config_of",
)

def install() -> types.SimpleNamespace:
    """The import shims of parser.py, then the modules the memory step needs."""
    harness.install_import_shims()
    server_args = importlib.import_module("sglang.srt.server_args")
    runtime_context = importlib.import_module("sglang.srt.runtime_context")
    environ = importlib.import_module("sglang.srt.environ")
    arg_utils = importlib.import_module("sglang.srt.arg_groups.arg_utils")

    # utils/common.py imports torch, triton, ...: its GPU-size query and the predicates the
    # memory step calls, from the real file, beside what parser.py already took from it.
    common = sys.modules["sglang.srt.utils.common"]
    common.is_cuda = _is_cuda
    common.current_platform = _InTreePlatform
    common._cuda_mem_fallback = _cuda_mem_fallback
    common.torch = TORCH
    _real(
        common,
        "sglang/srt/utils/common.py",
        ["get_nvgpu_memory_capacity", "get_device_memory_capacity", "is_float4_e2m1fn_x2", "parse_connector_type"],
    )
    utils = sys.modules["sglang.srt.utils"]
    for attr in ("is_cuda", "get_device_memory_capacity", "parse_connector_type"):
        setattr(utils, attr, getattr(common, attr))

    # The platform facts every reader asks through get_platform(), set by SGLang's own
    # override_platform (the probes ask torch): a CUDA machine.
    runtime_context.override_platform(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False
    ).install()

    # configs/__init__.py imports every model's transformers config class.
    _shim_package("sglang.srt.configs")
    # Dots3Config is a transformers class; no config here is one (isinstance is False).
    _partial("sglang.srt.configs.dots3", "a transformers config class", None, [], Dots3Config=type("Dots3Config", (), {}))
    model_config = _partial(
        "sglang.srt.configs.model_config",
        "imports torch and transformers at top level",
        "sglang/srt/configs/model_config.py",
        [
            "AttentionArch",
            "PURE_MAMBA1_ARCHITECTURES",
            "PURE_SSM_ARCHITECTURES",
            "MIMO_V2_MODEL_ARCHS",
            "MIMO_V2_MULTIMODAL_ARCHS",
            "SWA_SINK_ARCHS",
            "_STR_DTYPE_TO_TORCH_DTYPE",
            "_get_and_verify_dtype",
            "_hf_arch",
            "_hf_attr",
            "is_deepseek_dsa",
            "is_deepseek_v4",
            "is_qwen4_exp",
            "is_minimax_sparse",
            "uses_kda_attention",
            "get_dsa_index_head_dim",
            "resolve_spec_hidden_size",
            "compute_mla_mscale_scaling",
            "yarn_get_mscale",
            "is_hybrid_swa_model",
            "get_hybrid_layer_ids",
            "multimodal_model_archs",
            "is_multimodal_model",
            "ModelConfig._config_draft_model",
            "ModelConfig._derive_context_length",
            "ModelConfig._derive_model_shapes",
            "ModelConfig._init_mla_scaling",
            "ModelConfig._derive_hybrid_model",
            "ModelConfig._detect_attention_sinks",
            "ModelConfig.get_total_num_kv_heads",
            "ModelConfig.get_num_kv_heads",
        ],
        torch=TORCH,
        envs=environ.envs,
        logger=runtime_context.logger,
        # From utils/hf_transformers/common.py (transformers, torch) and sglang/utils.py.
        get_context_length=_real(
            types.ModuleType("gpuflow_sglang_hf_common"),
            "sglang/srt/utils/hf_transformers/common.py",
            ["CONTEXT_LENGTH_KEYS", "get_context_length"],
        ).get_context_length,
        is_in_ci=_partial("gpuflow_sglang_utils", "imports torch", "sglang/utils.py", ["is_in_ci"], envs=environ.envs).is_in_ci,
    )

    # model_override_base.py imports sglang.srt.platforms (torch); overrides.py imports it and
    # the model configs. The resolution bookkeeping the memory step uses, from the real files.
    base = _partial(
        "sglang.srt.arg_groups.model_override_base",
        "imports sglang.srt.platforms (torch)",
        "sglang/srt/arg_groups/model_override_base.py",
        [*BASE_REEXPORTS, "ep_scale_joiner_of"],
        logger=runtime_context.logger,
    )
    overrides = _partial(
        "sglang.srt.arg_groups.overrides",
        "imports the model configs and torch",
        "sglang/srt/arg_groups/overrides.py",
        ["declare_resolution", "post_capture_kv_sizing_planned", "max_prefill_buffer_tokens"],
        # What overrides.py imports from these modules, as it does.
        is_record=arg_utils.is_record,
        field_names=arg_utils.field_names,
        get_context=runtime_context.get_context,
        envs=environ.envs,
        Backend=importlib.import_module("sglang.srt.model_executor.cuda_graph_config").Backend,
        prefill_buffer_ceiling_of=importlib.import_module(
            "sglang.srt.arg_groups.prefill_buffer_ceiling"
        ).prefill_buffer_ceiling_of,
    )
    # overrides.py re-exports model_override_base's names (its own `from ... import`).
    for attr in BASE_REEXPORTS:
        setattr(overrides, attr, getattr(base, attr))

    # The connectors import torch; cuda_graph_hook imports ConnectorType but the CUDA-graph
    # step never uses it.
    sys.modules["sglang.srt.connector"] = harness.UnavailableModule("sglang.srt.connector", "the model-weight connectors import torch")
    # model_overrides/__init__.py imports every family's overrides (torch); memory_hook needs
    # one function of qwen3_vl.py (a no-op unless --max-running-requests is at most 512 on a
    # large Hopper Qwen3-VL).
    _shim_package("sglang.srt.arg_groups.model_overrides")
    _partial(
        "sglang.srt.arg_groups.model_overrides.qwen3_vl",
        "imports model_override_base and utils.common (torch)",
        "sglang/srt/arg_groups/model_overrides/qwen3_vl.py",
        ["_HOPPER_QWEN3_VL_TYPES", "large_hopper_qwen3_vl_model_type", "expand_multimodal_decode_graph_to_running_limit"],
        resolving_view=base.resolving_view,
        model_config_of=base.model_config_of,
        get_device_memory_capacity=common.get_device_memory_capacity,
        logger=runtime_context.logger,
    )
    # layers/cp/ imports the CP kernels (torch): the predicates the graph rules ask.
    _shim_package("sglang.srt.layers.cp")
    _partial(
        "sglang.srt.layers.cp.bcg",
        "imports the CP kernels (torch)",
        "sglang/srt/layers/cp/bcg/__init__.py",
        ["supports_prefill_cp_bcg"],
        resolving_view=base.resolving_view,
        resolved_view=base.resolved_view,
        attention_backends_of=base.attention_backends_of,
    )
    _partial(
        "sglang.srt.layers.cp.utils",
        "imports the CP kernels (torch)",
        "sglang/srt/layers/cp/utils.py",
        ["is_glm_dsa_cache_layer_split_enabled", "get_glm_dsa_layer_split_effective_num_layers"],
        get_parallel=lambda: _CASE.parallel,
    )
    # mem_cache/kv_cache_configurator.py and kv_cache_dtype.py import torch and the pools.
    _shim_package("sglang.srt.mem_cache")
    _partial(
        "sglang.srt.mem_cache.kv_cache_configurator",
        "imports torch and the memory pools",
        "sglang/srt/mem_cache/kv_cache_configurator.py",
        ["calculate_mla_kv_cache_dim"],
        is_deepseek_dsa=model_config.is_deepseek_dsa,
    )
    kv_cache_dtype = _partial(
        "gpuflow_sglang_kv_cache_dtype",
        "imports torch and the FP8 kernels",
        "sglang/srt/mem_cache/kv_cache_dtype.py",
        ["TORCH_DTYPE_TO_KV_CACHE_STR", "configure_kv_cache_dtype"],
        torch=TORCH,
        current_platform=_InTreePlatform,
        # Input: SGLang's `_is_hip = is_hip()` at import; a CUDA machine is not HIP.
        _is_hip=False,
        logger=runtime_context.logger,
    )
    # qsa_kv_pool.py imports torch; _compute_qsa_cell_size imports it before asking whether the
    # model has QSA layers (none here: parse_qsa_profile, real, says None).
    sys.modules["sglang.srt.mem_cache.qsa_kv_pool"] = harness.UnavailableModule(
        "sglang.srt.mem_cache.qsa_kv_pool", "the QSA pool imports torch"
    )
    # speculative/spec_registry.py and spec_info.py import torch: the algorithm enum.
    registry = _partial(
        "gpuflow_sglang_spec_registry",
        "imports torch",
        "sglang/srt/speculative/spec_registry.py",
        ["_RESERVED_ALIASES", "CustomSpecAlgo"],
    )
    spec_info = _partial(
        "gpuflow_sglang_spec_info",
        "imports torch",
        "sglang/srt/speculative/spec_info.py",
        ["SpeculativeAlgorithm"],
        _RESERVED_ALIASES=registry._RESERVED_ALIASES,
        CustomSpecAlgo=registry.CustomSpecAlgo,
        # Input: no speculative-algorithm plugin is registered.
        _get_registered_spec=lambda name: None,
    )
    layer_setup = _partial(
        "gpuflow_sglang_layer_setup",
        "imports torch.nn",
        "sglang/srt/model_executor/model_runner_components/layer_setup.py",
        [
            "_get_loop_num",
            "_PPLayerRange",
            "ModelLayerInfo",
            "resolve_layer_indices",
            "_compute_model_num_layers",
            "_resolve_pp_layer_range",
            "_resolve_local_hybrid_swa_layer_ids",
        ],
    )
    spec_aux = _partial(
        "gpuflow_sglang_spec_aux",
        "imports the model config (torch, transformers)",
        "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py",
        ["SpecAuxHiddenStateConfig", "_resolve_eagle_aux_hidden_state"],
        get_spec=lambda: _CASE.spec,
        # Input: what ModelConfig.from_server_args builds for the draft (it reads the draft's
        # config.json with transformers): the case's draft config, built as the target's is.
        ModelConfig=types.SimpleNamespace(from_server_args=lambda *a, **k: _CASE.draft_model_config()),
        logger=runtime_context.logger,
    )
    pool = _partial(
        "gpuflow_sglang_pool_configurator",
        "imports torch and every memory pool",
        "sglang/srt/model_executor/pool_configurator.py",
        [
            "MemoryPoolConfigurator",
            "DefaultPoolConfigurator.__init__",
            "DefaultPoolConfigurator._compute_cell_size",
            "DefaultPoolConfigurator._compute_qsa_cell_size",
            "create_memory_pool_configurator",
        ],
        torch=TORCH,
        envs=environ.envs,
        resolving_view=base.resolving_view,
        AttentionArch=model_config.AttentionArch,
        is_deepseek_dsa=model_config.is_deepseek_dsa,
        is_deepseek_v4=model_config.is_deepseek_v4,
        is_minimax_sparse=model_config.is_minimax_sparse,
        is_float4_e2m1fn_x2=common.is_float4_e2m1fn_x2,
        # Inputs: the runtime's published bags (see the docstring).
        get_parallel=lambda: _CASE.parallel,
        get_schedule=lambda: _CASE.schedule,
        get_memory=lambda: _CASE.memory,
        # Input: the models here have no Mamba or linear-attention layers (the real function
        # walks SGLang's registry of hybrid transformers configs).
        mambaish_config=lambda model_config: None,
        # Input: logical-page KV sharding is off (refused in `case` below), so the real
        # function's spec is None and its scratch 0.
        compute_page_shard_scratch_bytes=lambda kvc, include_mtp=False: 0,
    )
    cuda_graph_hook = importlib.import_module("sglang.srt.arg_groups.cuda_graph_hook")
    memory_hook = importlib.import_module("sglang.srt.arg_groups.memory_hook")
    return types.SimpleNamespace(
        server_args=server_args,
        runtime_context=runtime_context,
        model_config=model_config,
        overrides=overrides,
        cuda_graph_hook=cuda_graph_hook,
        memory_hook=memory_hook,
        kv_cache_dtype=kv_cache_dtype,
        spec_info=spec_info,
        layer_setup=layer_setup,
        spec_aux=spec_aux,
        pool=pool,
    )


class HfConfig(types.SimpleNamespace):
    """A config.json as transformers' PretrainedConfig exposes it: its keys as attributes
    (nested objects stay dicts, as they do there), `dtype` aliasing `torch_dtype`."""

    def __init__(self, raw: dict):
        super().__init__(**raw)
        if "dtype" not in raw:
            self.dtype = raw.get("torch_dtype")


class Case:
    """What SGLang's runtime would have published for one case (the inputs of the pool code)."""

    def __init__(self, mods, args, config: dict, draft_config: dict | None):
        self.mods, self.args, self.config, self.draft_config = mods, args, config, draft_config
        self.parallel = types.SimpleNamespace(
            attn_tp_size=args.tp_size,
            # No decode context parallelism or prefill CP here (refused below).
            attn_dcp_size=1,
            attn_cp_size=1,
            enable_dsa_cache_layer_split=False,
        )
        self.schedule = types.SimpleNamespace(max_total_tokens=args.max_total_tokens)
        self.memory = types.SimpleNamespace(enable_hisparse=False, enable_unified_memory=False)
        self.spec = types.SimpleNamespace(
            speculative_draft_model_path=args.speculative_draft_model_path,
            speculative_draft_model_revision=args.speculative_draft_model_revision,
            enable_multi_layer_eagle=False,
        )

    def model_config(self, raw: dict, is_draft: bool):
        """SGLang's ModelConfig of `raw`, its shape derivations run (see the docstring)."""
        mc = object.__new__(self.mods.model_config.ModelConfig)
        mc.model_path = self.args.model_path
        mc.is_draft_model = is_draft
        mc.speculative_algorithm = self.args.speculative_algorithm
        mc.quantization = self.args.quantization
        mc.disable_hybrid_swa_memory = self.args.disable_hybrid_swa_memory
        mc.hf_config = HfConfig(copy.deepcopy(raw))
        if isinstance(getattr(mc.hf_config, "text_config", None), dict):
            mc.hf_text_config = HfConfig(mc.hf_config.text_config)
        else:
            mc.hf_text_config = mc.hf_config
        mc._config_draft_model()
        # Multimodal only by architecture here (no vision/audio towers in these configs).
        mc.is_multimodal = self.mods.model_config.is_multimodal_model(mc.hf_config.architectures)
        mc.dtype = self.mods.model_config._get_and_verify_dtype(mc.hf_text_config, self.args.dtype)
        mc._derive_context_length(self.args.context_length)
        mc._derive_model_shapes()
        mc._derive_hybrid_model()
        return mc

    def draft_model_config(self):
        if self.draft_config is None:
            raise ValueError("--speculative-draft-model-path given but the case has no draft_config")
        return self.model_config(self.draft_config, is_draft=True)


_CASE: Case | None = None


def _fake_nvidia_smi(folder: str, gpu_mib: int, gpus: int) -> None:
    """An `nvidia-smi` that answers SGLang's query as the driver does: one total per GPU."""
    path = os.path.join(folder, "nvidia-smi")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# gpuflow memory oracle: the GPU table's figure, once per GPU.\n")
        f.write(f'for i in $(seq {gpus}); do echo "{gpu_mib}"; done\n')
    os.chmod(path, 0o755)


def run_case(mods, case: dict, bin_dir: str) -> dict:
    global _CASE
    args = mods.server_args.prepare_server_args(list(case["args"]))
    # Refused here: what the stubs above assume is off.
    for flag, on in (
        ("--enable-kv-cache-sharding", args.enable_kv_cache_sharding),
        ("--enable-dp-attention", args.enable_dp_attention),
        ("--pp-size > 1", args.pp_size > 1),
        ("--disaggregation-mode", args.disaggregation_mode != "null"),
    ):
        if on:
            raise ValueError(f"{flag} is not modelled by gpuflow's memory oracle")
    _CASE = Case(mods, args, case["config"], case.get("draft_config"))
    _fake_nvidia_smi(bin_dir, int(case["gpu_mib"]), args.tp_size)

    # Resolution as the pipeline starts it (pipeline.py: the raw input, an empty stash).
    args._raw_input = {name: getattr(args, name) for name in mods.overrides.field_names(type(args))}
    args._resolved_overrides = []
    # The target's ModelConfig, handed to model_config_of as a fixture (its memo without a
    # built-from key: model_config_of hands it back as it is).
    target = _CASE.model_config(case["config"], is_draft=False)
    args._model_config = target
    # What handle_missing_default_values declares on a CUDA machine (get_device() is "cuda").
    mods.overrides.declare_resolution(args, "_handle_missing_default_values", device="cuda")
    mods.cuda_graph_hook.handle_cuda_graph_config(args)
    mods.memory_hook.handle_gpu_memory_settings(args)
    cfg = mods.overrides.resolving_view(args)
    graphs = cfg.cuda_graph_config

    # The GPU size SGLang read (its own query of the fake nvidia-smi), to show beside the rest.
    gpu_mem = sys.modules["sglang.srt.utils.common"].get_device_memory_capacity(cfg.device)

    # The KV cell, as the model runner builds it after the weights load.
    spec_algorithm = mods.spec_info.SpeculativeAlgorithm.from_string(args.speculative_algorithm)
    resolved_str, kv_dtype = mods.kv_cache_dtype.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=args.kv_cache_dtype,
        # Input: no model object; its quant_config only matters for checkpoints that ask for an
        # FP8 KV cache (kv_cache_quant_algo), which none here does.
        model=None,
        model_dtype=target.dtype,
        is_draft_worker=False,
        is_dflash=spec_algorithm.is_dflash_family(),
        speculative_draft_attention_backend=args.speculative_draft_attention_backend,
        speculative_draft_kv_cache_dtype=args.speculative_draft_kv_cache_dtype,
    )
    aux = mods.spec_aux.SpecAuxHiddenStateConfig()
    mods.spec_aux._resolve_eagle_aux_hidden_state(
        config=aux,
        server_args=args,
        model_config=target,
        spec_algorithm=spec_algorithm,
        is_draft_worker=False,
    )
    layer_info = mods.layer_setup.resolve_layer_indices(
        # Input: no model object: one pipeline stage holds every layer (start 0, end all).
        model=None,
        model_config=target,
        is_draft_worker=False,
    )
    kvc = types.SimpleNamespace(
        # The KVCacheConfigurator fields the pool configurator reads, as the model runner
        # fills them for the target worker.
        kv_cache_dtype_str=resolved_str if resolved_str is not None else args.kv_cache_dtype,
        kv_cache_dtype=kv_dtype,
        model_dtype=target.dtype,
        model_config=target,
        server_args=args,
        layer_info=layer_info,
        use_mla_backend=mods.overrides.use_mla_backend(args),
        is_draft_worker=False,
        is_hybrid_swa=target.is_hybrid_swa,
        spec_algorithm=spec_algorithm,
        spec_aux_config=aux,
        pp_size=args.pp_size,
        page_size=args.page_size,
        device="cuda",
        # Input: no fused draft region (see the docstring).
        fused_entry_bytes=lambda sub_pool_name: None,
    )
    configurator = mods.pool.create_memory_pool_configurator(kvc)
    return {
        "mem_fraction_static": cfg.mem_fraction_static,
        "chunked_prefill_size": cfg.chunked_prefill_size,
        "decode_max_bs": graphs.decode.max_bs,
        "prefill_graph_bs_count": len(graphs.prefill.bs or []) if graphs.prefill.backend != "disabled" else 0,
        "gpu_mem_mib": gpu_mem,
        "cell_size": configurator._cell_size,
        "kv_cache_dtype": repr(kv_dtype),
        "error": None,
    }


def main() -> int:
    cases = json.load(sys.stdin)
    # Anything SGLang prints goes to stderr: stdout carries the answers only.
    out, sys.stdout = sys.stdout, sys.stderr
    mods = install()
    answers = []
    with tempfile.TemporaryDirectory(prefix="gpuflow-sglang-oracle-") as bin_dir:
        # SGLang runs `nvidia-smi` by name: the fake one comes first on PATH.
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
        for case in cases:
            try:
                answers.append(run_case(mods, case, bin_dir))
            except SystemExit as err:  # argparse refusing the command line
                answers.append({"error": f"SGLang's parser refused the arguments (exit {err.code})"})
            except Exception as err:  # SGLang's own refusal, or a stub missing a field: said
                traceback.print_exc()
                answers.append({"error": f"{type(err).__name__}: {err}"})
    json.dump(answers, out, indent=1)
    out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
