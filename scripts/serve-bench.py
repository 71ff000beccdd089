#!/usr/bin/env python3
"""Throughput of `iwb serve` under concurrent clients: starts the server on a model, then for
each concurrency runs that many clients, each streaming chat completions back to back for a
fixed time, and prints requests/s, output tokens/s, mean time to first token and mean
inter-token time per client (and a JSON line per row). Python's standard library only.

  scripts/serve-bench.py MODEL.gguf [--clients 1,4,16] [--seconds 20] [--max-tokens 64] [-- SERVE-OPTIONS...]
"""

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ["Write a short story about a cat.", "Explain what a KV cache is.", "List three uses of a hash map.",
           "Describe the sea in two sentences.", "Tell me about a brave little dog.", "What is a roofline plot?"]


def one_request(port, prompt, max_tokens):
    """One streamed chat completion: (completion tokens, seconds to first token, total seconds)."""
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0.8, "stream": True, "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:200]!r}")
    first, tokens = None, 0
    for line in r:
        if not line.startswith(b"data: {"):
            continue
        chunk = json.loads(line[6:])
        if first is None and chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
            first = time.perf_counter() - start
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    conn.close()
    total = time.perf_counter() - start
    return tokens, first if first is not None else total, total


def run(port, clients, seconds, max_tokens):
    results, lock = [], threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(c):
        i = 0
        while time.perf_counter() < deadline:
            r = one_request(port, PROMPTS[(c + i) % len(PROMPTS)], max_tokens)
            i += 1
            with lock:
                results.append(r)
    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    tokens = sum(r[0] for r in results)
    ttft = sum(r[1] for r in results) / max(len(results), 1)
    itl = sum((r[2] - r[1]) / max(r[0] - 1, 1) for r in results) / max(len(results), 1)
    return {"clients": clients, "requests": len(results), "seconds": round(wall, 2),
            "requests_per_s": round(len(results) / wall, 2), "output_tokens_per_s": round(tokens / wall, 1),
            "mean_ttft_ms": round(ttft * 1e3, 1), "mean_itl_ms": round(itl * 1e3, 2)}


def main():
    argv = sys.argv[1:]
    serve_options = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--iwb", default=os.path.join(os.environ.get("IWB_BUILD_DIR", os.path.join(ROOT, "build")), "app", "iwb"))
    a = p.parse_args(argv)
    server = subprocess.Popen([a.iwb, "serve", "-m", a.model, "--port", "0", "--log-disable"] + serve_options,
                              stderr=subprocess.PIPE, text=True)
    port = None
    for line in server.stderr:
        sys.stderr.write(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready, serving" in line:
            break
    if port is None:
        sys.exit("iwb serve did not start")
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    try:
        one_request(port, PROMPTS[0], 4)  # warm-up
        print(f"{'clients':>7} {'requests':>8} {'req/s':>8} {'out tok/s':>10} {'TTFT ms':>9} {'ITL ms':>8}")
        rows = []
        for clients in [int(c) for c in a.clients.split(",")]:
            r = run(port, clients, a.seconds, a.max_tokens)
            rows.append(r)
            print(f"{r['clients']:>7} {r['requests']:>8} {r['requests_per_s']:>8} {r['output_tokens_per_s']:>10} "
                  f"{r['mean_ttft_ms']:>9} {r['mean_itl_ms']:>8}", flush=True)
        for r in rows:
            print(json.dumps({"bench": "serve", "model": os.path.basename(a.model), "max_tokens": a.max_tokens, **r}))
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
