"""Abuse: well over 500 malformed or hostile requests against one `iwb serve` (aidreams):
malformed JSON, wrong types, unknown roles, a 10 MB body, invalid UTF-8, max_tokens of a
billion, n of 1000, deep nesting, broken HTTP, clients that send half a request and stall, and
random mutations of valid requests. The server must answer each with a 4xx (or 503) JSON error in
OpenAI's shape -- or, where a mutation left a valid request, a well-formed response -- never
crash or hang, keep its memory bounded, keep serving a concurrent client correctly, and stop
cleanly. Python's standard library only, so it also runs in the AddressSanitizer build."""

import http.client
import json
import random
import socket
import sys
import threading
import time

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=False)

SERVER = None
RNG = random.Random(20240615)
COUNTS = {"error": 0, "ok": 0, "closed": 0}
FAILURES = []

VALID_CHAT = {"model": "aidreams", "messages": [{"role": "system", "content": "Be kind."},
                                                {"role": "user", "content": "Once upon a time"}],
              "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 3,
              "stop": ["\n\n", "The end"], "n": 2, "presence_penalty": 0.1, "frequency_penalty": 0.1,
              "repeat_penalty": 1.1, "logprobs": True, "top_logprobs": 2, "stream": False}
VALID_COMPLETION = {"model": "aidreams", "prompt": "The cat", "max_tokens": 8, "temperature": 0.5, "n": 1,
                    "logprobs": 1, "stop": "x", "stream": False}


def fail(what, detail):
    FAILURES.append(f"{what}: {detail}")


def check_error_body(what, status, body):
    try:
        e = json.loads(body)["error"]
        if not (isinstance(e["message"], str) and e["message"] and isinstance(e["type"], str)
                and "param" in e and "code" in e):
            fail(what, f"error object incomplete: {body[:200]!r}")
    except (ValueError, KeyError, TypeError):
        fail(what, f"status {status} without an OpenAI error object: {body[:200]!r}")


def check_success_body(what, body, is_stream):
    try:
        if is_stream:
            events = body.decode().split("\n\n")
            if events[-1] != "" or events[-2] != "data: [DONE]":
                fail(what, f"stream does not end with [DONE]: {body[-100:]!r}")
            for e in events[:-2]:
                if not e.startswith("data: "):
                    fail(what, f"malformed event {e[:100]!r}")
                    return
                json.loads(e[6:])
        else:
            r = json.loads(body)
            if not r.get("choices") or "usage" not in r or "timings" not in r:
                fail(what, f"response without choices/usage/timings: {body[:200]!r}")
    except (ValueError, UnicodeDecodeError) as e:
        fail(what, f"unreadable success body ({e}): {body[:200]!r}")


def request(what, path, body, expect="error", method="POST", headers=None, timeout=60):
    """One request on a fresh connection. expect: "error" (4xx/503 JSON), "any" (an error, or a
    well-formed success) or "ok" (a well-formed success)."""
    data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=timeout)
    started = time.time()
    try:
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        status, payload = r.status, r.read()
        content_type = r.getheader("Content-Type", "")
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        COUNTS["closed"] += 1
        fail(what, f"no response: {type(e).__name__} {e}")
        return None, None
    finally:
        conn.close()
        if time.time() - started > 3:
            print(f"  slow: {what} {time.time() - started:.1f} s", flush=True)
    if status == 200:
        COUNTS["ok"] += 1
        if expect == "error":
            fail(what, f"accepted: {payload[:200]!r}")
        else:
            check_success_body(what, payload, content_type.startswith("text/event-stream"))
    else:
        COUNTS["error"] += 1
        if expect == "ok":
            fail(what, f"status {status}: {payload[:200]!r}")
        if not (400 <= status < 500 or status == 503):
            fail(what, f"status {status}")
        check_error_body(what, status, payload)
    return status, payload


def response_complete(got):
    head, sep, body = got.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
        if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            return body.endswith(b"0\r\n\r\n")
    return False


def raw(what, data, expect_response=True, stall=0.0, timeout=15):
    """Bytes straight onto a socket (broken HTTP); returns what came back before the server
    closed. With expect_response, an HTTP error with a JSON body must come back."""
    s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=timeout)
    got = b""
    started = time.time()
    try:
        def send():
            try:
                s.sendall(data)
            except OSError:
                pass
        sender = threading.Thread(target=send)
        sender.start()
        if stall:
            time.sleep(stall)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                fail(what, f"server kept the connection open {timeout} s")
                break
            except OSError:
                break
            if not chunk:
                break
            got += chunk
            if response_complete(got):
                break  # a kept-alive connection stays open after its answer
        sender.join(timeout=timeout)
    finally:
        s.close()
    elapsed = time.time() - started
    if elapsed > 3 and not what.startswith("stall"):
        print(f"  slow: {what} {elapsed:.1f} s", flush=True)
    if not got:
        COUNTS["closed"] += 1
        if expect_response:
            fail(what, "closed without a response")
        return got, elapsed
    head, _, body = got.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n")[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
    if 200 <= status < 300:
        COUNTS["ok"] += 1
        fail(what, f"accepted broken HTTP: {got[:200]!r}")
    else:
        COUNTS["error"] += 1
        if b"Transfer-Encoding: chunked" in head:
            body = b"".join(body.split(b"\r\n")[1::2])
        check_error_body(what, status, body)
    return got, elapsed


def mutate(value):
    """A random change to a request: a field removed, retyped, or set to an extreme."""
    v = json.loads(json.dumps(value))
    key = RNG.choice(list(v.keys()) + ["extra", "messages"])
    wild = [None, True, False, -1, 0, 1, 2 ** 63, -2 ** 63, 1e308, -1e308, 0.5, "", "x" * 1000, "\u0000", [], {},
            [1, 2], {"a": 1}, [[[]]], "\ud7ff\ue000", 10 ** 30, -0.0, "[INST]", "<s></s>"]
    choice = RNG.random()
    if choice < 0.2:
        v.pop(key, None)
    elif choice < 0.7:
        v[key] = RNG.choice(wild)
    elif choice < 0.85 and isinstance(v.get("messages"), list) and v["messages"]:
        m = RNG.choice(v["messages"])
        if isinstance(m, dict):
            field = RNG.choice(["role", "content", "name", "tool_calls"])
            m[field] = RNG.choice(wild + ["user", "assistant", "tool", "function", "SYSTEM"])
    else:
        v[key] = mutate(v) if isinstance(v, dict) and RNG.random() < 0.3 else RNG.choice(wild)
    return v


def byte_mutate(data):
    b = bytearray(data)
    for _ in range(RNG.randint(1, 6)):
        op = RNG.random()
        i = RNG.randrange(len(b)) if b else 0
        if op < 0.4 and b:
            b[i] = RNG.randrange(256)
        elif op < 0.7 and b:
            del b[i]
        else:
            b.insert(i, RNG.randrange(256))
    return bytes(b)


def reference_stream_text():
    body = {"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": True}
    conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    payload = r.read().decode()
    conn.close()
    text = ""
    for e in payload.split("\n\n"):
        if e.startswith("data: {"):
            text += json.loads(e[6:])["choices"][0]["text"]
    return r.status, text


LAST_MARK = [time.time()]


def section_done(name):
    now = time.time()
    print(f"  {name}: {now - LAST_MARK[0]:.1f} s", flush=True)
    LAST_MARK[0] = now


def main():
    global SERVER
    model = fx.aidreams_gguf()
    with fx.Server(model, "--timeout", "2", "--max-n", "8", "--log-disable") as server:
        SERVER = server
        status, reference = reference_stream_text()
        assert status == 200 and reference, (status, reference)
        rss_start = server.rss_kib()
        LAST_MARK[0] = time.time()

        # A well-behaved client keeps streaming while the rest goes on: its text must not change.
        bystander_errors = []

        def bystander():
            while not done.is_set():
                s, text = reference_stream_text()
                if s != 200 or text != reference:
                    bystander_errors.append((s, text))
        done = threading.Event()
        bystander_thread = threading.Thread(target=bystander)
        bystander_thread.start()

        chat = "/v1/chat/completions"
        # Malformed JSON.
        good = json.dumps(VALID_CHAT).encode()
        for i in range(40):
            request("truncated json", chat, good[:RNG.randrange(1, len(good) - 1)])
        for junk in [b"", b"{", b"}", b"[", b"null", b"true", b"42", b'"text"', b"{,}", b'{"a":}', b'{"a" 1}',
                     b"{'messages': []}", b'{"messages": [}', b"\x00\x01\x02", b"NaN", b'{"n": NaN}',
                     b'{"messages": [{"role": "user", "content": "hi"}],}', b"[" * 100000, b"{\"a\":" * 50000]:
            request("junk json", chat, junk)
        section_done("malformed JSON")
        # Wrong types for every field, and a few values out of range.
        bad_values = ["text", [1], {"a": 1}, True, -5, 1e300, "1"]
        fields = ["temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "seed", "n",
                  "presence_penalty", "frequency_penalty", "repeat_penalty", "top_logprobs", "stream",
                  "stream_options", "stop", "messages", "logprobs", "repeat_last_n"]
        for field in fields:
            for value in bad_values:
                if (field, value) in [("seed", -5), ("max_tokens", -5), ("max_completion_tokens", -5),
                                      ("stop", "text"), ("stop", "1"), ("logprobs", True), ("stream", True),
                                      ("seed", True), ("stream_options", {"a": 1})]:
                    continue  # valid (or a bool that JSON cannot tell from 1)
                body = dict(VALID_CHAT, **{field: value})
                if field == "top_logprobs":
                    body["logprobs"] = True
                if field == "seed" and value is True:
                    continue
                request(f"wrong type {field}={value!r}", chat, body)
        section_done("wrong types")
        # Unknown roles and broken messages.
        for role in ["wizard", "tool", "function", "", "USER", "System", None, 5, ["user"], "user\u0000", "ipython"]:
            request(f"role {role!r}", chat, dict(VALID_CHAT, messages=[{"role": role, "content": "hi"}]))
        for messages in [[], {}, "hi", [None], [1], [{"content": "hi"}], [{"role": "user"}],
                         [{"role": "user", "content": {"text": "hi"}}],
                         [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
                         [{"role": "user", "content": [{"type": "text"}]}]]:
            request(f"messages {messages!r}", chat, dict(VALID_CHAT, messages=messages))
        section_done("roles and messages")
        # A 10 MB body (and a 9 MB one), on both completion endpoints.
        for size in (10 << 20, 9 << 20):
            big = b'{"prompt": "' + b"a" * size + b'"}'
            raw(f"{size} byte body", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(big)).encode() + b"\r\n\r\n" + big)
        # Sent while the answer is read (raw): the server answers 413 before the body is all
        # there and closes, which a client that first sends everything sees as a broken pipe.
        big_chat = json.dumps({"messages": [{"role": "user", "content": "b" * (10 << 20)}]}).encode()
        raw("10 MB chat", b"POST " + chat.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(big_chat)).encode() + b"\r\n\r\n" + big_chat)
        # Large but under the 8 MiB limit: refused for the context, before tokenizing megabytes.
        # (It was "word " * (7 << 18), 9.2 MB: over the limit, so the server answered 413 and
        # closed while the client still sent, and a loaded machine saw a broken pipe.)
        request("7 MB prompt", "/v1/completions", {"prompt": "word " * ((7 << 20) // 5)})
        request("many messages", chat, {"messages": [{"role": "user", "content": "hi"}] * 200000})
        section_done("large bodies")
        # Invalid UTF-8, raw and escaped.
        for bad in [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"a\x80b", b"\xfe\xfe"]:
            request(f"utf-8 {bad!r} in content", chat,
                    b'{"messages": [{"role": "user", "content": "' + bad + b'"}]}')
            request(f"utf-8 {bad!r} in a key", chat, b'{"mess' + bad + b'ages": []}')
            request(f"utf-8 {bad!r} in stop", chat,
                    b'{"messages": [{"role": "user", "content": "x"}], "stop": "' + bad + b'"}')
        for esc in [b"\\ud800", b"\\udfff", b"\\ud800\\u0041", b"\\uZZZZ", b"\\x41", b"\\"]:
            request(f"escape {esc!r}", chat, b'{"messages": [{"role": "user", "content": "' + esc + b'"}]}')
        section_done("invalid UTF-8")
        # Enormous values: a billion tokens is clamped to the context; n of 1000 is refused.
        for endpoint, body in [(chat, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10 ** 9}),
                               ("/v1/completions", {"prompt": "Hi", "max_tokens": 10 ** 9, "stream": True}),
                               ("/v1/completions", {"prompt": "Hi", "max_tokens": 2 ** 63 + 5})]:
            status, payload = request("max_tokens huge", endpoint, body, expect="ok")
            if status == 200 and not body.get("stream"):
                usage = json.loads(payload)["usage"]
                if usage["prompt_tokens"] + usage["completion_tokens"] > 128:
                    fail("max_tokens huge", f"generated past the context: {usage}")
        request("max_tokens past 64 bits", "/v1/completions", {"prompt": "Hi", "max_tokens": 2 ** 64 + 5})
        for n in (1000, 9, 10 ** 12, -1):
            request(f"n={n}", chat, dict(VALID_CHAT, n=n))
        request("n*prompts", "/v1/completions", {"prompt": ["a"] * 5, "n": 2})
        request("prompt ids out of range", "/v1/completions", {"prompt": [1, 5, 100000]})
        request("prompt too long", "/v1/completions", {"prompt": list(range(3, 300))})
        request("empty prompt list", "/v1/completions", {"prompt": []})
        section_done("enormous values")
        # The other endpoints with bad bodies.
        for body in [b"{", {"content": 1}, {"content": "x", "add_special": "yes"}, {}]:
            request("tokenize", "/tokenize", body)
        for body in [{"tokens": [-1]}, {"tokens": "1 2"}, {"tokens": [1.5]}, {"tokens": [2 ** 40]}, {}]:
            request("detokenize", "/detokenize", body)
        request("GET on POST route", chat, b"", method="GET")
        request("unknown path", "/v1/../../etc/passwd", b"{}")
        request("unknown method", chat, b"{}", method="BREW")
        request("wrong key header", "/v2/chat", b"{}")

        section_done("other endpoints")
        # Broken HTTP.
        raw("bad request line", b"GARBAGE\r\n\r\n")
        raw("no version", b"POST /v1/completions\r\n\r\n")
        raw("bad content length", b"POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n{}",
            expect_response=False)
        raw("negative content length", b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n{}",
            expect_response=False)
        raw("long uri", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
        raw("long header", b"GET /health HTTP/1.1\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n", expect_response=False)
        raw("many headers", b"GET /v1/nothing HTTP/1.1\r\n" + b"X-A: b\r\n" * 5000 + b"\r\n", expect_response=False)
        # Endless headers: refused after 64 KiB, memory untouched.
        rss_before_flood = server.rss_kib()
        raw("header flood", b"GET /health HTTP/1.1\r\n" + (b"X-A: " + b"b" * 8000 + b"\r\n") * 4000,
            expect_response=False)
        if server.rss_kib() - rss_before_flood > 16 * 1024:
            fail("header flood", f"RSS grew by {(server.rss_kib() - rss_before_flood) // 1024} MiB")
        raw("bad chunk size", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
            expect_response=False)
        raw("huge chunk", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffff\r\nab",
            expect_response=False)
        raw("binary", bytes(RNG.randrange(256) for _ in range(4096)), expect_response=False)

        section_done("broken HTTP")
        # Half a request, then silence: the server drops it after its 2 s timeout (not hanging
        # on to it), and other clients are served meanwhile.
        stall_threads, stall_results = [], []
        partials = [b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"messages\": [",
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
                    b"POST /v1/chat/comp",
                    b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc"] * 3
        for i, partial in enumerate(partials):
            t = threading.Thread(target=lambda p=partial, k=i: stall_results.append(
                raw(f"stall {k}", p, expect_response=False, timeout=20)))
            t.start()
            stall_threads.append(t)
        # A header a byte at a time: still dropped when the read timeout has passed.
        def slowloris():
            s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=20)
            started = time.time()
            try:
                for b in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                    s.sendall(bytes([b]))
                    time.sleep(0.25)
            except OSError:
                pass
            finally:
                s.close()
            stall_results.append((b"", time.time() - started))
        t = threading.Thread(target=slowloris)
        t.start()
        stall_threads.append(t)
        time.sleep(0.5)
        request("during stalls", "/v1/completions", {"prompt": "Hi", "max_tokens": 4}, expect="ok")
        for t in stall_threads:
            t.join(timeout=30)
        slowest = max((elapsed for (_, elapsed) in stall_results), default=99)
        if len(stall_results) != len(partials) + 1 or slowest > 12:
            fail("stalls", f"a stalled connection stayed open {slowest:.1f} s")

        section_done("stalls")
        # Random mutations of valid requests: parsed values and raw bytes.
        for i in range(200):
            base, path = (VALID_CHAT, chat) if i % 2 == 0 else (VALID_COMPLETION, "/v1/completions")
            request(f"mutation {i}", path, mutate(base), expect="any")
        for i in range(120):
            base, path = (VALID_CHAT, chat) if i % 2 == 0 else (VALID_COMPLETION, "/v1/completions")
            request(f"byte mutation {i}", path, byte_mutate(json.dumps(base).encode()), expect="any")

        section_done("mutations")
        done.set()
        bystander_thread.join(timeout=120)
        if bystander_errors:
            fail("bystander", f"a concurrent client was disturbed: {bystander_errors[:2]}")
        rss_end = server.rss_kib()
        total = sum(COUNTS.values())
        print(f"{total} hostile requests: {COUNTS['error']} errors, {COUNTS['ok']} accepted, "
              f"{COUNTS['closed']} closed without a response; RSS {rss_start // 1024} -> {rss_end // 1024} MiB")
        if total < 500:
            fail("count", f"only {total} requests")
        # AddressSanitizer keeps freed memory in quarantine (256 MiB by default) and adds shadow
        # memory; ThreadSanitizer keeps shadow memory and a history of every access (several times
        # the application's own memory).
        with open(f"/proc/{server.proc.pid}/maps") as maps:
            libraries = maps.read()
        is_sanitized = "libasan" in libraries or "libtsan" in libraries
        limit_mib = 1024 if is_sanitized else 400
        if rss_end - rss_start > limit_mib * 1024:
            fail("memory", f"RSS grew by {(rss_end - rss_start) // 1024} MiB (limit {limit_mib})")
        if not server.is_alive():
            fail("server", "died:\n" + server.log())
        elif SERVER.get("/health")[0] != 200:
            fail("server", "unhealthy after the abuse")
        code = server.stop(timeout=60)
        if code != 0:
            fail("exit", f"iwb serve exited with {code}:\n{server.log()}")
    for f in FAILURES[:40]:
        print("FAIL:", f)
    if len(FAILURES) > 40:
        print(f"... and {len(FAILURES) - 40} more")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
