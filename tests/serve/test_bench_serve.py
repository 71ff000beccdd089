"""`iwb bench-serve` against a real `iwb serve`: what the client counted (completed requests,
prompt and generated tokens) equals what the server's /metrics counters say it did (read with
Prometheus' own parser), the client's latencies agree with the server's own `timings`, a
concurrency sweep gives one point per concurrency with the load it promised, and the run is in
the results store.

The aidreams model decodes a token in about 0.1 ms, so on two shared cores the throughput of a
sweep point is mostly scheduling noise: the sweep is checked by the concurrency it held (the
client's mean requests in flight and the server's running gauge), not by a rising tokens/s."""

import json
import os
import sqlite3
import subprocess
import sys
import unittest

import serve_fixture as fx

ARGS, REST = fx.parse_args(needs_pyenv=True)

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SERVER = None
DB = None


def counter(name):
    """A counter's value summed over its label sets (finish reasons, models)."""
    status, body = SERVER.get("/metrics")
    assert status == 200, status
    total = 0.0
    for family in text_string_to_metric_families(body.decode()):
        if family.name == name:
            total += sum(s.value for s in family.samples if s.name == name + "_total")
    return total


def bench_serve(*args, expect_status=0):
    r = subprocess.run([ARGS.iwb, "bench-serve", "--base-url", SERVER.base_url + "/v1", "--json", "--db", DB,
                        "--seed", "3", "--input-len", "8", "--output-len", "40", *args],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != expect_status:
        raise AssertionError(f"bench-serve exited {r.returncode}:\n{r.stderr}\nserver:\n{SERVER.log()}")
    return json.loads(r.stdout), r.stderr


class TestBenchServe(unittest.TestCase):
    def test_counts_match_the_servers_counters(self):
        names = ("iwb:request_success", "iwb:generation_tokens", "iwb:prompt_tokens")
        before = {n: counter(n) for n in names}
        # No warm-up here, so the server's counters hold exactly the measured requests. The run
        # must outlast several scrapes for one of them to see a request running: 12 requests of
        # 40 tokens took about 50 ms on a fast Xeon core, one scrape in 0.05 s, and none saw one.
        num = 36
        result, _ = bench_serve("--num-prompts", str(num), "--max-concurrency", "3", "--scrape-interval", "0.01",
                                "--dataset", "chat", "--label", "counts", "--num-warmups", "0")
        after = {n: counter(n) for n in names}
        self.assertEqual(result["config"]["model"], "aidreams")  # the first of /v1/models
        self.assertEqual(result["server_kind"], "iwb serve")
        (point,) = result["points"]
        self.assertEqual(point["num_failed"], 0, point["errors_by_kind"])
        self.assertEqual(point["num_completed"], num)
        requests = point["requests"]
        # ignore_eos: every request generated exactly --output-len tokens.
        self.assertEqual([r["output_tokens"] for r in requests], [40] * num)
        self.assertEqual(len(requests), num)
        self.assertEqual(after["iwb:request_success"] - before["iwb:request_success"], num)
        generated = sum(r["output_tokens"] for r in requests)
        self.assertEqual(point["total_output_tokens"], generated)
        self.assertEqual(after["iwb:generation_tokens"] - before["iwb:generation_tokens"], generated)
        # The server counts the prompt tokens it computed; the chat prompts share system prompts,
        # which its prefix cache reuses. Its timings split each prompt the same way.
        computed = sum(r["server_timings"]["prompt_n"] for r in requests)
        cached = sum(r["server_timings"]["cache_n"] for r in requests)
        self.assertEqual(after["iwb:prompt_tokens"] - before["iwb:prompt_tokens"], computed)
        self.assertEqual(point["total_input_tokens"], computed + cached)
        # bench-serve's own scrape of the same counters agrees, and it saw the load while it ran.
        delta = point["server_delta"]
        self.assertEqual(delta["num_requests_finished"], num)
        self.assertEqual(delta["generation_tokens"], generated)
        self.assertGreater(len(point["server_series"]), 2)
        self.assertTrue(any((s["num_requests_running"] or 0) > 0 for s in point["server_series"]),
                        "no scrape during the run saw a request running")
        self.assertGreater(point["request_throughput"], 0)
        self.assertAlmostEqual(point["output_throughput"], generated / point["duration_seconds"], delta=1e-6 * generated)

    def test_latencies_agree_with_the_servers_timings(self):
        before = counter("iwb:request_success")
        result, _ = bench_serve("--num-prompts", "6", "--max-concurrency", "1", "--label", "timings")
        (point,) = result["points"]
        self.assertEqual(point["num_completed"], 6)
        # vLLM's default of one warm-up request: the server answered it, no figure counts it.
        self.assertEqual(result["config"]["num_warmups"], 1)
        self.assertEqual(counter("iwb:request_success") - before, 6 + 1)
        self.assertEqual(point["server_delta"]["num_requests_finished"], 6)
        for r in point["requests"]:
            t = r["server_timings"]
            self.assertIsNotNone(t, r)
            self.assertEqual(t["predicted_n"], r["output_tokens"])
            # One at a time nothing queues. The client cannot see the first token before the server
            # made it, nor the end before the server's prefill and decode are over; it sees them
            # no later than a round trip on a busy 2-core machine after. (Tokens come 0.1 ms
            # apart, so several arrive in one read: the client's own decode span is no bound.)
            server_ms = t["prompt_ms"] + t["predicted_ms"]
            self.assertGreaterEqual(r["ttft_ms"], t["prompt_ms"] - 0.5, r)
            self.assertLessEqual(r["ttft_ms"], server_ms + 250, r)
            self.assertGreaterEqual(r["e2e_ms"], server_ms - 0.5, r)
            self.assertLess(r["e2e_ms"], server_ms + 250, r)
            if r["output_tokens"] > 1:
                self.assertAlmostEqual(r["tpot_ms"], (r["e2e_ms"] - r["ttft_ms"]) / (r["output_tokens"] - 1), delta=1e-6)
        # On average the client's end-to-end time is the server's time plus a small overhead.
        overhead = [r["e2e_ms"] - r["server_timings"]["prompt_ms"] - r["server_timings"]["predicted_ms"]
                    for r in point["requests"]]
        self.assertLess(sorted(overhead)[len(overhead) // 2], 100, overhead)
        self.assertLessEqual(point["ttft_ms"]["median"], point["ttft_ms"]["p99"])
        self.assertLessEqual(point["ttft_ms"]["min"], point["ttft_ms"]["median"])

    def test_sweep_gives_a_curve_and_is_stored(self):
        result, stderr = bench_serve("--num-prompts", "16", "--sweep-concurrency", "1,2,4", "--label", "sweep",
                                     "--scrape-interval", "0.02", "--output-len", "100")
        points = result["points"]
        self.assertEqual([p["max_concurrency"] for p in points], [1, 2, 4])
        for p in points:
            self.assertEqual(p["num_completed"], 16, p["errors_by_kind"])
        in_flight = []
        for p in points:
            # Closed loop: the client never had more in flight than the cap, and the server never
            # ran more; at 4 the server did run several at once.
            self.assertGreater(p["output_throughput"], 0)
            running = [s["num_requests_running"] for s in p["server_series"] if s["num_requests_running"] is not None]
            self.assertLessEqual(max(running), p["max_concurrency"], running)
            in_flight.append(sum(r["e2e_ms"] for r in p["requests"]) / 1e3 / p["duration_seconds"])
        self.assertGreaterEqual(max(s["num_requests_running"] for s in points[2]["server_series"]), 2)
        self.assertLessEqual(in_flight[0], 1.01, in_flight)
        self.assertGreater(in_flight[1], 1.2, in_flight)
        self.assertGreater(in_flight[2], in_flight[1], in_flight)

        run_id = result["run_id"]
        self.assertIn(f"recorded as run {run_id}", stderr)
        listed = json.loads(fx.run_iwb("bench-serve", "--list", "--json", "--db", DB))
        (row,) = [r for r in listed if r["id"] == run_id]
        self.assertEqual((row["status"], row["label"], row["num_points"], row["server_kind"]),
                         ("done", "sweep", 3, "iwb serve"))
        with sqlite3.connect(DB) as db:
            stored = db.execute("SELECT point_index, max_concurrency, num_completed, output_throughput, point_json "
                                "FROM serve_points WHERE run_id = ? ORDER BY point_index", (run_id,)).fetchall()
        self.assertEqual([(i, c, n) for i, c, n, _, _ in stored], [(0, 1, 16), (1, 2, 16), (2, 4, 16)])
        for (_, _, _, rate, text), p in zip(stored, points):
            self.assertAlmostEqual(rate, p["output_throughput"])
            self.assertEqual(len(json.loads(text)["requests"]), 16)

    def test_human_output(self):
        r = subprocess.run([ARGS.iwb, "bench-serve", "--base-url", SERVER.base_url, "--no-store", "--num-prompts", "3",
                            "--input-len", "8", "--output-len", "8", "--goodput", "ttft:60000,tpot:60000"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in ("Successful requests:                     3", "Request goodput (req/s):", "Median TTFT (ms):",
                     "P99 ITL (ms):", "Generated tokens (server):", "Server:                                  iwb serve"):
            self.assertIn(line, r.stdout)


def main():
    global SERVER, DB
    model = fx.aidreams_gguf()
    DB = os.path.join(ARGS.work, "results.sqlite")
    if os.path.exists(DB):
        os.remove(DB)
    with fx.Server(model, "-c", "512", "-t", "2", "--alias", "aidreams") as server:
        SERVER = server
        # Warm the server up (first allocations) outside the measured runs.
        status, _, _ = server.post("/v1/completions", {"prompt": "Once", "max_tokens": 8})
        assert status == 200, status
        result = unittest.main(argv=[sys.argv[0]] + REST, exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
