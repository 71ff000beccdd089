#!/usr/bin/env python3
"""Kill test (issue 20): SIGKILL at random moments during the things a user must not lose,
then the checks a restart would make. Scenarios:

  chat      a chat reply streaming into the SQLite history (kill_chat_driver): every reply
            reported finished is in the history, complete; the file passes integrity_check
  gguf      a GGUF write (`iwb synth`): the output is either absent or a whole file that parses
            (the previous whole file stays until a new one replaces it); no partial file is
            taken for a whole one
  quantize  a quantization recorded in the results store: no whole-looking partial output; the
            store passes integrity_check; the killed run reads as interrupted, not running
  eval      `iwb eval` writing its base-logits cache: the next run, using whatever cache is
            there, gives exactly the figures of a run without the cache
  bench     `iwb bench` recording to the store: integrity_check passes, no half-written row

  tests/robustness/kill_test.py --iwb build/app/iwb --driver build/tests/robustness/kill_chat_driver \
      --models ../shared/models --work /tmp/kill [--kills 50] [--scenarios chat,gguf,...]

Prints one line per scenario (kills, recoveries, lost, integrity failures) and exits 1 on any
loss. scripts/kill-test.sh runs it; CTest runs 3 kills per scenario."""

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

ARGS = None


def run_ok(*cmd, env=None):
    r = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


def kill_after(cmd, delay, env=None, stdout=subprocess.DEVNULL):
    """Starts cmd, SIGKILLs it after `delay` seconds (or lets it finish first); returns
    (was_killed, stdout text when captured)."""
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        p.wait(timeout=delay)
        killed = False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        killed = True
    out = p.stdout.read() if stdout == subprocess.PIPE else ""
    return killed, out


def integrity(path):
    if not os.path.exists(path):
        return "ok"  # nothing written yet is not a corruption
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def gguf_is_whole(path):
    r = subprocess.run([ARGS.iwb, "info", path], capture_output=True, text=True)
    return r.returncode == 0


def aidreams(work):
    out = os.path.join(work, "aidreams.gguf")
    if not os.path.exists(out):
        src = os.path.join(ARGS.models, "llama2c")
        run_ok(ARGS.iwb, "convert", "llama2c", "--checkpoint", os.path.join(src, "aidreams260K.bin"),
               "--tokenizer", os.path.join(src, "aidreams260K-tok512.bin"), "-o", out)
    return out


class Tally:
    def __init__(self, name):
        self.name, self.kills, self.recoveries, self.lost, self.integrity_failures = name, 0, 0, 0, 0
        self.problems = []

    def problem(self, what):
        if len(self.problems) < 10:
            self.problems.append(what)

    def line(self):
        return (f"{self.name:9s} kills {self.kills:3d}  recoveries {self.recoveries:3d}  lost {self.lost}  "
                f"integrity failures {self.integrity_failures}")


def scenario_chat(work, kills, rng):
    t = Tally("chat")
    history = os.path.join(work, "chat", "history.sqlite")
    os.makedirs(os.path.dirname(history), exist_ok=True)
    model = aidreams(work)
    finished = set()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", CUDA_VISIBLE_DEVICES="")
    while t.kills < kills:
        killed, out = kill_after([ARGS.driver, "run", history, model], rng.uniform(0.3, 2.5), env=env,
                                 stdout=subprocess.PIPE)
        finished |= {int(line.split()[1]) for line in out.splitlines() if line.startswith("FINISHED ")}
        if not killed:
            t.problem("the chat driver exited by itself")
            break
        t.kills += 1
        r = subprocess.run([ARGS.driver, "check", history], capture_output=True, text=True, env=env)
        lines = r.stdout.splitlines()
        if not any(line == "INTEGRITY ok" for line in lines):
            t.integrity_failures += 1
            t.problem(f"integrity: {lines[:1]}")
        complete = {int(line.split()[1]) for line in lines if line.startswith("COMPLETE ")}
        missing = finished - complete
        if r.returncode != 0 or missing:
            t.lost += len(missing)
            t.problem(f"replies reported finished but not complete in the history: {sorted(missing)[:5]}")
        else:
            t.recoveries += 1
    return t


def scenario_gguf(work, kills, rng):
    t = Tally("gguf")
    out = os.path.join(work, "gguf", "synth.gguf")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [ARGS.iwb, "synth", "--preset", "gemma-3-270m", "--type", "Q4_0", "-t", "1", "-o", out]
    start = time.time()
    run_ok(*cmd)  # one whole file first: a kill during a rewrite must leave it whole
    duration = time.time() - start
    while t.kills < kills:
        killed, _ = kill_after(cmd, rng.uniform(0.05, duration * 1.1))
        t.kills += killed
        if not os.path.exists(out) or not gguf_is_whole(out):
            t.lost += 1
            t.problem(f"after a kill the output is {'missing' if not os.path.exists(out) else 'not a whole GGUF'}")
        else:
            t.recoveries += killed
    return t


def quant_statuses(store):
    con = sqlite3.connect(store)
    try:
        return con.execute("SELECT id, status FROM quant_runs ORDER BY id").fetchall()
    finally:
        con.close()


def scenario_quantize(work, kills, rng):
    t = Tally("quantize")
    folder = os.path.join(work, "quantize")
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "source-f16.gguf")
    if not os.path.exists(source):
        run_ok(ARGS.iwb, "synth", "--preset", "gemma-3-270m", "--type", "F16", "-t", "1", "-o", source)
    store = os.path.join(folder, "results.sqlite")
    out = os.path.join(folder, "out-q4_k.gguf")
    cmd = [ARGS.iwb, "quantize", "-m", source, "-o", out, "--type", "Q4_K", "-t", "1", "--db", store]
    start = time.time()
    run_ok(*cmd)
    duration = time.time() - start
    while t.kills < kills:
        killed, _ = kill_after(cmd, rng.uniform(0.05, duration * 1.1))
        t.kills += killed
        # What a restart sees: the store opened by the program (opening marks the runs of
        # writers that are gone as interrupted), then the rows as the lab lists them.
        opened = subprocess.run([ARGS.iwb, "bench", "--list", "--db", store, "--json"], capture_output=True, text=True)
        status = integrity(store)
        if status != "ok":
            t.integrity_failures += 1
            t.problem(f"integrity: {status}")
        if opened.returncode != 0:
            t.problem(f"the store does not open: {opened.stderr.strip()[:200]}")
            t.lost += 1
            continue
        stuck = [run_id for run_id, run_status in quant_statuses(store) if run_status == "running"]
        if stuck:
            t.lost += 1
            t.problem(f"runs still 'running' after their process died: {stuck[:5]}")
        elif os.path.exists(out) and not gguf_is_whole(out):
            t.lost += 1
            t.problem("a partial quantized file took the output's name")
        else:
            t.recoveries += killed
    return t


def eval_figures(cmd, env):
    out = run_ok(*cmd, "--json", env=env)
    r = json.loads(out)
    return (r["perplexity"], r["base_perplexity"], r["kl_mean"], r["kl_p99"], r["top1_agreement"])


def scenario_eval(work, kills, rng):
    t = Tally("eval")
    folder = os.path.join(work, "eval")
    os.makedirs(folder, exist_ok=True)
    base = aidreams(work)
    quantized = os.path.join(folder, "aidreams-q8_0.gguf")
    if not os.path.exists(quantized):
        run_ok(ARGS.iwb, "quantize", "-m", base, "-o", quantized, "--type", "Q8_0", "--no-store")
    env = dict(os.environ, IWB_LOGITS_CACHE=os.path.join(folder, "logits"), CUDA_VISIBLE_DEVICES="")
    cmd = [ARGS.iwb, "eval", "-m", quantized, "--base", base, "-c", "128", "-n", "0", "-t", "1", "--no-store"]
    start = time.time()
    truth = eval_figures(cmd + ["--no-cache"], env)
    duration = time.time() - start
    while t.kills < kills:
        # Start without a cache, so each kill can land while the cache is being written.
        for f in os.listdir(env["IWB_LOGITS_CACHE"]):
            os.remove(os.path.join(env["IWB_LOGITS_CACHE"], f))
        killed, _ = kill_after(cmd, rng.uniform(0.02, duration * 1.1), env=env)
        t.kills += killed
        again = eval_figures(cmd, env)  # takes whatever cache the killed run left
        if again != truth:
            t.lost += 1
            t.problem(f"after a kill the figures differ: {again} vs {truth}")
        else:
            t.recoveries += killed
    return t


def scenario_bench(work, kills, rng):
    t = Tally("bench")
    folder = os.path.join(work, "bench")
    os.makedirs(folder, exist_ok=True)
    model = aidreams(work)
    store = os.path.join(folder, "results.sqlite")
    cmd = [ARGS.iwb, "bench", "-m", model, "-p", "64", "-n", "32", "-r", "3", "-t", "1", "--db", store]
    start = time.time()
    run_ok(*cmd)
    duration = time.time() - start
    while t.kills < kills:
        killed, _ = kill_after(cmd, rng.uniform(0.01, duration * 1.1))
        t.kills += killed
        status = integrity(store)
        listing = subprocess.run([ARGS.iwb, "bench", "--list", "--db", store, "--json"], capture_output=True, text=True)
        if status != "ok":
            t.integrity_failures += 1
            t.problem(f"integrity: {status}")
        elif listing.returncode != 0:
            t.lost += 1
            t.problem(f"the store does not list: {listing.stderr.strip()[:200]}")
        else:
            t.recoveries += killed
    return t


SCENARIOS = {"chat": scenario_chat, "gguf": scenario_gguf, "quantize": scenario_quantize, "eval": scenario_eval,
             "bench": scenario_bench}


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--iwb", required=True)
    p.add_argument("--driver", default="")
    p.add_argument("--models", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--seed", type=int, default=1)
    ARGS = p.parse_args()
    if not os.path.exists(os.path.join(ARGS.models, "llama2c", "aidreams260K.bin")):
        print("SKIP: the shared aidreams model is absent")
        return 0
    os.makedirs(ARGS.work, exist_ok=True)
    rng = random.Random(ARGS.seed)
    tallies = []
    for name in ARGS.scenarios.split(","):
        if name == "chat" and not ARGS.driver:
            print("chat: skipped (no --driver: the build has no UI)")
            continue
        started = time.time()
        tally = SCENARIOS[name](ARGS.work, ARGS.kills, rng)
        print(tally.line() + f"  ({time.time() - started:.0f} s)", flush=True)
        for problem in tally.problems:
            print("   FAIL:", problem)
        tallies.append(tally)
    bad = [t for t in tallies if t.lost or t.integrity_failures or t.problems]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
