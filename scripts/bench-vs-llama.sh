#!/usr/bin/env bash
# Side-by-side throughput of our engine (`iwb bench`) and llama.cpp's llama-bench on the same
# GGUF files, same thread count, interleaved so both see the same machine. Prints each
# program's pp/tg table with the load average before and after every run; take the best of
# the rounds (the machines are shared: other processes and memory-bandwidth swings move the
# figures by tens of percent).
#
#   LLAMA_BENCH=/path/to/llama-bench scripts/bench-vs-llama.sh [-t THREADS] [-r REPS] [-k ROUNDS] MODEL.gguf...
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
iwb=${IWB:-"${IWB_BUILD_DIR:-$root/build}/app/iwb"}
llama_bench=${LLAMA_BENCH:-llama-bench}
threads=2 reps=3 rounds=2 pp=512 tg=128
while getopts "t:r:k:p:n:" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    k) rounds=$OPTARG ;;
    p) pp=$OPTARG ;;
    n) tg=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 ]]; then
  echo "usage: LLAMA_BENCH=... $0 [-t THREADS] [-r REPS] [-k ROUNDS] [-p PP] [-n TG] MODEL.gguf..." >&2
  exit 2
fi
command -v "$llama_bench" >/dev/null || { echo "$0: llama-bench not found (set LLAMA_BENCH)" >&2; exit 1; }
[[ -x "$iwb" ]] || { echo "$0: $iwb not built (set IWB or IWB_BUILD_DIR)" >&2; exit 1; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
for model in "$@"; do
  echo "## $(basename "$model")"
  for ((k = 1; k <= rounds; ++k)); do
    echo "# round $k, iwb, load $(load)"
    "$iwb" bench -m "$model" -p "$pp" -n "$tg" -t "$threads" -r "$reps" --no-store | grep -E '^\| [a-z]' || true
    echo "# round $k, llama-bench, load $(load)"
    "$llama_bench" -m "$model" -t "$threads" -p "$pp" -n "$tg" -r "$reps" | grep -E '^\| [a-z]' | grep -v '^| model' || true
    echo "# load after $(load)"
  done
done
