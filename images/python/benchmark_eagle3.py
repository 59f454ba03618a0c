#!/usr/bin/env python3
"""Single-stream decode throughput of an OpenAI-compatible server (SGLang, vLLM, gpuflow-sim).

The interface is the one of the write-ups' /tmp/benchmark_eagle3.py: `--server-url`,
`--max-tokens`, `--num-runs`, `--warmup`. Each run streams one completion and counts the
chunks that carry text; the result line is `NN.N tok/s` (the mean over the measured runs).
Only the standard library is used, so the script runs in a bare Python image.
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

PROMPT = "Explain speculative decoding in one paragraph."


def one_run(server_url, max_tokens, timeout):
    body = json.dumps(
        {
            "model": "default",
            "prompt": PROMPT,
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "ignore_eos": True,
        }
    ).encode()
    request = urllib.request.Request(
        server_url.rstrip("/") + "/v1/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    tokens = 0
    first = None
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            choices = chunk.get("choices") or []
            if choices and choices[0].get("text"):
                tokens += 1
                if first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    # Decode speed: tokens after the first over the time after the first, as the write-ups did.
    if first is None or tokens < 2 or end <= first:
        return tokens, 0.0
    return tokens, (tokens - 1) / (end - first)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-url", default="http://localhost:30000")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--num-runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()

    try:
        for _ in range(args.warmup):
            one_run(args.server_url, args.max_tokens, timeout=600)
        speeds = []
        for i in range(args.num_runs):
            tokens, speed = one_run(args.server_url, args.max_tokens, timeout=600)
            print(f"run {i + 1}: {tokens} tokens, {speed:.1f} tok/s", flush=True)
            speeds.append(speed)
    except (urllib.error.URLError, OSError) as e:
        print(f"benchmark_eagle3.py: error: {args.server_url}: {e}", file=sys.stderr)
        return 1
    if speeds:
        print(f"{sum(speeds) / len(speeds):.1f} tok/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
