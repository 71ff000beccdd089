"""Soak test: a real `iwb serve` (prompt-lookup speculation, a KV cache small enough that long
requests preempt each other) under continuous mixed requests for a set time: streamed chats,
batched text completions (n=2), long generations, and clients that hang up mid-stream. The
server's resident memory (VmRSS) and open file descriptors are sampled every few seconds.

Fails when a request is lost (sent, neither answered nor deliberately dropped), when the
server's own counters disagree with what the clients received, or when memory or descriptors
grow after the warm-up. Writes the samples as CSV and an SVG chart.

  python3 tests/serve/soak.py --iwb build/app/iwb --models ../shared/models --pyenv build/pyenv \
      --work /tmp/soak [--seconds 3600] [--clients 4] [--think 1.0] [--chart docs/images/soak.svg]

CTest runs a short version (tests/serve/CMakeLists.txt); docs/soak.md has an hour's run."""

import http.client
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture  # noqa: E402

PROMPTS = ["Once upon a time there was a little dog", "The sun was shining and the girl",
           "Tom and Lily went to the park", "One day a big bird flew over the house"]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.answered = self.dropped_on_purpose = self.failed = 0
        self.tokens = 0  # completion tokens the clients were told about (usage)
        self.failures = []
        self.kinds = {}

    def add(self, **counts):
        with self.lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def fail(self, what):
        with self.lock:
            self.failed += 1
            if len(self.failures) < 20:
                self.failures.append(what)


def one_request(port, rng, tally):
    kind = rng.choice(["chat_stream", "batch", "long", "hangup"])
    with tally.lock:
        tally.kinds[kind] = tally.kinds.get(kind, 0) + 1
    prompt = rng.choice(PROMPTS)
    if kind == "chat_stream" or kind == "hangup":
        path = "/v1/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 48,
                "stream": True, "stream_options": {"include_usage": True}, "temperature": 0.8}
    elif kind == "batch":
        path = "/v1/completions"
        body = {"model": "m", "prompt": prompt, "max_tokens": 32, "n": 2, "temperature": 1.0}
    else:  # long: two of these overflow the small KV cache: preemption
        path = "/v1/completions"
        body = {"model": "m", "prompt": prompt, "max_tokens": 900, "ignore_eos": True, "temperature": 0}
    tally.add(sent=1)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            tally.fail(f"{kind}: HTTP {r.status} {r.read()[:200]!r}")
            return
        if kind == "hangup":
            r.read(rng.randint(1, 200))  # a few bytes of the stream, then the client is gone
            conn.close()
            tally.add(dropped_on_purpose=1)
            return
        if body.get("stream"):
            usage, finished = None, False
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if any(c.get("finish_reason") for c in chunk.get("choices", [])):
                    finished = True
            if not finished or usage is None:
                tally.fail(f"{kind}: stream ended without finish_reason/usage")
                return
        else:
            reply = json.loads(r.read())
            usage = reply.get("usage")
            if not usage or len(reply.get("choices", [])) != body.get("n", 1):
                tally.fail(f"{kind}: reply without usage or with the wrong number of choices")
                return
        tally.add(answered=1, tokens=int(usage["completion_tokens"]))
    except (OSError, http.client.HTTPException, ValueError) as e:
        tally.fail(f"{kind}: {type(e).__name__}: {e}")
    finally:
        conn.close()


def client(port, seed, deadline, think, tally):
    rng = random.Random(seed)
    while time.time() < deadline:
        one_request(port, rng, tally)
        if think > 0:  # a person reading the reply: exponential pauses of this mean
            time.sleep(min(rng.expovariate(1.0 / think), max(0.0, deadline - time.time())))


def sample(server, start, samples, stop):
    while not stop.is_set():
        fds = len(os.listdir(f"/proc/{server.proc.pid}/fd"))
        samples.append((time.time() - start, server.rss_kib(), fds))
        stop.wait(2.0)


def metric_sum(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def write_svg(path, samples, seconds):
    """RSS (MiB) and open descriptors against time, one SVG with two panels, no dependencies."""
    w, h, pad = 720, 200, 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{2 * h + 20}" '
             f'font-family="sans-serif" font-size="11">', f'<rect width="{w}" height="{2 * h + 20}" fill="white"/>']
    series = [("resident memory (MiB)", [s[1] / 1024 for s in samples], "#1f77b4"),
              ("open file descriptors", [s[2] for s in samples], "#d62728")]
    t = [s[0] for s in samples]
    for i, (label, ys, color) in enumerate(series):
        y0 = i * (h + 20)
        lo, hi = 0.0, max(ys) * 1.15 if max(ys) > 0 else 1.0
        def px(x): return pad + (w - 2 * pad) * x / max(t[-1], 1e-9)
        def py(y): return y0 + h - 30 - (h - 60) * (y - lo) / (hi - lo)
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(t, ys))
        parts += [f'<text x="{pad}" y="{y0 + 18}" font-weight="bold">{label}</text>',
                  f'<line x1="{pad}" y1="{py(lo):.1f}" x2="{w - pad}" y2="{py(lo):.1f}" stroke="#888"/>',
                  f'<line x1="{pad}" y1="{py(lo):.1f}" x2="{pad}" y2="{py(hi):.1f}" stroke="#888"/>',
                  f'<text x="{pad - 5}" y="{py(hi) + 4:.1f}" text-anchor="end">{hi:.0f}</text>',
                  f'<text x="{pad - 5}" y="{py(lo) + 4:.1f}" text-anchor="end">0</text>',
                  f'<text x="{w - pad}" y="{py(lo) + 14:.1f}" text-anchor="end">{seconds / 60:.0f} min</text>',
                  f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}"/>']
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    args, rest = serve_fixture.parse_args(needs_pyenv=False)
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=40)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--think", type=float, default=0.0, help="mean pause of a client between requests (s)")
    p.add_argument("--chart", default="")
    opts = p.parse_args(rest)
    model = serve_fixture.aidreams_gguf()
    # 1 MiB of KV cache holds ~1600 positions of this model: two 900-token generations at once
    # do not fit, so the scheduler preempts and recomputes.
    with serve_fixture.Server(model, "-t", "1", "-np", "4", "-c", "1024", "--kv-mem", "1", "--spec", "lookup",
                              "--log-disable") as server:
        tally, samples, stop = Tally(), [], threading.Event()
        start = time.time()
        sampler = threading.Thread(target=sample, args=(server, start, samples, stop), daemon=True)
        sampler.start()
        deadline = start + opts.seconds
        clients = [threading.Thread(target=client, args=(server.port, 1000 + i, deadline, opts.think, tally))
                   for i in range(opts.clients)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        time.sleep(1.0)  # the hung-up requests finish aborting
        stop.set()
        sampler.join()
        _, metrics = server.get("/metrics")
        metrics = metrics.decode()
        alive = server.is_alive()

    csv = os.path.join(args.work, "soak.csv")
    with open(csv, "w") as f:
        f.write("seconds,rss_kib,open_fds\n")
        for s in samples:
            f.write(f"{s[0]:.1f},{s[1]},{s[2]}\n")
    if opts.chart:
        write_svg(opts.chart, samples, opts.seconds)

    # Growth after warm-up: the mean of the last fifth against the mean of the second fifth.
    n = len(samples)
    early = samples[n // 5: 2 * n // 5] or samples
    late = samples[4 * n // 5:] or samples
    rss_early = sum(s[1] for s in early) / len(early)
    rss_late = sum(s[1] for s in late) / len(late)
    fds_early, fds_late = max(s[2] for s in early), max(s[2] for s in late)
    finished = metric_sum(metrics, "iwb:request_success_total")
    generated = metric_sum(metrics, "iwb:generation_tokens_total")
    preempted = metric_sum(metrics, "iwb:num_preemptions_total")
    drafted = metric_sum(metrics, "iwb:spec_decode_num_draft_tokens_total")
    lost = tally.sent - tally.answered - tally.dropped_on_purpose - tally.failed
    print(f"soak: {opts.seconds:.0f} s, {tally.sent} requests {tally.kinds}: {tally.answered} answered, "
          f"{tally.dropped_on_purpose} hung up on purpose, {tally.failed} failed, {lost} lost")
    print(f"soak: server finished {finished:.0f} requests, generated {generated:.0f} tokens "
          f"(clients were told {tally.tokens}), {preempted:.0f} preemptions, {drafted:.0f} draft tokens")
    print(f"soak: RSS {rss_early / 1024:.1f} -> {rss_late / 1024:.1f} MiB, open fds {fds_early} -> {fds_late} "
          f"({n} samples in {csv})")
    problems = list(tally.failures)
    if not alive:
        problems.append("the server died")
    if lost != 0:
        problems.append(f"{lost} requests lost")
    if tally.answered == 0:
        problems.append("no request was answered")
    if finished < tally.answered + tally.dropped_on_purpose:
        problems.append(f"the server counted {finished:.0f} finished requests, the clients "
                        f"{tally.answered + tally.dropped_on_purpose}")
    if generated < tally.tokens:
        problems.append(f"the server generated {generated:.0f} tokens, fewer than the {tally.tokens} reported")
    if opts.seconds >= 30 and preempted == 0:
        problems.append("no preemption happened (the KV cache was meant to overflow)")
    if rss_late > rss_early * 1.05 + 4096:
        problems.append(f"resident memory grew after warm-up: {rss_early:.0f} -> {rss_late:.0f} KiB")
    if fds_late > fds_early + 4:
        problems.append(f"open descriptors grew after warm-up: {fds_early} -> {fds_late}")
    for problem in problems:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
