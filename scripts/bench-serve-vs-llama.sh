#!/usr/bin/env bash
# Side-by-side serving load on one GGUF file: llama.cpp's llama-server and our `iwb serve`, each
# started alone on a free loopback port with the same threads, parallel sequences and context,
# and driven by the same `iwb bench-serve` load (a concurrency sweep). llama-server is built
# from llama.cpp's public source (the llama-cpp-python sdist on PyPI ships it under
# vendor/llama.cpp) in a cache folder outside this repository, unless LLAMA_SERVER names one.
#
#   scripts/bench-serve-vs-llama.sh [-t THREADS] [-c CONCURRENCIES] [-n PROMPTS_PER_POINT]
#       [-i INPUT_LEN] [-o OUTPUT_LEN] [-k ROUNDS] [-d OUT_DIR] MODEL.gguf
#
# Prints one Markdown table (both servers, every concurrency) and keeps every JSON result in
# OUT_DIR. Both servers stay loaded but only one is measured at a time (the other is idle):
# they take turns at every concurrency of every round, so drifts of a shared machine fall on
# both alike.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${IWB_BUILD_DIR:-"$root/build"}
iwb=${IWB:-"$build/app/iwb"}
threads=2 sweep=1,2,4 prompts=8 input_len=128 output_len=32 rounds=2 out=""
while getopts "t:c:n:i:o:k:d:" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    c) sweep=$OPTARG ;;
    n) prompts=$OPTARG ;;
    i) input_len=$OPTARG ;;
    o) output_len=$OPTARG ;;
    k) rounds=$OPTARG ;;
    d) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 1 ]] || { echo "usage: $0 [-t THREADS] [-c 1,2,4] [-n PROMPTS] [-i IN] [-o OUT] [-k ROUNDS] [-d DIR] MODEL.gguf" >&2; exit 2; }
model=$(realpath "$1")
[[ -f "$model" ]] || { echo "$0: no such model file: $1" >&2; exit 1; }
[[ -x "$iwb" ]] || { echo "$0: $iwb is not built (scripts/build.sh, or set IWB / IWB_BUILD_DIR)" >&2; exit 1; }
out=${out:-$(mktemp -d)}
mkdir -p "$out"

# --- llama-server: given, or built once from the pinned public source -----------------------
llama_version=0.3.36
cache=${XDG_CACHE_HOME:-$HOME/.cache}/inference-workbench/llama.cpp-$llama_version
build_llama_server() {
  local src="$cache/src" bld="$cache/build"
  if [[ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]]; then
    mkdir -p "$cache/download"
    local pip="$build/pyenv/bin/pip"
    [[ -x "$pip" ]] || pip="python3 -m pip"
    echo "bench-serve-vs-llama: downloading llama-cpp-python $llama_version (source) from PyPI" >&2
    $pip download --quiet --no-deps --no-binary :all: -d "$cache/download" "llama-cpp-python==$llama_version"
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$cache/download/llama_cpp_python-$llama_version.tar.gz" -C "$src" --strip-components=1
  fi
  # llama.cpp's AMX path crashes on the Intel hosts we meet: there, its native build is replaced
  # by the AVX-512 flags named one by one (AMX left out).
  local flags=(-DGGML_NATIVE=ON)
  if grep -qw amx_int8 /proc/cpuinfo; then
    flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
           -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
  fi
  cmake -S "$src/vendor/llama.cpp" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_CUDA=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${flags[@]}" >"$out/llama-configure.log"
  cmake --build "$bld" --target llama-server -j "$(nproc)" >"$out/llama-build.log"
  echo "$bld/bin/llama-server"
}
llama_server=${LLAMA_SERVER:-}
if [[ -z "$llama_server" ]]; then
  if [[ -x "$cache/build/bin/llama-server" ]]; then llama_server="$cache/build/bin/llama-server"
  else llama_server=$(build_llama_server); fi
fi
[[ -x "$llama_server" ]] || { echo "$0: llama-server not found: $llama_server" >&2; exit 1; }

# --- one server at a time ------------------------------------------------------------------
max_c=$(tr ',' '\n' <<<"$sweep" | sort -n | tail -1)
ctx=$((input_len + output_len + 64))
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_healthy() {  # $1 port, $2 pid
  for _ in $(seq 1 600); do
    kill -0 "$2" 2>/dev/null || return 1
    python3 - "$1" <<'EOF' && return 0
import sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
    sleep 0.5
  done
  return 1
}
start_server() {  # $1 name, then the server's command line (with PORT in place of the port)
  local name=$1; shift
  local port; port=$(free_port)
  local args=("${@//PORT/$port}")
  "${args[@]}" >"$out/$name.server.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  if ! wait_healthy "$port" "$pid"; then
    echo "$0: $name did not become healthy; its log:" >&2; tail -20 "$out/$name.server.log" >&2
    exit 1
  fi
  ports[$name]=$port
}
declare -A ports
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# The same shape of server on both sides: max_c sequences at once, each with ctx positions
# (llama-server divides -c among its -np slots; iwb serve's -c is per sequence). Both stay up,
# idle while the other is measured: the machine is shared and its speed drifts, so the two
# servers take turns at every point of every round rather than one sweep after the other.
start_server llama-server "$llama_server" -m "$model" --host 127.0.0.1 --port PORT -t "$threads" -tb "$threads" \
  -np "$max_c" -c $((ctx * max_c)) --metrics --no-webui
start_server iwb-serve "$iwb" serve -m "$model" --host 127.0.0.1 --port PORT -t "$threads" -np "$max_c" -c "$ctx"
# Each point has prompts of its own (the seed): a prompt seen before would be a prefix-cache hit
# on either server, and its TTFT no measure of prefill.
for ((k = 1; k <= rounds; ++k)); do
  for c in ${sweep//,/ }; do
    for name in llama-server iwb-serve; do
      echo "bench-serve-vs-llama: round $k, concurrency $c, $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
      "$iwb" bench-serve --base-url "http://127.0.0.1:${ports[$name]}" --input-len "$input_len" \
        --output-len "$output_len" --num-prompts "$prompts" --max-concurrency "$c" --seed "$((100 * k + c))" --label "$name" \
        --no-store --json >"$out/$name.c$c.r$k.json" 2>>"$out/bench-serve.log"
    done
  done
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
python3 - "$out" "$(basename "$model")" "$cpu" "$threads" "$sweep" "$rounds" <<'EOF'
import glob, json, os, statistics, sys
out, model, cpu, threads, sweep, rounds = sys.argv[1:]
print(f"model {model}; CPU {cpu}; {threads} threads; {rounds} rounds, the servers taking turns at every point;")
print("per server and concurrency the round with the best output throughput, and the median output tok/s\n")
print("| server | concurrency | completed / failed | output tok/s best (median) | req/s | TTFT p50 / p99 ms | TPOT p50 ms | ITL p99 ms | E2E p50 ms |")
print("|---|---|---|---|---|---|---|---|---|")
for c in sweep.split(","):
    for name in ("llama-server", "iwb-serve"):
        points = []
        for path in sorted(glob.glob(os.path.join(out, f"{name}.c{c}.r*.json"))):
            with open(path) as f:
                points += json.load(f)["points"]
        if not points:
            continue
        p = max(points, key=lambda q: q["output_throughput"])
        median = statistics.median(q["output_throughput"] for q in points)
        print(f"| {name} | {c} | {p['num_completed']} / {p['num_failed']} | {p['output_throughput']:.1f} ({median:.1f}) | "
              f"{p['request_throughput']:.2f} | {p['ttft_ms']['median']:.0f} / {p['ttft_ms']['p99']:.0f} | "
              f"{p['tpot_ms']['median']:.1f} | {p['itl_ms']['p99']:.1f} | {p['e2el_ms']['median']:.0f} |")
EOF
echo "bench-serve-vs-llama: JSON in $out" >&2
