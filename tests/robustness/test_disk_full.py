#!/usr/bin/env python3
"""A disk that fills up (issue 20): `iwb synth` and `iwb quantize` writing a GGUF and `iwb eval`
writing its logits cache, each with the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored, so a
write fails with EFBIG the way it fails with ENOSPC) below what it needs: a clear message, a
failing exit status, and no partial file left behind, not even under the temporary name."""

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import unittest

ARGS = None


def limited(bytes_allowed):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_allowed, bytes_allowed))
    return apply


def iwb(*args, limit=None, env=None):
    return subprocess.run([ARGS.iwb, *args], capture_output=True, text=True, env=env,
                          preexec_fn=limited(limit) if limit else None)


class TestDiskFull(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A fresh folder: files (a whole GGUF, a logits cache) left by an earlier run would
        # stand for output this run must not leave, or let eval skip the cache write.
        shutil.rmtree(ARGS.work, ignore_errors=True)
        os.makedirs(ARGS.work)
        src = os.path.join(ARGS.models, "llama2c")
        if not os.path.exists(os.path.join(src, "aidreams260K.bin")):
            raise unittest.SkipTest("the shared aidreams model is absent")
        cls.model = os.path.join(ARGS.work, "aidreams.gguf")
        r = iwb("convert", "llama2c", "--checkpoint", os.path.join(src, "aidreams260K.bin"), "--tokenizer",
                os.path.join(src, "aidreams260K-tok512.bin"), "-o", cls.model)
        assert r.returncode == 0, r.stderr

    def leftovers(self, folder, stem):
        return [f for f in os.listdir(folder) if f.startswith(stem)]

    def test_synth_write_fails_cleanly(self):
        out = os.path.join(ARGS.work, "synth-full.gguf")
        r = iwb("synth", "--preset", "test-llama", "--type", "F32", "-o", out, limit=64 * 1024)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot write", r.stderr)
        self.assertEqual(self.leftovers(ARGS.work, "synth-full"), [])
        r = iwb("synth", "--preset", "test-llama", "--type", "F32", "-o", out)  # with room: whole
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(iwb("info", out).returncode, 0)

    def test_quantize_write_fails_cleanly(self):
        out = os.path.join(ARGS.work, "quant-full.gguf")
        r = iwb("quantize", "-m", self.model, "-o", out, "--type", "Q8_0", "--no-store", limit=100 * 1024)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot write", r.stderr)
        self.assertEqual(self.leftovers(ARGS.work, "quant-full"), [])

    def test_eval_cache_write_fails_cleanly(self):
        cache = os.path.join(ARGS.work, "logits")
        os.makedirs(cache, exist_ok=True)
        env = dict(os.environ, IWB_LOGITS_CACHE=cache, CUDA_VISIBLE_DEVICES="")
        quantized = os.path.join(ARGS.work, "aidreams-q8_0.gguf")
        self.assertEqual(iwb("quantize", "-m", self.model, "-o", quantized, "--type", "Q8_0", "--no-store").returncode, 0)
        r = iwb("eval", "-m", quantized, "--base", self.model, "-c", "128", "-n", "0", "-t", "1", "--no-store",
                limit=256 * 1024, env=env)
        self.assertIn("logits cache", r.stderr)
        self.assertIn("disk full", r.stderr)
        self.assertEqual(os.listdir(cache), [], "a partial cache was left behind")
        # With room again the cache is written whole and used.
        self.assertEqual(iwb("eval", "-m", quantized, "--base", self.model, "-c", "128", "-n", "0", "-t", "1",
                             "--no-store", env=env).returncode, 0)
        self.assertEqual(len([f for f in os.listdir(cache) if f.endswith(".logp")]), 1)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--iwb", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
