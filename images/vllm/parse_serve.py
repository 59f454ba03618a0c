"""vLLM's own `vllm serve` argument parsing, without the server: the contract test
(runner/tests/server_contract.rs) feeds it every vLLM command line gpuflow ships.

    python parse_serve.py < LINES    # each line a JSON list: the arguments after `vllm serve`

For each line it prints one JSON line: {"ok": true} when vLLM accepts the arguments, else
{"ok": false, "exit": N, "error": "<what vLLM printed>"}. The parser is built by vLLM's own
code, as `vllm.entrypoints.cli.main.main` builds it for `vllm serve` (the `serve` subcommand's
`subparser_init`: `make_arg_parser` on a `FlexibleArgumentParser`), and the parsed arguments
go through the same `validate_parsed_serve_args` `main` calls before starting the server; only
the start is left out. One process for all lines: importing vLLM takes ~30 s on 2 cores.
"""

import contextlib
import io
import json
import sys

from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser


def build_parser():
    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return top


def judge(parser, argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(["serve", *argv])
            validate_parsed_serve_args(args)
    except SystemExit as e:
        return {"ok": False, "exit": e.code, "error": err.getvalue().strip()}
    except Exception as e:  # validate_parsed_serve_args raises TypeError/ValueError
        return {"ok": False, "exit": 1, "error": f"{type(e).__name__}: {e}"}
    return {"ok": True}


def main():
    parser = build_parser()
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(judge(parser, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
