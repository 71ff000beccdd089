"""Load: 64 clients at once, each streaming several chat completions from one `iwb serve
--batch-invariant` (aidreams), all served together by continuous batching. Every request must
complete, every event stream must be well formed (role first, content deltas, one finish per
choice, usage, [DONE], nothing after), and each greedy output must equal the same prompt run
alone afterwards (batch-invariant mode: logits do not depend on the batch)."""

import json
import re
import sys
import threading
import time

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import httpx  # noqa: E402

NUM_CLIENTS = 64
REQUESTS_PER_CLIENT = 3
MAX_TOKENS = 96
SUBJECTS = ["a little cat", "the old dog", "a tiny bird", "the brave girl", "a sleepy bear", "the happy boy",
            "a red fox", "the lost duck"]
PLACES = ["in the park", "by the sea", "in the forest", "at home", "on a hill", "under a tree"]


def prompt_for(client, i):
    k = client * REQUESTS_PER_CLIENT + i
    # 48 different prompts, each asked by several clients at different times.
    return f"Tell me about {SUBJECTS[k % 8]} {PLACES[(k // 8) % 6]}."


def read_stream(client, base_url, prompt):
    """One streamed chat completion, checked event by event; returns (text, usage, problems)."""
    body = {"model": "aidreams", "messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    problems, text, usage, ids = [], [], None, set()
    saw_role = saw_finish = saw_done = False
    with client.stream("POST", base_url + "/v1/chat/completions", json=body, timeout=120) as r:
        if r.status_code != 200:
            return None, None, [f"status {r.status_code}: {r.read()!r}"]
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            problems.append("content type " + r.headers.get("content-type", ""))
        buffer = ""
        for piece in r.iter_text():
            buffer += piece
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                if not event.startswith("data: ") or "\n" in event:
                    problems.append(f"malformed event {event!r}")
                    continue
                data = event[len("data: "):]
                if saw_done:
                    problems.append("data after [DONE]")
                if data == "[DONE]":
                    saw_done = True
                    continue
                chunk = json.loads(data)
                ids.add(chunk["id"])
                if chunk["object"] != "chat.completion.chunk":
                    problems.append("object " + chunk["object"])
                if chunk.get("usage") is not None:
                    if chunk["choices"] != [] or not saw_finish:
                        problems.append("usage before the finish or with choices")
                    usage = chunk["usage"]
                    continue
                (choice,) = chunk["choices"]
                if choice["index"] != 0:
                    problems.append("index %r" % choice["index"])
                delta = choice["delta"]
                if not saw_role:
                    if delta.get("role") != "assistant":
                        problems.append("first delta without the assistant role")
                    saw_role = True
                    continue
                if saw_finish:
                    problems.append("chunk after the finish")
                if choice["finish_reason"] is not None:
                    if choice["finish_reason"] not in ("stop", "length") or delta != {}:
                        problems.append(f"finish {choice}")
                    if "timings" not in chunk:
                        problems.append("finish without timings")
                    saw_finish = True
                else:
                    text.append(delta["content"])
        if buffer:
            problems.append(f"trailing bytes {buffer!r}")
    if not (saw_role and saw_finish and saw_done and usage):
        problems.append(f"incomplete stream role={saw_role} finish={saw_finish} done={saw_done} usage={usage}")
    if len(ids) != 1:
        problems.append(f"{len(ids)} ids in one stream")
    if usage and not (0 < usage["completion_tokens"] <= MAX_TOKENS):
        problems.append(f"usage {usage}")
    return "".join(text), usage, problems


def main():
    model = fx.aidreams_gguf()
    with fx.Server(model, "--batch-invariant", "-np", "64", "--log-disable") as server:
        results = {}
        failures = []
        lock = threading.Lock()

        def client_thread(c):
            with httpx.Client() as client:
                for i in range(REQUESTS_PER_CLIENT):
                    prompt = prompt_for(c, i)
                    try:
                        text, usage, problems = read_stream(client, server.base_url, prompt)
                    except Exception as e:  # noqa: BLE001 -- any failure is a finding
                        text, usage, problems = None, None, [f"{type(e).__name__}: {e}"]
                    with lock:
                        if problems:
                            failures.append((c, i, prompt, problems))
                        results.setdefault(prompt, []).append(text)

        # How many requests the engine ran at once, as /metrics saw it while the clients ran.
        peak_running = [0]
        clients_done = threading.Event()

        def watch():
            while not clients_done.is_set():
                status, body = server.get("/metrics", timeout=10)
                m = re.search(rb"^iwb:num_requests_running\{[^}]*\} (\d+)", body, re.M) if status == 200 else None
                if m:
                    peak_running[0] = max(peak_running[0], int(m.group(1)))
                time.sleep(0.02)
        watcher = threading.Thread(target=watch)
        watcher.start()

        start = time.time()
        threads = [threading.Thread(target=client_thread, args=(c,)) for c in range(NUM_CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        seconds = time.time() - start
        clients_done.set()
        watcher.join()
        num_done = sum(len(v) for v in results.values())
        print(f"{num_done} streamed requests from {NUM_CLIENTS} clients in {seconds:.1f} s; "
              f"at most {peak_running[0]} running at once")
        ok = True
        if peak_running[0] < 4:
            print("FAIL: the requests were hardly served together")
            ok = False
        if any(t.is_alive() for t in threads):
            print("FAIL: clients still waiting after 300 s")
            ok = False
        if num_done != NUM_CLIENTS * REQUESTS_PER_CLIENT:
            print(f"FAIL: {num_done} of {NUM_CLIENTS * REQUESTS_PER_CLIENT} requests answered")
            ok = False
        for f in failures[:10]:
            print("FAIL: client %d request %d (%r): %s" % f)
        ok = ok and not failures

        # Each prompt alone, now that the server is idle: the same text as under load.
        mismatches = 0
        with httpx.Client() as client:
            for prompt, texts in sorted(results.items()):
                alone, _, problems = read_stream(client, server.base_url, prompt)
                if problems or any(t != alone for t in texts):
                    mismatches += 1
                    if mismatches <= 5:
                        print(f"FAIL: {prompt!r}: alone {alone!r}, under load {texts!r} {problems}")
        print(f"{len(results)} prompts compared with their runs alone: {mismatches} differ")
        ok = ok and mismatches == 0
        code = server.stop()
        if code != 0:
            print(f"FAIL: iwb serve exited with {code}:\n{server.log()}")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
