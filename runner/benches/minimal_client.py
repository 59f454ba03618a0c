#!/usr/bin/env python3
"""A minimal independent load client for `benches/real_server.rs`: the yardstick gpuflow's
request rate is set beside. Python standard library only, nothing measured but what is needed.

N threads, each with its own `http.client` connection per request, POST streaming
`/v1/completions` (the same body fields as gpuflow: `stream_options.include_usage`,
`temperature` 0, `ignore_eos`), read the SSE to `data: [DONE]` and count completed and failed
requests. A request completes when the status is 200, `[DONE]` arrives and the server's `usage`
says `max_tokens` tokens were generated.

One new connection per request: llama-server closes a kept-alive connection ~0.6 ms after a
stream ends, so reusing one would need a retry; a fresh connection is simple and fair (its
cost, a loopback TCP handshake, is paid inside the measured time).

Prompts: `--input-tokens` words drawn from the same word list as gpuflow's synthetic prompts,
different for every request (seeded by its number), so the prefix cache helps neither client.

Prints one JSON object: completed, failed, errors by kind, duration_s (first send after the
warm-up to the last response end), req_s, output_tokens, prompt_tokens (from `usage`),
connections.
"""

import argparse
import http.client
import json
import random
import sys
import threading
import time

# benches/../src/bench/prompts.rs `WORDS`.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an had they you were their one all we can her has there been if more when "
    "will would who so no river model token graph kernel memory cache tensor layer signal "
    "window stream garden copper lantern harbor"
).split()


def prompt(seed, index, words):
    rng = random.Random(seed * 1_000_003 + index)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def one_request(host, port, body, max_tokens, timeout):
    """Returns (None, the server's prompt tokens) when the request completed, else (the kind
    of failure, None)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(
            "POST",
            "/v1/completions",
            body=body,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read()
            return f"http_{resp.status}"
        tokens = prompt_tokens = None
        while True:
            line = resp.readline()
            if not line:
                return "truncated"
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                return "stream_error"
            usage = event.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                tokens = usage["completion_tokens"]
                prompt_tokens = usage.get("prompt_tokens")
        if tokens != max_tokens:
            return f"tokens_{tokens}", None
        return None, prompt_tokens
    except (OSError, http.client.HTTPException, ValueError) as e:
        return type(e).__name__, None
    finally:
        conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="http://host:port")
    p.add_argument("--model", default="model")
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--input-tokens", type=int, required=True)
    p.add_argument("--output-tokens", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    hostport = a.url.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")

    def body(index):
        return json.dumps(
            {
                "model": a.model,
                "prompt": prompt(a.seed, index, a.input_tokens),
                "max_tokens": a.output_tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
                "temperature": 0,
                "ignore_eos": True,
            }
        ).encode()

    lock = threading.Lock()
    state = {"next": 0, "completed": 0, "failed": 0, "errors": {}, "last_end": 0.0, "prompt_tokens": 0}

    def worker(total, offset, count):
        while True:
            with lock:
                i = state["next"]
                if i >= total:
                    return
                state["next"] = i + 1
            error, prompt_tokens = one_request(host, int(port), body(offset + i), a.output_tokens, a.timeout)
            end = time.perf_counter()
            if not count:
                continue
            with lock:
                state["last_end"] = max(state["last_end"], end)
                if error is None:
                    state["completed"] += 1
                    state["prompt_tokens"] += prompt_tokens or 0
                else:
                    state["failed"] += 1
                    state["errors"][error] = state["errors"].get(error, 0) + 1

    def run(total, offset, count):
        state["next"] = 0
        threads = [
            threading.Thread(target=worker, args=(total, offset, count))
            for _ in range(a.concurrency)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    if a.warmup:
        # Warm-up prompts are numbered after the measured ones: none is repeated.
        run(a.warmup, a.requests, False)
    start = time.perf_counter()
    run(a.requests, 0, True)
    duration = state["last_end"] - start if state["last_end"] else 0.0
    json.dump(
        {
            "completed": state["completed"],
            "failed": state["failed"],
            "errors": state["errors"],
            "duration_s": duration,
            "req_s": state["completed"] / duration if duration > 0 else 0.0,
            "output_tokens": state["completed"] * a.output_tokens,
            "prompt_tokens": state["prompt_tokens"],
            "connections": "one new connection per request",
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
