#!/usr/bin/env bash
# The cost of each KV-cache type (perplexity over the same program's f16-cache perplexity − 1),
# ours and llama.cpp's, on the same GGUF and text, with the standard error of each cost and of
# their difference, paired chunk by chunk (docs/quantization.md, issue 23's criterion).
#
# Both programs score the same chunks (llama-perplexity's method: -c CTX, second half of each
# chunk), so a chunk that is hard for one cache is hard for the other: the difference of two
# costs is known far better than either perplexity. Per chunk, ours come from `iwb eval --json`
# (chunk_mean_nll); llama-perplexity prints running perplexities ([i]P_i), from which chunk i's
# mean negative log-likelihood is i·ln P_i − (i−1)·ln P_(i−1) (its 4 decimals add a little noise
# per chunk, none to the mean).
#
#   scripts/kv-cost-vs-llama.sh --llama-build /work/llama-build -m MODEL.gguf -f TEXT \
#       [--chunks 64] [-c 512] [-t 2] [--types "q8_0 q4_0 q8_0/q4_0"] [--out DIR] [--reuse]
#
# Every run is plain (no KL files: for a vocabulary of 262,144 they take gigabytes). --reuse
# keeps outputs already in --out (the runs take minutes each). Exit 0 when every type's
# difference is within --points (0.2) of zero or ours is the lower cost, 1 when not, 2 on a
# usage or setup error.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

llama_build=${LLAMA_CPP_BUILD:-}
iwb="$root/build/app/iwb"
model=""
text=""
chunks=64
ctx=512
threads=2
types="q8_0 q5_1 q5_0 q4_1 q4_0 q8_0/q4_0"
out=""
reuse=0
points=0.2
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --llama-build) llama_build=$2; shift 2 ;;
    --iwb) iwb=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    -f) text=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --points) points=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "kv-cost-vs-llama.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ -n $model && -n $text ]] || { echo "kv-cost-vs-llama.sh: -m MODEL and -f TEXT are required" >&2; usage; }
[[ -f $model ]] || { echo "kv-cost-vs-llama.sh: no model '$model'" >&2; exit 2; }
[[ -f $text ]] || { echo "kv-cost-vs-llama.sh: no text '$text'" >&2; exit 2; }
[[ -x $iwb ]] || { echo "kv-cost-vs-llama.sh: no iwb at '$iwb' (build first)" >&2; exit 2; }
perplexity=$llama_build/bin/llama-perplexity
[[ -n $llama_build && -x $perplexity ]] || {
  echo "kv-cost-vs-llama.sh: no llama-perplexity under --llama-build '$llama_build' (docs/llama-agreement.md says how to build it)" >&2
  exit 2
}
[[ -n $out ]] || out=$(mktemp -d /tmp/kv-cost.XXXXXX)
mkdir -p "$out"

run_pair() {  # K V: one run of each program, ours first
  local k=$1 v=$2 name="$1-$2"
  if [[ $reuse == 0 || ! -s $out/iwb-$name.json ]]; then
    echo "iwb eval, K $k, V $v ..." >&2
    "$iwb" eval -m "$model" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" -n 0 -ctk "$k" -ctv "$v" \
      --no-store --json > "$out/iwb-$name.json"
  fi
  if [[ $reuse == 0 || ! -s $out/llama-$name.log ]] || ! grep -q "Final estimate" "$out/llama-$name.log"; then
    echo "llama-perplexity, K $k, V $v ..." >&2
    # Flash attention on: llama.cpp needs it for a quantized V, and rotates the cache only with it.
    "$perplexity" -m "$model" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" -t "$threads" -ctk "$k" -ctv "$v" \
      -fa on > "$out/llama-$name.log" 2>&1
  fi
}

run_pair f16 f16
pairs=()
for t in $types; do
  k=${t%/*}
  v=${t#*/}
  run_pair "$k" "$v"
  pairs+=("$k-$v")
done

python3 - "$out" "$points" "${pairs[@]}" <<'EOF'
import json, math, re, statistics, sys

out, points, pairs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]

def ours(name):
    with open(f"{out}/iwb-{name}.json") as f:
        return json.load(f)["chunk_mean_nll"]

def llamas(name):
    with open(f"{out}/llama-{name}.log", errors="replace") as f:
        text = f.read()
    running = [float(m.group(2)) for m in re.finditer(r"\[(\d+)\]([0-9.]+),", text)]
    if not running:
        sys.exit(f"no per-chunk perplexities in {out}/llama-{name}.log")
    logs = [i * math.log(p) for i, p in enumerate(running, 1)]
    return [logs[0]] + [logs[i] - logs[i - 1] for i in range(1, len(logs))]

def cost(delta):  # per-chunk ln ratios -> cost in points and its standard error
    m = statistics.fmean(delta)
    se = statistics.stdev(delta) / math.sqrt(len(delta)) if len(delta) > 1 else float("nan")
    return 100 * (math.exp(m) - 1), 100 * math.exp(m) * se

base_o, base_l = ours("f16-f16"), llamas("f16-f16")
n = min(len(base_o), len(base_l))
if len(base_o) != len(base_l):
    print(f"warning: {len(base_o)} chunks ours, {len(base_l)} llama.cpp's; comparing the first {n}", file=sys.stderr)
print(f"{n} chunks; f16-cache perplexity ours {math.exp(statistics.fmean(base_o[:n])):.4f}, "
      f"llama.cpp {math.exp(statistics.fmean(base_l[:n])):.4f}")
print(f"{'K/V':<14}{'ours: cost':>18}{'llama.cpp: cost':>20}{'ours - llama.cpp':>22}  within {points} points")
ok = True
for name in pairs:
    q_o, q_l = ours(name)[:n], llamas(name)[:n]
    d_o = [a - b for a, b in zip(q_o, base_o)]
    d_l = [a - b for a, b in zip(q_l, base_l)]
    c_o, e_o = cost(d_o)
    c_l, e_l = cost(d_l)
    g = [a - b for a, b in zip(d_o, d_l)]
    gap = c_o - c_l
    gap_se = 100 * math.exp(statistics.fmean(d_l)) * statistics.stdev(g) / math.sqrt(n) if n > 1 else float("nan")
    verdict = "yes" if abs(gap) <= points else ("ours lower" if gap < 0 else "NO")
    ok = ok and verdict != "NO"
    label = name.replace("-", "/")
    print(f"{label:<14}{c_o:>+10.2f} % ± {e_o:4.2f}{c_l:>+12.2f} % ± {e_l:4.2f}{gap:>+14.2f} ± {gap_se:4.2f}  {verdict}")
sys.exit(0 if ok else 1)
EOF
