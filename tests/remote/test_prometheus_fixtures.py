"""Our Prometheus parser against Prometheus' own Python parser (prometheus_client): every fixture
(vLLM, SGLang, llama-server, `iwb serve`) read by both, families, types, help, samples, labels,
values and timestamps compared; the malformed fixtures refused by both. Then a real `iwb serve`:
its /metrics after a few requests, compared the same way and mapped by ours (prom_dump
--snapshot / --difference), gives the tokens and requests the responses' usage said."""

import glob
import json
import math
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import serve_fixture as fx  # noqa: E402

ARGS, REST = fx.parse_args(needs_pyenv=True)

import argparse  # noqa: E402

import openai  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

_extra = argparse.ArgumentParser()
_extra.add_argument("--prom-dump", required=True)
_extra.add_argument("--fixtures", required=True)
EXTRA, REST = _extra.parse_known_args(REST)


def prom_dump(*args):
    r = subprocess.run([EXTRA.prom_dump] + list(args), capture_output=True, text=True, timeout=60)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None


def number(v):
    return float(v) if isinstance(v, str) else float(v)  # "NaN", "+Inf", "-Inf" or a number


def same_value(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def theirs(text):
    """prometheus_client's families as (name, type, help, [(sample, labels, value, ts)]). It yields
    each sample without a family of its own as a family of one: consecutive ones of one name are
    joined, as ours keeps them."""
    out = []
    for f in text_string_to_metric_families(text):
        kind = "untyped" if f.type == "unknown" else f.type
        samples = [(s.name, dict(s.labels), float(s.value), None if s.timestamp is None else float(s.timestamp))
                   for s in f.samples]
        if out and kind == "untyped" and out[-1][1] == "untyped" and out[-1][0] == f.name and not f.documentation:
            out[-1][3].extend(samples)
        else:
            out.append((f.name, kind, f.documentation, samples))
    return out


def ours(path):
    """prom_dump's families in prometheus_client's naming: a counter family drops its _total, and
    a counter typed without it has its samples named <name>_total (prometheus_client's
    OpenMetrics form)."""
    code, families = prom_dump(path)
    if code != 0:
        raise AssertionError(f"our parser refused {path}: {families}")
    out = []
    for f in families:
        name, kind = f["name"], f["type"]
        samples = []
        for s in f["samples"]:
            sample_name = s["name"]
            if kind == "counter" and not name.endswith("_total") and sample_name == name:
                sample_name += "_total"
            ts = None if s["timestamp_ms"] is None else s["timestamp_ms"] / 1000
            samples.append((sample_name, s["labels"], number(s["value"]), ts))
        if kind == "counter" and name.endswith("_total"):
            name = name[:-6]
        out.append((name, kind, f["help"], samples))
    return out


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def compare(test, path, text=None):
    """Asserts that both parsers read the file alike (prometheus_client reads `text` when given,
    else the file); returns prometheus_client's families."""
    text = text if text is not None else read_text(path)
    a, b = theirs(text), ours(path)
    test.assertEqual([f[:3] for f in a], [f[:3] for f in b], path)
    for fa, fb in zip(a, b):
        test.assertEqual(len(fa[3]), len(fb[3]), f"{path}: {fa[0]}")
        for sa, sb in zip(fa[3], fb[3]):
            test.assertEqual(sa[:2], sb[:2], f"{path}: {fa[0]}")
            test.assertTrue(same_value(sa[2], sb[2]), f"{path}: {sa} != {sb}")
            test.assertEqual(sa[3], sb[3], f"{path}: {sa} != {sb}")
    return a


class Differential(unittest.TestCase):
    def test_every_fixture_reads_the_same(self):
        files = sorted(glob.glob(os.path.join(EXTRA.fixtures, "*.prom")))
        self.assertGreaterEqual(len(files), 6, files)
        for path in files:
            with self.subTest(fixture=os.path.basename(path)):
                families = compare(self, path)
                self.assertGreater(len(families), 10)

    def test_corners_read_the_same(self):
        """Escapes, NaN/Inf, timestamps, samples without TYPE, blank lines and other comments."""
        text = ('# A comment that is neither HELP nor TYPE\n\n'
                '# HELP esc Help with a \\\\ backslash and a \\n newline.\n# TYPE esc gauge\n'
                'esc{path="C:\\\\x",quote="a \\"b\\"",nl="1\\n2"} 1.5 1700000000123\n'
                'esc{path="y"} NaN\nesc{path="z"} +Inf\nesc{path="w"} -Inf -17\n'
                'loose 1\nloose{a="b"} 2e3\nother 3\n'
                '# HELP h A histogram.\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\n'
                'h_sum 3.5\nh_count 2\n# TYPE s summary\ns{quantile="0.5"} 0.1\ns_sum 1\ns_count 4\n'
                '# TYPE c counter\nc 7\n')
        path = os.path.join(ARGS.work, "corners.prom")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        families = compare(self, path, text)
        self.assertEqual([f[0] for f in families], ["esc", "loose", "other", "h", "s", "c"])

    def test_the_comparison_sees_a_difference(self):
        """A value, a label or a type that differs fails the comparison."""
        path = os.path.join(EXTRA.fixtures, "llamacpp.prom")
        text = read_text(path)
        for changed in (text.replace("llamacpp:requests_deferred 1", "llamacpp:requests_deferred 2"),
                        text.replace('position="3"', 'position="4"'),
                        text.replace("# TYPE llamacpp:requests_deferred gauge", "# TYPE llamacpp:requests_deferred counter")):
            self.assertNotEqual(changed, text)
            with self.assertRaises(AssertionError):
                compare(self, path, changed)

    def test_malformed_fixtures_are_refused_by_both(self):
        files = sorted(glob.glob(os.path.join(EXTRA.fixtures, "malformed", "*.prom")))
        self.assertGreaterEqual(len(files), 4, files)
        for path in files:
            with self.subTest(fixture=os.path.basename(path)):
                with self.assertRaises(ValueError):
                    list(text_string_to_metric_families(read_text(path)))
                code, out = prom_dump(path)
                self.assertEqual(code, 1)
                self.assertIn("line ", out["error"])


class LiveServer(unittest.TestCase):
    def test_iwb_serve_metrics_match_the_responses(self):
        if not os.path.exists(os.path.join(ARGS.models, "llama2c", "aidreams260K.bin")):
            self.skipTest("the shared aidreams model is absent")
        model = fx.aidreams_gguf()
        with fx.Server(model, "-a", "aidreams") as server:
            client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)

            def run(prompts):
                usage = {"completion": 0, "prompt": 0, "cached": 0}
                for prompt, n in prompts:
                    r = client.completions.create(model="aidreams", prompt=prompt, max_tokens=n, temperature=0)
                    usage["completion"] += r.usage.completion_tokens
                    usage["prompt"] += r.usage.prompt_tokens
                    details = getattr(r.usage, "prompt_tokens_details", None)
                    usage["cached"] += (getattr(details, "cached_tokens", 0) or 0) if details else 0
                return usage

            def scrape(name):
                status, body = server.get("/metrics")
                self.assertEqual(status, 200)
                path = os.path.join(ARGS.work, name)
                with open(path, "wb") as f:
                    f.write(body)
                compare(self, path, body.decode())
                return path

            fox = "Once upon a time there was a little fox who"
            first = run([(fox, 12), (fox, 7), ("The cat sat", 9)])
            before = scrape("before.prom")
            code, s = prom_dump("--snapshot", before)
            self.assertEqual(code, 0, s)
            self.assertEqual(s["kind"], "iwb serve")
            self.assertEqual(s["generation_tokens"], first["completion"])
            self.assertEqual(s["num_requests_finished"], 3)
            self.assertEqual(s["prefix_cache_queries"], first["prompt"])
            self.assertEqual(s["prefix_cache_hits"], first["cached"])
            self.assertEqual(s["time_to_first_token"]["count"], 3)
            self.assertEqual(s["e2e_request_latency"]["count"], 3)
            self.assertEqual(s["num_requests_running"], 0)

            second = run([(fox, 5), ("A dog", 11)])
            after = scrape("after.prom")
            code, d = prom_dump("--difference", before, after)
            self.assertEqual(code, 0, d)
            self.assertEqual(d["generation_tokens"], second["completion"])
            self.assertEqual(d["num_requests_finished"], 2)
            self.assertEqual(d["time_to_first_token"]["count"], 2)
            self.assertEqual(d["time_to_first_token"]["cumulative_counts"][-1], 2)
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0]] + REST, exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
