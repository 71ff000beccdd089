"""`iwb bench-serve` against servers that misbehave, each a few lines of Python's standard
library: one that goes silent, one that drops the connection mid-stream (chunked, and without a
length), one that answers 500, one that sends garbage, one with garbage /metrics, and nothing
listening at all. Each is reported as its kind of error with the server's message, nothing
hangs (the read timeout ends a silent stream), the exit status says it failed, and the run is
in the results store all the same. A well-behaved server without /metrics gives a clean run."""

import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=False)
DB = os.path.join(ARGS.work, "faults.sqlite")

ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
DONE = b"data: [DONE]\n\n"


class FakeServer:
    """An OpenAI-shaped server whose completions behave as `behaviour` says."""

    def __init__(self, behaviour):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle(self):
                try:
                    super().handle()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a bad stream first: expected here

            def reply(self, status, body, content_type="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def do_GET(self):
                if self.path == "/v1/models":
                    self.reply(200, b'{"object":"list","data":[{"id":"fake-model","object":"model"}]}')
                elif self.path == "/metrics" and behaviour == "garbage-metrics":
                    self.reply(200, b"this is { not prometheus\n", "text/plain")
                else:
                    self.reply(404, b'{"detail":"Not Found"}')

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.num_requests += 1
                if behaviour == "500":
                    return self.reply(500, b'{"error":{"message":"the model is overloaded","type":"server_error"}}')
                if behaviour == "no-length-drop":
                    # HTTP/1.0 style: the body ends when the connection does, here before [DONE].
                    self.protocol_version = "HTTP/1.0"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(ROLE + TOKEN)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.chunk(ROLE)
                if behaviour == "slow":
                    time.sleep(8)  # far past the client's read timeout
                    return
                if behaviour == "garbage":
                    self.chunk(b"data: {\"choices\": [{\"delta\": {\"content\": tru\n\n")
                    self.chunk(DONE)
                    self.wfile.write(b"0\r\n\r\n")
                    return
                self.chunk(TOKEN)
                if behaviour == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)  # mid-stream, inside the chunked body
                    self.close_connection = True
                    return
                self.chunk(TOKEN + FINISH + DONE)
                self.wfile.write(b"0\r\n\r\n")

        self.lock = threading.Lock()
        self.num_requests = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def bench_serve(url, *args, timeout=60):
    start = time.time()
    r = subprocess.run([ARGS.iwb, "bench-serve", "--base-url", url, "--db", DB, "--num-prompts", "4",
                        "--max-concurrency", "2", "--timeout", "1", "--connect-timeout", "2",
                        "--scrape-interval", "0.1", *args], capture_output=True, text=True, timeout=timeout)
    return r, time.time() - start


def stored_run(run_id=None):
    with sqlite3.connect(DB) as db:
        if run_id is None:
            run_id = db.execute("SELECT max(id) FROM serve_runs").fetchone()[0]
        status, error, n = db.execute("SELECT status, error, num_points FROM serve_runs WHERE id = ?",
                                      (run_id,)).fetchone()
        points = [json.loads(p) for (p,) in db.execute("SELECT point_json FROM serve_points WHERE run_id = ?",
                                                         (run_id,))]
    return status, error, n, points


class TestBenchServeFaults(unittest.TestCase):
    def check_failure(self, behaviour, kind, message):
        with FakeServer(behaviour) as server:
            r, took = bench_serve(server.url, "--json")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertLess(took, 20, "bench-serve took too long")
            self.assertEqual(server.num_requests, 4)
        result = json.loads(r.stdout)
        (point,) = result["points"]
        self.assertEqual(point["num_completed"], 0)
        self.assertEqual(point["errors_by_kind"], {kind: 4}, r.stderr)
        self.assertIn(f"{kind} error: ", r.stderr)
        self.assertIn(message, r.stderr)
        self.assertIn("4 of 4 requests failed", r.stderr)
        status, error, n, points = stored_run(result["run_id"])
        self.assertEqual((status, error, n), ("done", "4 requests failed", 1))
        self.assertEqual([rq["error"]["kind"] for rq in points[0]["requests"]], [kind] * 4)
        return result, r.stderr

    def test_silent_server_times_out(self):
        result, _ = self.check_failure("slow", "timeout", "read timeout 1 s")
        for rq in result["points"][0]["requests"]:
            self.assertLess(rq["e2e_ms"], 3000)

    def test_dropped_connection(self):
        self.check_failure("drop", "dropped", "broke after 1 content chunks")

    def test_dropped_connection_without_length(self):
        self.check_failure("no-length-drop", "dropped", "ended before [DONE]")

    def test_http_500_with_the_servers_message(self):
        result, _ = self.check_failure("500", "http", "HTTP 500")
        self.assertIn("the model is overloaded", result["points"][0]["requests"][0]["error"]["message"])
        self.assertEqual(result["points"][0]["requests"][0]["error"]["http_status"], 500)

    def test_garbage_stream(self):
        self.check_failure("garbage", "malformed", "not a JSON object")

    def test_no_metrics_is_a_clean_run(self):
        for behaviour in ("ok", "garbage-metrics"):
            with FakeServer(behaviour) as server:
                r, _ = bench_serve(server.url + "/v1/", "--json", "--label", behaviour)
            self.assertEqual(r.returncode, 0, r.stderr)
            result = json.loads(r.stdout)
            self.assertEqual(result["config"]["model"], "fake-model")
            self.assertEqual(result["server_kind"], "OpenAI-compatible, no metrics")
            (point,) = result["points"]
            self.assertEqual(point["num_completed"], 4)
            self.assertEqual(point["total_output_tokens"], 8)  # no usage: one token per content chunk
            self.assertIsNone(point["server_delta"])
            self.assertEqual(point["server_series"], [])
            self.assertIn("no /metrics", r.stderr)
            self.assertEqual(stored_run(result["run_id"])[0], "done")

    def test_nothing_listening(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # a port nobody listens on
        r, took = bench_serve(f"http://127.0.0.1:{port}", "--model", "m")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no request reached the server", r.stderr)
        self.assertLess(took, 20)
        status, error, _, _ = stored_run()
        self.assertEqual(status, "failed")
        self.assertIn("cannot connect", error)
        # Without --model the model list is asked for first, and that failure is the message.
        r, _ = bench_serve(f"http://127.0.0.1:{port}")
        self.assertEqual(r.returncode, 1)
        self.assertIn("listing the served ones failed", r.stderr)
        self.assertEqual(stored_run()[0], "failed")

    def test_bad_options_are_usage_errors(self):
        for args, message in ((["--request-rate", "fast"], "--request-rate"), (["--goodput", "ttft"], "KEY:MILLISECONDS"),
                              (["--max-concurrency", "2", "--sweep-concurrency", "1,2"], "not both")):
            r = subprocess.run([ARGS.iwb, "bench-serve", "--base-url", "http://127.0.0.1:9", "--no-store", *args],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(message, r.stderr)
        r = subprocess.run([ARGS.iwb, "bench-serve", "--no-store"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--base-url", r.stderr)


if __name__ == "__main__":
    if os.path.exists(DB):
        os.remove(DB)
    result = unittest.main(argv=[sys.argv[0]] + REST, exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
