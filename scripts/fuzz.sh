#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan, coverage) into build-fuzz/
# and runs them: one target or all, each for SECONDS (default 60).
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]      targets: see tests/fuzz/CMakeLists.txt
#
# Each run starts from the committed seeds (tests/fuzz/corpus/<target>/) plus, for the GGUF
# and tokenizer targets, the shared model files (and llama.cpp's vocab cache), and keeps growing a working corpus in
# build-fuzz/corpus/<target>/ across runs. A crash leaves its input in build-fuzz/crashes/;
# copy it into tests/fuzz/corpus/<target>/ with the fix, and CTest replays it from then on.
# IWB_FUZZ_MERGE=1 merges the inputs that add coverage back into tests/fuzz/corpus/.
# Every run appends its executions, coverage and crashes to build-fuzz/fuzz-runs.tsv.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${IWB_FUZZ_BUILD_DIR:-"$root/build-fuzz"}
which=${1:-all}
seconds=${2:-60}
targets=(gguf tokenizer chat_template llama2c imatrix openai_request prometheus json_schema)
if [[ "$which" != all ]]; then
  [[ " ${targets[*]} " == *" $which "* ]] || { echo "fuzz: unknown target '$which' (${targets[*]})" >&2; exit 2; }
  targets=("$which")
fi

IWB_WITH_FUZZ=1 "$root/scripts/install-deps.sh"
export CCACHE_DIR=${CCACHE_DIR:-"$HOME/.cache/ccache"} CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DIWB_FUZZ=ON -DIWB_UI=OFF -DIWB_TESTS=OFF -DIWB_CUDA=OFF >/dev/null
fi
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"

models=${IWB_SHARED_MODELS_DIR:-"$root/../shared/models"}
llama_vocab=${IWB_LLAMA_VOCAB_DIR:-"$HOME/.cache/inference-workbench/llama-vocab"}
log="$build/fuzz-runs.tsv"
[[ -f "$log" ]] || printf 'date\ttarget\tseconds\texecs\texecs_per_s\tcov\tft\tcorpus\tcrashes\n' >"$log"
for t in "${targets[@]}"; do
  work="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$work" "$crashes"
  seeds=("$root/tests/fuzz/corpus/$t")
  if [[ "$t" == gguf && -d "$models/vocab-gguf" ]]; then seeds+=("$models/vocab-gguf"); fi
  if [[ "$t" == gguf && -d "$llama_vocab" ]]; then seeds+=("$llama_vocab"); fi
  dict=()
  [[ -f "$root/tests/fuzz/dict/$t.dict" ]] && dict=(-dict="$root/tests/fuzz/dict/$t.dict")
  echo "fuzz: $t for ${seconds}s" >&2
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/fuzz/fuzz_$t" "$work" "${seeds[@]}" "${dict[@]}" -max_total_time="$seconds" \
    -max_len=262144 -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$crashes/" 2>"$build/fuzz-$t.log"
  rc=$?
  set -e
  stats=$(grep -E '^#[0-9]+.*(DONE|INITED|pulse|NEW|REDUCE)' "$build/fuzz-$t.log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz-$t.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$build/fuzz-$t.log")
  cov=$(grep -oE 'cov: [0-9]+' <<<"$stats" | grep -oE '[0-9]+' || echo 0)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$stats" | grep -oE '[0-9]+' || echo 0)
  ncrash=$(find "$crashes" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "${execs:-0}" "${rate:-0}" \
    "$cov" "$ft" "$(find "$work" -type f | wc -l)" "$ncrash" >>"$log"
  echo "fuzz: $t: ${execs:-0} executions, cov $cov, ft $ft, crash files $ncrash (exit $rc; log $build/fuzz-$t.log)" >&2
  if [[ "${IWB_FUZZ_MERGE:-0}" == 1 ]]; then
    "$build/tests/fuzz/fuzz_$t" -merge=1 "$root/tests/fuzz/corpus/$t" "$work" -max_len=65536 2>/dev/null || true
  fi
done
column -t "$log" >&2 || cat "$log" >&2
