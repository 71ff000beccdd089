"""GET /metrics of a real `iwb serve`, read by Prometheus' own text parser (prometheus_client):
every family has the type it says, counters and histograms move as requests run, the gauges
return to idle, and a client that disconnects mid-stream is counted as an abort."""

import json
import socket
import time
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

import openai  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SERVER = None
CLIENT = None
MODEL = None


def scrape():
    status, body = SERVER.get("/metrics")
    assert status == 200, status
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    return families


def value(families, name, sample=None, **labels):
    """The value of one sample (by default the family's own, `_total` for counters)."""
    f = families[name]
    wanted = sample or (name + "_total" if f.type == "counter" else name)
    for s in f.samples:
        if s.name == wanted and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError(f"{wanted} {labels} not in {[(s.name, s.labels) for s in f.samples]}")


class TestServeMetrics(unittest.TestCase):
    def test_families_and_types(self):
        families = scrape()
        expected = {
            "iwb:num_requests_running": "gauge", "iwb:num_requests_waiting": "gauge",
            "iwb:kv_cache_usage_perc": "gauge", "iwb:prefix_cache_queries": "counter",
            "iwb:prefix_cache_hits": "counter", "iwb:prompt_tokens": "counter", "iwb:generation_tokens": "counter",
            "iwb:num_preemptions": "counter", "iwb:request_success": "counter",
            "iwb:spec_decode_num_drafts": "counter", "iwb:spec_decode_num_draft_tokens": "counter",
            "iwb:spec_decode_num_accepted_tokens": "counter",
            "iwb:spec_decode_num_accepted_tokens_per_pos": "counter",
            "iwb:time_to_first_token_seconds": "histogram", "iwb:inter_token_latency_seconds": "histogram",
            "iwb:e2e_request_latency_seconds": "histogram", "iwb:request_queue_time_seconds": "histogram",
        }
        for name, kind in expected.items():
            self.assertIn(name, families)
            self.assertEqual(families[name].type, kind, name)
            for s in families[name].samples:
                self.assertEqual(s.labels.get("model_name"), "aidreams", s)

    def test_counters_move_as_requests_run(self):
        before = scrape()
        prompt = "Once upon a time there was a little fox who"
        for i in range(3):
            CLIENT.completions.create(model="aidreams", prompt=prompt, max_tokens=10 + i, temperature=0)
        CLIENT.chat.completions.create(model="aidreams", messages=[{"role": "user", "content": "Hello"}],
                                       max_tokens=5, temperature=0)
        after = scrape()

        def grew(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        self.assertGreaterEqual(grew("iwb:generation_tokens"), 10 + 11 + 12 + 1)
        self.assertGreater(grew("iwb:prompt_tokens"), 0)
        self.assertGreater(grew("iwb:prefix_cache_queries"), 0)
        # The same prompt three times: its full blocks come from the prefix cache the 2nd and 3rd time.
        self.assertGreater(grew("iwb:prefix_cache_hits"), 0)
        finished = sum(grew("iwb:request_success", finished_reason=r) for r in ("stop", "length"))
        self.assertEqual(finished, 4)
        for h in ("iwb:time_to_first_token_seconds", "iwb:e2e_request_latency_seconds",
                  "iwb:request_queue_time_seconds"):
            self.assertEqual(grew(h, sample=h + "_count"), 4, h)
            self.assertEqual(value(after, h, sample=h + "_bucket", le="+Inf"), value(after, h, sample=h + "_count"))
        self.assertGreaterEqual(grew("iwb:inter_token_latency_seconds", sample="iwb:inter_token_latency_seconds_count"),
                                9 + 10 + 11)
        # Idle again: nothing running or waiting, and no block owned.
        self.assertEqual(value(after, "iwb:num_requests_running"), 0)
        self.assertEqual(value(after, "iwb:num_requests_waiting"), 0)
        self.assertEqual(value(after, "iwb:kv_cache_usage_perc"), 0)

    def test_a_client_that_leaves_is_an_abort(self):
        """A streamed request whose client closes the connection after the first bytes: the
        server aborts it (the request log says "disconnected", the abort counter moves)."""
        before = scrape()
        body = (b'{"prompt": "Once upon a time", "max_tokens": 2000, "stream": true, "temperature": 1.0,'
                b' "repeat_penalty": 1.0, "stop": ["\\u0000never"]}')
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", SERVER.port))
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            s.recv(64)  # the response has begun
            s.close()
        # Until the five have all ended (aborted, or finished first on a fast machine): on a busy
        # one the first abort comes while others still hold KV blocks, or still wait for their
        # turn holding none (those would finish during the next test and move its counters).
        # Each was submitted to the engine before its response began, so each ends counted under
        # one finished_reason; the running/waiting gauges alone are not enough, as they come from
        # the engine's last step, which may predate the last submission (seen: the next test's
        # time-to-first-token count grew by 5 for its 4 requests).
        deadline = time.time() + 20
        while time.time() < deadline:
            now = scrape()

            def ended(reason):
                return value(now, "iwb:request_success", finished_reason=reason) - \
                    value(before, "iwb:request_success", finished_reason=reason)

            aborted = ended("abort")
            num_ended = sum(ended(r) for r in ("stop", "length", "abort", "error"))
            disconnected = sum("disconnected" in line for line in SERVER.lines)
            kv_usage = value(now, "iwb:kv_cache_usage_perc")
            idle = value(now, "iwb:num_requests_running") == 0 and value(now, "iwb:num_requests_waiting") == 0
            if num_ended >= 5 and aborted >= 1 and disconnected >= 1 and kv_usage == 0 and idle:
                break
            time.sleep(0.1)
        # Clients faster than the 120 generated tokens the context leaves are possible, but not all five.
        self.assertGreaterEqual(disconnected, 1, SERVER.log())
        self.assertGreaterEqual(aborted, 1)
        self.assertEqual(num_ended, 5)
        self.assertEqual(kv_usage, 0)


class TestSpeculativeServing(unittest.TestCase):
    def test_drafts_show_in_timings_and_metrics(self):
        """--spec self: timings carry draft_n / draft_n_accepted, the spec_decode counters move (per
        position too), and greedy output equals `iwb run` with the same settings."""
        with fx.Server(MODEL, "--spec", "self", "--batch-invariant") as server:
            status, body, _ = server.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40,
                                                             "temperature": 0})
            self.assertEqual(status, 200)
            r = json.loads(body)
            timings = r["timings"]
            self.assertGreater(timings["draft_n"], 0)
            self.assertGreater(timings["draft_n_accepted"], 0)
            self.assertLessEqual(timings["draft_n_accepted"], timings["draft_n"])
            run = fx.run_iwb("run", "-m", MODEL, "-p", "Once upon a time", "-n", "40", "--temp", "0",
                             "--batch-invariant", "-t", "2")
            self.assertEqual(run, r["choices"][0]["text"] + "\n")
            families = {f.name: f for f in text_string_to_metric_families(server.get("/metrics")[1].decode())}
            self.assertEqual(value(families, "iwb:spec_decode_num_draft_tokens"), timings["draft_n"])
            self.assertEqual(value(families, "iwb:spec_decode_num_accepted_tokens"), timings["draft_n_accepted"])
            self.assertGreater(value(families, "iwb:spec_decode_num_drafts"), 0)
            per_position = sum(s.value for s in families["iwb:spec_decode_num_accepted_tokens_per_pos"].samples)
            self.assertEqual(per_position, timings["draft_n_accepted"])
            self.assertEqual(families["iwb:spec_decode_num_accepted_tokens_per_pos"].samples[0].labels["position"], "0")
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    # -t 1 and a long context: a stream lasts long enough for its client to leave in the middle.
    fx.serve_module(__name__, fx.aidreams_gguf(), ["-c", "2048", "-t", "1"], REST)
