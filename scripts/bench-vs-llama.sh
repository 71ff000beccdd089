#!/usr/bin/env bash
# Side-by-side throughput of our engine (`iwb bench`) and llama.cpp's llama-bench on the same
# GGUF files with the same thread count. Rounds interleave the two programs so both see the same
# machine; every repetition is kept (JSON) and the summary gives each program's best and median
# repetition per test (keyed by context depth too: "tg128 @ d8192"), the ratio of the bests,
# iwb's MBU against a read-only probe run right before each of its generation repetitions
# (`iwb bench --paired-probe`: the decode roof of that moment; the median of the pairs), and
# the load averages seen. The machines are shared: other processes and memory-bandwidth
# swings move single figures by tens of percent.
#
#   LLAMA_BENCH=/path/to/llama-bench scripts/bench-vs-llama.sh [-t THREADS] [-r REPS] [-k ROUNDS]
#       [-p PP] [-n TG] [-d DEPTHS] [-o DIR] MODEL.gguf...
#
# -d takes llama-bench's comma list of context depths (e.g. 0,8192), passed to both programs:
# each test runs after that many tokens are already in the KV cache. IWB_BENCH_ARGS and
# LLAMA_BENCH_ARGS add options to one side only, e.g. LLAMA_BENCH_ARGS="-lm none" (llama.cpp
# reading its weights into memory, as iwb does by default on the CPU) or IWB_BENCH_ARGS="-lm mmap".
#
# Each program runs with its own best OpenMP wait policy: ours with OMP_WAIT_POLICY as set
# (scripts/run.sh uses passive), llama.cpp with OpenMP's default (spinning) unless
# LLAMA_OMP_WAIT_POLICY names one — its graph has a barrier after every operation, and passive
# waiting would make each of them a sleep and a wake-up, which is not how llama.cpp is run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
iwb=${IWB:-"${IWB_BUILD_DIR:-$root/build}/app/iwb"}
llama_bench=${LLAMA_BENCH:-llama-bench}
threads=2 reps=3 rounds=3 pp=512 tg=128 depths=0 out=""
while getopts "t:r:k:p:n:d:o:" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    k) rounds=$OPTARG ;;
    p) pp=$OPTARG ;;
    n) tg=$OPTARG ;;
    d) depths=$OPTARG ;;
    o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 ]]; then
  echo "usage: LLAMA_BENCH=... $0 [-t THREADS] [-r REPS] [-k ROUNDS] [-p PP] [-n TG] [-d DEPTHS] [-o DIR] MODEL.gguf..." >&2
  exit 2
fi
command -v "$llama_bench" >/dev/null || { echo "$0: llama-bench not found (set LLAMA_BENCH)" >&2; exit 1; }
[[ -x "$iwb" ]] || { echo "$0: $iwb not built (set IWB or IWB_BUILD_DIR)" >&2; exit 1; }
out=${out:-$(mktemp -d)}
mkdir -p "$out"

load() { cut -d' ' -f1-3 /proc/loadavg; }
for ((k = 1; k <= rounds; ++k)); do
  for model in "$@"; do
    name=$(basename "$model" .gguf)
    # The prompt tests first, then the generation tests with a read-only probe right before
    # each repetition: the bandwidth of a shared machine drifts by tens of percent within
    # minutes (on the Xeon of the twenty-ninth session, within seconds).
    if ((pp > 0)); then
      echo "round $k $name: iwb prompts (load $(load))" | tee -a "$out/loads.txt"
      "$iwb" bench -m "$model" -p "$pp" -n 0 -d "$depths" -t "$threads" -r "$reps" --no-store \
        --db "$out/probes.sqlite" ${IWB_BENCH_ARGS:-} -o json > "$out/$name.iwb.$k.pp.json"
    fi
    if ((tg > 0)); then
      echo "round $k $name: iwb generation, paired probes (load $(load))" | tee -a "$out/loads.txt"
      "$iwb" bench -m "$model" -p 0 -n "$tg" -d "$depths" -t "$threads" -r "$reps" --no-store \
        --db "$out/probes.sqlite" --paired-probe ${IWB_BENCH_ARGS:-} -o json > "$out/$name.iwb.$k.json"
    fi
    echo "round $k $name: llama-bench (load $(load))" | tee -a "$out/loads.txt"
    env -u OMP_WAIT_POLICY ${LLAMA_OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$LLAMA_OMP_WAIT_POLICY} \
      "$llama_bench" -m "$model" -t "$threads" -p "$pp" -n "$tg" -d "$depths" -r "$reps" ${LLAMA_BENCH_ARGS:-} -o json \
      > "$out/$name.llama.$k.json"
  done
done
echo "round $rounds done (load $(load))" >> "$out/loads.txt"

python3 - "$out" <<'PY'
import collections, glob, json, re, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
mbu = collections.defaultdict(lambda: collections.defaultdict(list))  # iwb's, per run: the median of its pairs

def test_name(kind, n, depth):  # llama-bench's: "pp512", "tg128 @ d8192"
    return f'{kind}{n}' + (f' @ d{depth}' if depth else '')

def test_order(name):  # pp before tg, then by size and depth
    m = re.match(r'(pp|tg)(\d+)(?: @ d(\d+))?$', name)
    return (m.group(1), int(m.group(2)), int(m.group(3) or 0)) if m else (name, 0, 0)
for path in sorted(glob.glob(sys.argv[1] + '/*.json')):
    name, prog = re.match(r'.*/(.+)\.(iwb|llama)\.\d+(?:\.pp)?\.json', path).groups()
    try:
        data = json.load(open(path))
    except ValueError:
        print(f'skipped {path}: not complete JSON (an interrupted run?)', file=sys.stderr)
        continue
    # Both write llama-bench's -o json; iwb adds mbu_paired, the median of its repetitions'
    # MBU, each against the probe taken right before it.
    for r in data:
        kind, n = ('pp', r['n_prompt']) if r['n_gen'] == 0 else ('tg', r['n_gen'])
        test = test_name(kind, n, r.get('n_depth', 0))
        runs[name][(test, prog)] += r['samples_ts']
        if prog == 'iwb' and r.get('mbu_paired') is not None:
            mbu[name][test].append(r['mbu_paired'])
print('| model | test | iwb best (median) | llama.cpp best (median) | ratio | iwb MBU, paired read-only probes (median of runs) |')
print('|---|---|---|---|---|---|')
for name in sorted(runs):
    for test in sorted({t for t, _ in runs[name]}, key=test_order):
        a, b = sorted(runs[name].get((test, 'iwb'), [])), sorted(runs[name].get((test, 'llama'), []))
        if a and b:
            # statistics.median: an even count takes the mean of the middle two (a[len(a) // 2]
            # took the upper one, so with two rounds the MBU column showed the better round).
            m = mbu[name][test]
            m_text = f'{100 * statistics.median(m):.0f}%' if m and test.startswith('tg') else ''
            print(f'| {name} | {test} | {a[-1]:.1f} ({statistics.median(a):.1f}) | {b[-1]:.1f} '
                  f'({statistics.median(b):.1f}) | {a[-1] / b[-1]:.2f} | {m_text} |')
PY
echo "raw results and load averages: $out"
