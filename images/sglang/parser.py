#!/usr/bin/env python3
"""SGLang's real server-argument parser, without SGLang's GPU stack.

gpuflow checks SGLang command lines against the parser of a pinned SGLang release. This harness
runs that parser from the release's own sources (the `sglang/` package unpacked from the PyPI
wheel by images/sglang/sglang-parser.sh), with no torch, CUDA or GPU:

    parser.py [--mode serve|launch_server] [--image] ARGS...

  --mode launch_server (the default): `python -m sglang.launch_server ARGS`, i.e. SGLang's own
      `sglang.srt.server_args.prepare_server_args(ARGS)`: `--model-path` is required.
  --mode serve: `sglang serve ARGS`, as `sglang.cli.serve.serve` dispatches them to the LLM
      backend: `--model-type X` taken out, a leading positional MODEL turned into
      `--model-path MODEL` (SGLang's own helpers from cli/serve.py), then the same
      `prepare_server_args`.

`-h`/`--help` prints SGLang's help (`usage: sglang serve ...`) and exits 0. A command line the
parser refuses exits 2 with argparse's own `usage:` and `sglang serve: error: ...` on stderr. A
command line it accepts prints the parsed server arguments as one JSON object on stdout (the
fields of SGLang's `ServerArgs`, as `prepare_server_args` returns them, before resolution) and
exits 0. With --image (the test image gpuflow-test/sglang-cli), an accepted command line prints
one line saying that the image holds SGLang's parser, not its server, and exits 1, or 0 when
SGLANG_CLI_ONLY_OK=1.

What runs is SGLang's code: `ServerArgs` (assembled from the dataclass-style field namespaces in
`sglang/srt/arg_groups/fields/*.py`), `ServerArgs.add_cli_args` (which calls
`add_cli_args_from_dataclass` and adds the manual flags: dynamic choices, `--config`, deprecated
spellings) and `prepare_server_args`. No flag is listed here.

What does not run, and why: importing `sglang` (its `__init__`) or `sglang.srt.utils` pulls in
torch, triton and CUDA libraries, and some modules `server_args` imports at top level need them
too, although building and running the parser never calls into them. So, before importing
`sglang.srt.server_args`, this harness puts three kinds of module into `sys.modules`:

  SHIM_PACKAGES  packages whose `__init__` is skipped (their submodules load from the real files);
  EXTRACTED      modules that import torch at top level, of which the parser needs a few
                 torch-free definitions: those definitions are taken from the real file (its
                 syntax tree, by name) and executed as they are; nothing is rewritten;
  UNAVAILABLE    modules the parser never uses (resolution, validation, platform probing,
                 networking): every name imported from them is a placeholder that raises if it
                 is ever used, so a parser that started depending on them fails loudly here
                 instead of behaving differently.

Each entry below says why it is there. Without a GPU SGLang's `sglang serve` also skips two
things that are not parsing: diffusion-model detection (it may query the Hugging Face Hub; this
harness always takes the LLM backend) and plugins (`load_plugins`; none are installed here).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
# Where the wheel's `sglang/` package lies: SGLANG_PARSER_ROOT, else lib/ beside this file (the
# layout sglang-parser.sh makes).
ROOT = os.environ.get("SGLANG_PARSER_ROOT") or os.path.join(HERE, "lib")

# Packages whose __init__ must not run; their submodules are imported from the real files.
SHIM_PACKAGES = {
    # sglang/__init__.py applies Hugging Face patches and imports `sglang.lang.api`: torch.
    "sglang": "sglang",
    # sglang/srt/utils/__init__.py star-imports utils/common.py (torch, triton, PIL, zmq). The
    # shim re-exports the names EXTRACTED takes from common.py, as the real star-import would.
    "sglang.srt.utils": "sglang/srt/utils",
    # kv_canary/consts.py (the choices of --kv-canary-real-data) is stdlib-only, but the
    # packages above it import the kernel registry (torch).
    "sglang.kernels": "sglang/kernels",
    "sglang.kernels.ops": "sglang/kernels/ops",
    "sglang.kernels.ops.kv_canary": "sglang/kernels/ops/kv_canary",
}

# module: (file, names). The names' definitions are executed from the real file; its imports of
# the standard library (and of orjson, used by json_list_type) are executed too, no other.
EXTRACTED = {
    # The argparse `type=` helpers and LoRA constants the field namespaces import, and
    # ConcurrentCounter (sglang.srt.lora.lora_registry imports it; LoRARef, which the --lora-paths
    # field's type names, is defined there). common.py imports torch at top level.
    "sglang.srt.utils.common": (
        "sglang/srt/utils/common.py",
        [
            "human_readable_int",
            "json_list_type",
            "nullable_str",
            "LORA_TARGET_ALL_MODULES",
            "SUPPORTED_LORA_TARGET_MODULES",
            "ConcurrentCounter",
        ],
    ),
    # prepare_server_args records the command line with --watermark-config redacted; core.py
    # imports torch at top level for the watermark kernels.
    "sglang.srt.sampling.watermarking.core": (
        "sglang/srt/sampling/watermarking/core.py",
        ["redact_watermark_command_line"],
    ),
}
EXTRA_IMPORTABLE = {"orjson"}

# module: why it is not imported. server_args imports names from these at top level; only
# resolution, validation and the running server use them.
UNAVAILABLE = {
    "sglang.srt.arg_groups.model_override_base": "model overrides (resolution); imports sglang.srt.platforms, which imports torch",
    "sglang.srt.arg_groups.overrides": "argument resolution (after parsing); imports the model configs and torch",
    "sglang.srt.arg_groups.validation_hook": "validation of resolved arguments; imports the Mooncake transfer engine and torch",
    "sglang.srt.hardware_backend.mlx.runtime": "Apple MLX detection (resolution); imports torch",
    "sglang.srt.hardware_backend.mps.runtime": "Apple MPS validation (resolution); imports torch",
    "sglang.srt.utils.network": "ports and addresses of the running server; imports pyzmq and psutil",
}


class Unavailable:
    """A name imported from an UNAVAILABLE module: any use raises, naming the module and why."""

    def __init__(self, qualname: str, why: str):
        object.__setattr__(self, "_what", f"{qualname} is not available in gpuflow's SGLang parser harness ({why})")

    def _fail(self, *_args, **_kwargs):
        raise RuntimeError(object.__getattribute__(self, "_what"))

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._fail()

    __call__ = __iter__ = __bool__ = __getitem__ = __setattr__ = _fail

    def __repr__(self):
        return f"<{object.__getattribute__(self, '_what')}>"


class UnavailableModule(types.ModuleType):
    def __init__(self, name: str, why: str):
        super().__init__(name, f"not importable here: {why}")
        self.__why = why

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"{self.__name__}.{attr}", self.__why)


def _module_key(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Import):
        return node.names[0].name.split(".")[0]
    if isinstance(node, ast.ImportFrom):
        return None if node.level else (node.module or "").split(".")[0]
    return None


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def extracted_module(name: str, path: str, wanted: list[str]) -> types.ModuleType:
    """A module holding only `wanted` from the real file at `path`, executed unchanged."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, path)
    allowed = set(sys.stdlib_module_names) | EXTRA_IMPORTABLE
    body, found = [], set()
    for node in tree.body:
        key = _module_key(node)
        if key is not None and (key in allowed or key == "__future__"):
            body.append(node)
        names = set(_defined_names(node)) & set(wanted)
        if names:
            body.append(node)
            found |= names
    missing = sorted(set(wanted) - found)
    if missing:
        raise SystemExit(f"gpuflow sglang parser: {path} no longer defines {', '.join(missing)}; update EXTRACTED in {__file__}")
    module = types.ModuleType(name)
    module.__file__ = path
    module.__gpuflow_extracted__ = tuple(wanted)
    sys.modules[name] = module
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), module.__dict__)
    return module


def install_import_shims() -> None:
    if not os.path.isfile(os.path.join(ROOT, "sglang", "srt", "server_args.py")):
        raise SystemExit(f"gpuflow sglang parser: no SGLang sources at {ROOT} (set SGLANG_PARSER_ROOT to the folder holding sglang/)")
    sys.path.insert(0, ROOT)
    for name, rel in SHIM_PACKAGES.items():
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(ROOT, rel)]
        package.__file__ = None
        sys.modules[name] = package
    for name, why in UNAVAILABLE.items():
        sys.modules[name] = UnavailableModule(name, why)
    for name, (rel, wanted) in EXTRACTED.items():
        extracted_module(name, os.path.join(ROOT, rel), wanted)
    # The real sglang.srt.utils re-exports common.py's names (`from .common import *`).
    utils = sys.modules["sglang.srt.utils"]
    common = sys.modules["sglang.srt.utils.common"]
    for attr in common.__gpuflow_extracted__:
        setattr(utils, attr, getattr(common, attr))
    # Parents of the extracted and unavailable modules: attach them as attributes, as an import
    # would (`import a.b.c` binds c on a.b).
    for name in list(EXTRACTED) + list(UNAVAILABLE):
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, sys.modules[name])


def _plain(value):
    """JSON for a parsed value: records as dicts, anything else JSON lacks as its repr."""
    import msgspec

    if isinstance(value, msgspec.Struct):
        return {f: _plain(getattr(value, f)) for f in value.__struct_fields__}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def serve_argv(argv: list[str]) -> list[str]:
    """`sglang serve ARGS` → the argv SGLang's LLM backend hands to prepare_server_args.

    Uses cli/serve.py's own `_extract_model_type_override` and `_normalize_positional_model_path`
    and cli/utils.py's `get_model_path` (both files import torch or huggingface_hub at top level,
    so these functions are extracted). The diffusion backend is not detected: always the LLM one.
    """
    serve = extracted_module(
        "gpuflow_sglang_cli_serve",
        os.path.join(ROOT, "sglang/cli/serve.py"),
        ["_extract_model_type_override", "_normalize_positional_model_path"],
    )
    try:
        backend, argv = serve._extract_model_type_override(argv)
    except ValueError as err:  # SGLang lets it escape as a traceback: exit 1
        print(f"ValueError: {err}", file=sys.stderr)
        raise SystemExit(1)
    if backend not in ("auto", "llm"):
        print(f"gpuflow sglang parser: --model-type {backend}: only SGLang's LLM server parser is available here", file=sys.stderr)
        raise SystemExit(1)
    argv, _positional = serve._normalize_positional_model_path(argv)
    if not any(a in ("-h", "--help") for a in argv):
        # serve() then requires a model path before the parser runs: cli/utils.py's own
        # get_model_path raises (a traceback in SGLang; exit 1).
        utils = extracted_module(
            "gpuflow_sglang_cli_utils",
            os.path.join(ROOT, "sglang/cli/utils.py"),
            ["try_get_model_path", "get_model_path"],
        )
        try:
            utils.get_model_path(argv)
        except Exception as err:  # SGLang raises a bare Exception here
            print(f"Exception: {err}", file=sys.stderr)
            raise SystemExit(1)
    return argv


IMAGE_REFUSAL = (
    "{entry}: SGLang {version}'s parser accepts these arguments, but this image holds SGLang's "
    "command-line parser only, not its server (no GPU here): nothing is started. "
    "Set SGLANG_CLI_ONLY_OK=1 to exit 0 instead."
)


def main(argv: list[str]) -> int:
    mode, image = "launch_server", False
    # The harness's own options come first: --mode MODE and --image (the test image's behaviour
    # for an accepted command line: one line on stderr, exit 1 unless SGLANG_CLI_ONLY_OK=1).
    while argv[:1] in (["--mode"], ["--image"]) or (argv[:1] and argv[0].startswith("--mode=")):
        if argv[0] == "--image":
            image, argv = True, argv[1:]
        elif argv[0] == "--mode" and len(argv) >= 2:
            mode, argv = argv[1], argv[2:]
        elif argv[0].startswith("--mode="):
            mode, argv = argv[0].split("=", 1)[1], argv[1:]
        else:
            break
    if mode not in ("serve", "launch_server"):
        print(f"gpuflow sglang parser: unknown --mode {mode!r} (serve or launch_server)", file=sys.stderr)
        return 64

    install_import_shims()
    if mode == "serve":
        argv = serve_argv(list(argv))
    server_args_module = importlib.import_module("sglang.srt.server_args")

    if any(a in ("-h", "--help") for a in argv):
        # What cli/serve.py's _print_llm_help does (launch_server reaches the same parse_args).
        try:
            server_args_module.prepare_server_args(["--help"])
        except SystemExit as done:
            return int(done.code or 0)
        return 0

    # argparse errors exit 2 from inside: SystemExit propagates with argparse's code and message.
    server_args = server_args_module.prepare_server_args(list(argv))
    if image:
        version = importlib.import_module("sglang.version").__version__
        entry = "sglang serve" if mode == "serve" else "python3 -m sglang.launch_server"
        print(IMAGE_REFUSAL.format(entry=entry, version=version), file=sys.stderr)
        return 0 if os.environ.get("SGLANG_CLI_ONLY_OK") == "1" else 1
    import msgspec

    fields = {f.name: _plain(getattr(server_args, f.name)) for f in msgspec.structs.fields(server_args)}
    json.dump(fields, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
