#!/usr/bin/env python3
# Prints scripts/gpu-check.sh's one table from the results folder it fills: devices.json,
# test-runs.tsv (executable, exit status) with qt-<executable>.txt (Qt Test logs), probe.json, bench-<model>-<type>.json
# (iwb bench --json), batch-<model>-<type>.json (iwb batch-bench --json) and skipped.tsv. Also
# writes results.json (the same figures, for later comparison). Exit 1 when a test failed.
import glob
import json
import os
import sys

# The targets of issue 18 (H100 class).
MBU_TARGET = 0.85        # decode at batch 1, llama-3-8b F16 and Q4_0 (issue 18)
PREFILL_TARGET = 0.60    # prefill of 2048 tokens against the probed GEMM rate (issue 18)
BATCH64_TARGET = 25.0    # decode throughput at 64 sequences over 1 (issue 18)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def pct(x):
    return "—" if x is None else f"{100 * x:.1f}%"


def num(x, digits=1):
    return "—" if x is None else f"{x:,.{digits}f}"


def tag_of(path, prefix):
    return os.path.basename(path)[len(prefix):-len(".json")]


def split_tag(tag):
    model, _, wtype = tag.rpartition("-")
    return model, wtype


RESULTS = ("PASS", "FAIL!", "SKIP", "XFAIL", "XPASS", "BPASS", "BFAIL", "BXPASS", "BXFAIL")


def read_tests(results):
    """(executable, function, result, message) per test function and data row, from the Qt Test
    text logs qt-<executable>.txt; an executable that crashed or timed out gets a FAIL! row."""
    tests = []
    statuses = {}
    runs = os.path.join(results, "test-runs.tsv")
    if os.path.exists(runs):
        with open(runs) as f:
            for line in f:
                name, _, rc = line.rstrip("\n").partition("\t")
                statuses[name] = int(rc or 0)
    for name, rc in statuses.items():
        rows = []
        try:
            with open(os.path.join(results, f"qt-{name}.txt"), errors="replace") as f:
                text = f.read().splitlines()
        except OSError:
            text = []
        for line in text:
            head, sep, rest = line.partition(":")
            result = head.strip()
            if not sep or result not in RESULTS:
                continue
            # "TestCudaMatvec::oddSizes(q4_k) Compared values are not the same"
            qualified, _, message = rest.strip().partition(" ")
            function = qualified.split("::", 1)[-1]
            if function.endswith("()"):
                function = function[:-2]
            if function in ("initTestCase", "cleanupTestCase") and result == "PASS":
                continue
            if function == "initTestCase" and result == "SKIP":
                function = "(all: skipped in initTestCase)"
            rows.append((name, function, result, message.strip()))
        totals = any(line.startswith("Totals:") for line in text)
        if rc != 0 and not any(r[2] == "FAIL!" for r in rows):
            why = "timed out" if rc == 124 else f"exit status {rc}" + ("" if totals else ", no totals: crashed?")
            rows.append((name, "(run)", "FAIL!", why))
        tests.extend(rows)
    return tests


def main(results):
    out = {"tests": [], "bench": {}, "batch": {}, "skipped": {}}
    lines = []
    say = lines.append

    devices = load(os.path.join(results, "devices.json")) or {}
    gpus = [d for d in devices.get("devices", []) if d.get("kind") == "cuda"]
    probe = load(os.path.join(results, "probe.json")) or {}
    gpu_probe = next((p for p in probe.get("devices", []) if p.get("device_id", "").startswith("cuda")), None)
    say("Inference Workbench — GPU check")
    for g in gpus:
        say(f"  {g['id']}: {g['name']}, {g['total_memory_bytes'] / 2**30:.1f} GiB, compute capability "
            f"{g.get('compute_capability', '?')}, driver {g.get('driver_version', '?')}, runtime {g.get('runtime_version', '?')}")
    if not gpus:
        why = devices.get("cuda", {}).get("error") or "the CUDA runtime lists none"
        say(f"  {why if why.startswith('no CUDA device') else 'no CUDA device: ' + why}")
    if gpu_probe:
        say(f"  probe of {gpu_probe['device_id']}: copy {gpu_probe['copy_bytes_per_s'] / 1e9:,.0f} GB/s, "
            f"peak {gpu_probe['peak_flops'] / 1e12:,.1f} TFLOP/s ({gpu_probe.get('peak_flops_kind', '')})")
    out["devices"] = gpus
    out["probe"] = gpu_probe

    # The application offscreen (gpu-check.sh's GUI step, when the bundle had it).
    gui_status = os.path.join(results, "gui-status.txt")
    if os.path.exists(gui_status):
        with open(gui_status) as f:
            status = f.read().strip()
        shots = sorted(os.listdir(os.path.join(results, "gui"))) if os.path.isdir(os.path.join(results, "gui")) else []
        out["gui"] = {"status": status, "captured": shots}
        say(f"  GUI offscreen on cuda:0: {status}; captured {', '.join(shots) if shots else 'nothing'}")

    # Kernel correctness.
    tests = read_tests(results)
    out["tests"] = [dict(executable=e, function=fn, result=r, message=m) for e, fn, r, m in tests]
    say("")
    say("Kernel correctness (CUDA tests against their CPU references)")
    if not tests:
        say("  not run")
    else:
        width = max(len(e) for e, *_ in tests)
        fwidth = max(len(fn) for _, fn, *_ in tests)
        for e, fn, r, m in tests:
            say(f"  {e:<{width}}  {fn:<{fwidth}}  {r:<5}  {m if r != 'PASS' else ''}".rstrip())
    failed = sum(1 for t in tests if t[2] in ("FAIL!", "XPASS", "BFAIL"))
    passed = sum(1 for t in tests if t[2] == "PASS")
    skipped = sum(1 for t in tests if t[2] == "SKIP")
    if tests:
        say(f"  total: {passed} passed, {failed} failed, {skipped} skipped")

    # Decode at batch 1 and prefill of 2048 tokens.
    say("")
    say("Decode at batch 1 (tg128) and prefill of 2048 tokens (pp2048): iwb bench --device cuda:0")
    bench_paths = sorted(glob.glob(os.path.join(results, "bench-*.json")))
    if bench_paths:
        say(f"  {'model':<14} {'type':<6} {'decode tok/s':>13} {'MBU':>7} {'prefill tok/s':>14} {'MFU':>7}  MFU against")
    else:
        say("  not run")
    target_notes = []
    for path in bench_paths:
        tag = tag_of(path, "bench-")
        model, wtype = split_tag(tag)
        data = load(path)
        rows = (data or {}).get("results", [])
        tg = next((r for r in rows if r.get("test", "").startswith("tg")), None)
        pp = next((r for r in rows if r.get("test", "").startswith("pp")), None)
        if not rows:
            say(f"  {model:<14} {wtype:<6} no results (see gpu-check.log)")
            continue
        entry = {
            "decode_tokens_per_s": tg and tg.get("tokens_per_s_mean"), "decode_mbu": tg and tg.get("mbu"),
            "prefill_tokens_per_s": pp and pp.get("tokens_per_s_mean"), "prefill_mfu": pp and pp.get("mfu"),
            "mfu_peak_kind": (pp or {}).get("mfu_peak_kind", ""), "device_id": (tg or pp or {}).get("device_id"),
        }
        out["bench"][tag] = entry
        say(f"  {model:<14} {wtype:<6} {num(entry['decode_tokens_per_s']):>13} {pct(entry['decode_mbu']):>7} "
            f"{num(entry['prefill_tokens_per_s']):>14} {pct(entry['prefill_mfu']):>7}  {entry['mfu_peak_kind']}")
        if entry["device_id"] and not str(entry["device_id"]).startswith("cuda"):
            target_notes.append(f"  NOTE {tag}: ran on {entry['device_id']}, not the GPU")
        if model == "llama-3-8b" and entry["decode_mbu"] is not None:
            met = entry["decode_mbu"] >= MBU_TARGET
            target_notes.append(f"  {'met ' if met else 'MISSED'} {tag} decode MBU {pct(entry['decode_mbu'])} "
                                f"(target >= {pct(MBU_TARGET)})")
        if entry["prefill_mfu"] is not None:
            met = entry["prefill_mfu"] >= PREFILL_TARGET
            target_notes.append(f"  {'met ' if met else 'MISSED'} {tag} prefill {pct(entry['prefill_mfu'])} of the probed "
                                f"peak (target >= {pct(PREFILL_TARGET)})")

    # llama.cpp's CUDA build on the same files (gpu-check.sh --llama-bench).
    llama_paths = sorted(glob.glob(os.path.join(results, "llama-*.json")))
    if llama_paths:
        say("")
        say("Side by side with llama.cpp's CUDA build (llama-bench -ngl 99 -p 2048 -n 128 -b 2048), same files")
        say(f"  {'model':<14} {'type':<6} {'llama tg128':>12} {'ours':>9} {'ratio':>7} {'llama pp2048':>13} {'ours':>10} {'ratio':>7}")
        out["llama"] = {}
        for path in llama_paths:
            tag = tag_of(path, "llama-")
            model, wtype = split_tag(tag)
            records = load(path) or []
            tg = next((r.get("avg_ts") for r in records if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0), None)
            pp = next((r.get("avg_ts") for r in records if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0), None)
            ours = out["bench"].get(tag, {})
            ratio = lambda a, b: f"{a / b:.2f}×" if a and b else "—"
            out["llama"][tag] = {"decode_tokens_per_s": tg, "prefill_tokens_per_s": pp}
            say(f"  {model:<14} {wtype:<6} {num(tg):>12} {num(ours.get('decode_tokens_per_s')):>9} "
                f"{ratio(ours.get('decode_tokens_per_s'), tg):>7} {num(pp):>13} {num(ours.get('prefill_tokens_per_s')):>10} "
                f"{ratio(ours.get('prefill_tokens_per_s'), pp):>7}")

    # Throughput over batch sizes.
    say("")
    say("Decode throughput by batch size (tokens/s over all sequences; ×: ratio to batch 1): iwb batch-bench")
    batch_rows = []
    sizes = set()
    for path in sorted(glob.glob(os.path.join(results, "batch-*.json"))):
        tag = tag_of(path, "batch-")
        runs = {r["parallel"]: r.get("decode_tokens_per_s") for r in (load(path) or {}).get("runs", [])}
        sizes.update(runs)
        batch_rows.append((tag, runs))
        out["batch"][tag] = {str(k): v for k, v in runs.items()}
    sizes = sorted(sizes)
    if not batch_rows:
        say("  not run")
    else:
        say(f"  {'model':<14} {'type':<6} " + " ".join(f"{s:>9}" for s in sizes))
        for tag, runs in batch_rows:
            model, wtype = split_tag(tag)
            base = runs.get(1)
            say(f"  {model:<14} {wtype:<6} " + " ".join(f"{num(runs.get(s), 0):>9}" for s in sizes))
            say(f"  {'':<14} {'':<6} " + " ".join(
                f"{(f'{runs[s] / base:.1f}×' if base and runs.get(s) else '—'):>9}" for s in sizes))
            if base and runs.get(64):
                ratio = runs[64] / base
                target_notes.append(f"  {'met ' if ratio >= BATCH64_TARGET else 'MISSED'} {tag} batch 64 at "
                                    f"{ratio:.1f}× batch 1 (target >= {BATCH64_TARGET:.0f}×)")

    # Decode beside the default engine with one switch off (ab-PREFIX-TAG.json): the GGUF layout
    # for Q4_0 and Q4_K_M's Q6_K (IWB_CUDA_SPLIT=0), each product launched alone
    # (IWB_CUDA_GROUP=0), kernels launched after the last has ended (IWB_CUDA_PDL=0), each
    # product quantizing its own input (IWB_CUDA_FUSED_Q8=0).
    def ab_section(prefix, title, key, default_name, other_name):
        paths = sorted(glob.glob(os.path.join(results, f"ab-{prefix}-*.json")))
        if not paths:
            return
        say("")
        say(title)
        heads = [name.replace("_", " ") + " tok/s" for name in (default_name, other_name)]
        say(f"  {'model':<14} {'type':<6} {heads[0]:>16} {heads[1]:>16} {'ratio':>7}")
        out[key] = {}
        for path in paths:
            tag = tag_of(path, f"ab-{prefix}-")
            model, wtype = split_tag(tag)
            rows = (load(path) or {}).get("results", [])
            tg = next((r for r in rows if r.get("test", "").startswith("tg")), None)
            other = tg and tg.get("tokens_per_s_mean")
            default = out["bench"].get(tag, {}).get("decode_tokens_per_s")
            out[key][tag] = {default_name: default, other_name: other}
            ratio = f"{default / other:.2f}×" if default and other else "—"
            say(f"  {model:<14} {wtype:<6} {num(default):>16} {num(other):>16} {ratio:>7}")

    ab_section("gguf", "Decode (tg128): Q4_0 and Q6_K in the split layout (default) against GGUF's layout "
               "(IWB_CUDA_SPLIT=0)", "split_layouts", "split", "gguf")
    ab_section("nogroup", "Decode (tg128): q, k, v and gate, up in one launch each op (default) against a launch "
               "per product (IWB_CUDA_GROUP=0)", "grouped_products", "grouped", "one_by_one")
    ab_section("nopdl", "Decode (tg128): programmatic dependent launch (default on compute capability 9.0+) "
               "against each kernel after the last has ended (IWB_CUDA_PDL=0)", "programmatic_launch",
               "programmatic", "serial")
    ab_section("nofuse", "Decode (tg128): the norm and the activation writing the int8 input (default) against a "
               "quantize launch per op (IWB_CUDA_FUSED_Q8=0)", "fused_q8", "fused", "separate")

    # Decode at depth 0 and 4,096 by KV cache type (kv-TYPE-TAG.json).
    kv_paths = sorted(glob.glob(os.path.join(results, "kv-*.json")))
    if kv_paths:
        say("")
        say("Decode (tg64) at depth 0 and 4,096 by KV cache type, tokens/s")
        say(f"  {'model':<14} {'type':<6} {'cache':<6} {'d0':>9} {'d4096':>9} {'d4096/d0':>9}")
        out["kv_depth"] = {}
        for path in kv_paths:
            kv, _, tag = os.path.basename(path)[len("kv-"):-len(".json")].partition("-")
            model, wtype = split_tag(tag)
            by_depth = {r.get("n_depth"): r.get("tokens_per_s_mean")
                        for r in (load(path) or {}).get("results", []) if r.get("test", "").startswith("tg")}
            out["kv_depth"][f"{tag} {kv}"] = {str(k): v for k, v in by_depth.items()}
            d0, deep = by_depth.get(0), by_depth.get(4096)
            ratio = f"{deep / d0:.2f}" if d0 and deep else "—"
            say(f"  {model:<14} {wtype:<6} {kv:<6} {num(d0):>9} {num(deep):>9} {ratio:>9}")

    skipped_path = os.path.join(results, "skipped.tsv")
    if os.path.exists(skipped_path):
        with open(skipped_path) as f:
            for line in f:
                tag, _, why = line.rstrip("\n").partition("\t")
                out["skipped"][tag] = why
                target_notes.append(f"  SKIPPED {tag}: {why}")
    if target_notes:
        say("")
        say("Targets (issue 18, H100 class)")
        lines.extend(target_notes)

    for path in sorted(glob.glob(os.path.join(results, "profile-*.txt"))):
        say("")
        say(f"Kernel profile of {os.path.basename(path)[len('profile-'):-len('.txt')]} "
            "(iwb run --profile: a ~1,800-token prefill and 64 decode steps)")
        with open(path) as f:
            lines.extend("  " + line.rstrip("\n") for line in f if line.strip())

    micro_path = os.path.join(results, "micro.txt")
    if os.path.exists(micro_path):
        say("")
        say("Kernel microbenchmarks (gpu-check.sh's carried bench_cuda_matvec / bench_cuda_attention)")
        with open(micro_path) as f:
            lines.extend("  " + line.rstrip("\n") for line in f if line.strip())

    print("\n".join(lines))
    with open(os.path.join(results, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: gpu_check_table.py RESULTS_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
