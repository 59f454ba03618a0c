#!/usr/bin/env bash
# Writes runner/src/steps/check_cli_interface/help_texts/sglang_0.5.23_serve.txt: SGLang's real
# `--help` from its own parser (images/sglang/sglang-parser.sh), never edited by hand.
#
#   bash images/sglang/help-fixture.sh          # regenerate; prints whether it changed
#
# Fixed so the file is the same on every machine: COLUMNS=80 (argparse wraps at the terminal's
# width; 80 is what it uses without a terminal) and PYTHONHASHSEED=0 (SGLang builds
# --sampling-backend's choices as a set, so their order otherwise changes from run to run).
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { printf 'images/sglang: error: %s\n' "$*" >&2; exit 1; }

fixture=runner/src/steps/check_cli_interface/help_texts/sglang_0.5.23_serve.txt
dir="$(bash images/sglang/sglang-parser.sh)" || die "sglang-parser.sh failed (its output is above)"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
COLUMNS=80 PYTHONHASHSEED=0 "$dir/bin/sglang-serve-parser" --help >"$tmp" \
  || die "\`$dir/bin/sglang-serve-parser --help\` failed"
grep -q '^usage: sglang serve ' "$tmp" || die "the help does not start with \`usage: sglang serve\`"
if cmp -s "$tmp" "$fixture"; then
  printf 'images/sglang: %s is up to date\n' "$fixture" >&2
else
  cp "$tmp" "$fixture"
  printf 'images/sglang: wrote %s (%s lines)\n' "$fixture" "$(wc -l <"$fixture")" >&2
fi
