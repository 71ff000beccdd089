"""Shared by the serving tests: command-line arguments, the virtual environment with the openai
client, the aidreams model converted to GGUF, and a real `iwb serve` on a free loopback port
(started with --port 0; the port is read from its "listening on" line)."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ARGS = None


def parse_args(needs_pyenv):
    """Reads the arguments CTest passes. With needs_pyenv, re-runs this script with the build
    folder's virtual environment (scripts/pyenv.sh makes it) or fails saying how to make it."""
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--iwb", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--pyenv", required=True)
    p.add_argument("--work", required=True)
    ARGS, rest = p.parse_known_args()
    if needs_pyenv:
        python = os.path.join(ARGS.pyenv, "bin", "python")
        if os.path.realpath(sys.prefix) != os.path.realpath(ARGS.pyenv):
            if not os.path.exists(python):
                sys.exit(f"FAIL: the serving tests' Python environment is missing: {ARGS.pyenv}\n"
                         f"      make it with scripts/pyenv.sh {os.path.dirname(ARGS.pyenv)} "
                         f"(scripts/build.sh and scripts/test.sh run it)")
            os.execv(python, [python] + sys.argv)
    os.makedirs(ARGS.work, exist_ok=True)
    return ARGS, rest


def aidreams_gguf():
    """The shared llama2.c aidreams model converted with `iwb convert` (into the work folder)."""
    src = os.path.join(ARGS.models, "llama2c")
    checkpoint = os.path.join(src, "aidreams260K.bin")
    if not os.path.exists(checkpoint):
        print("SKIP: the shared aidreams model is absent", file=sys.stderr)
        sys.exit(0)
    out = os.path.join(ARGS.work, "aidreams.gguf")
    subprocess.run([ARGS.iwb, "convert", "llama2c", "--checkpoint", checkpoint, "--tokenizer",
                    os.path.join(src, "aidreams260K-tok512.bin"), "-o", out],
                   check=True, capture_output=True)
    return out


def default_model():
    """The default chat model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) where scripts/fetch-model.sh
    put it; without it the calling test skips, saying so."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(cache, "inference-workbench", "models", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    if not os.path.exists(path):
        print(f"SKIP: the default model is absent ({path}; scripts/fetch-model.sh fetches it)", file=sys.stderr)
        sys.exit(0)
    return path


class Server:
    """`iwb serve` in a child process; stderr lines are kept in `lines`."""

    def __init__(self, model, *extra, env=None):
        self.args = [ARGS.iwb, "serve", "-m", model, "--port", "0", "-t", "2"] + list(extra)
        self.env = env
        self.lines = []
        self._lock = threading.Lock()

    def __enter__(self):
        self.proc = subprocess.Popen(self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     env=self.env, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.time() + 60
        self.port = None
        while self.port is None:
            if time.time() > deadline or self.proc.poll() is not None:
                self.kill()
                raise RuntimeError("iwb serve did not start:\n" + self.log())
            with self._lock:
                for line in self.lines:
                    m = re.search(r"listening on http://[^:]+:(\d+)", line)
                    if m:
                        self.port = int(m.group(1))
            time.sleep(0.02)
        self.base_url = f"http://127.0.0.1:{self.port}"
        while True:
            status, _ = self.get("/health")
            if status == 200:
                break
            if time.time() > deadline or self.proc.poll() is not None:
                self.kill()
                raise RuntimeError("iwb serve never became healthy:\n" + self.log())
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.stop()

    def _read(self):
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def log(self):
        with self._lock:
            return "\n".join(self.lines[-60:])

    def get(self, path, headers=None, timeout=30):
        req = urllib.request.Request(self.base_url + path if hasattr(self, "base_url")
                                     else f"http://127.0.0.1:{self.port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, ConnectionError):
            return 0, b""

    def post(self, path, body, headers=None, timeout=60):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def is_alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=30):
        """SIGTERM, then the exit status (it must stop cleanly: 0)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError("iwb serve did not stop within %d s after SIGTERM:\n%s" % (timeout, self.log()))
        self._reader.join(timeout=5)
        if not self._reader.is_alive():
            self.proc.stderr.close()
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def openai_client(server):
    """The official openai client on `server`, without retries (a test sees every failure)."""
    import openai
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def serve_and_test(model, server_args, rest, on_start):
    """Runs the calling file's unittest cases against one `iwb serve` of `model`: on_start(server)
    first (the file keeps the server and its client), then the tests; exits with their result, or
    1 when the server did not stop cleanly."""
    import unittest
    with Server(model, *server_args) as server:
        on_start(server)
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2).result
        code = server.stop()
        if code != 0:
            print(f"FAIL: iwb serve exited with {code}:\n{server.log()}")
            sys.exit(1)
    sys.exit(0 if result.wasSuccessful() else 1)


def whitespace_token_ids(server):
    """The ids of tokens that are only whitespace: single ones through /detokenize (byte tokens
    such as <0x0A>), and the pieces of whitespace runs through /tokenize (SentencePiece's "▁",
    which /detokenize drops at the start of a text). A story model pads JSON with them wherever a
    grammar allows; tests ban them by logit_bias so that replies fit its 128-token context."""
    ids = set()
    for i in range(512):
        status, body, _ = server.post("/detokenize", {"tokens": [i]})
        piece = json.loads(body)["content"] if status == 200 else ""
        if piece and not piece.strip(" \t\n\r"):
            ids.add(i)
    for text in ("a b", "a  b", "a   b", "a    b", "a\nb", "a\n\nb", "a\tb", "a \n b", "a\n  b", "a\n    b"):
        status, body, _ = server.post("/tokenize", {"content": text, "add_special": False, "with_pieces": True})
        for t in json.loads(body)["tokens"]:
            if t["piece"] and not t["piece"].strip(" \t\n\r"):
                ids.add(t["id"])
    return sorted(ids)


def serve_module(module_name, model, server_args, rest):
    """The main() of a test file (pass __name__): its unittest cases against one `iwb serve` of
    `model`, with the file's MODEL, SERVER and CLIENT set first, and its NO_WHITESPACE (where it
    has one) filled with bans of the whitespace-only tokens."""
    module = sys.modules[module_name]

    def start(server):
        module.MODEL = model
        module.SERVER = server
        module.CLIENT = openai_client(server)
        if hasattr(module, "NO_WHITESPACE"):
            module.NO_WHITESPACE.update({str(i): -100 for i in whitespace_token_ids(server)})

    serve_and_test(model, server_args, rest, start)


def assert_bad_requests(test, client, cases):
    """Each (extra body fields, param, words) of `cases` is refused by a chat completion with an
    OpenAI-shaped 400 naming `param`, its message holding `words`."""
    import openai
    for extra, param, words in cases:
        with test.assertRaises(openai.BadRequestError, msg=json.dumps(extra)) as e:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                           extra_body=extra)
        test.assertEqual(e.exception.body["param"], param, json.dumps(extra))
        test.assertIn(words, e.exception.body["message"])


def run_iwb(*args, timeout=120):
    r = subprocess.run([ARGS.iwb] + list(args), capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"iwb {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout
