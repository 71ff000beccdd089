#!/usr/bin/env bash
# The CUDA backend's checks on a machine with an NVIDIA GPU, ending in ONE table: kernel
# correctness (the CUDA tests, per test function), decode tokens/s and MBU at batch 1, prefill
# tokens/s and MFU at 2048 tokens, and throughput over batch sizes 1-64 with the ratio to
# batch 1, for synthetic llama-3.2-1b and llama-3-8b in F16, Q4_0 and Q4_K_M (the default chat
# model's type), and the default chat model's own shape (qwen2.5-1.5b) in Q4_K_M.
#
#   scripts/gpu-check.sh [--bundle ARCHIVE | --build] [--models LIST] [--types LIST]
#                        [--skip-tests] [--skip-bench] [--work DIR] [--dry-run]
#
#   --bundle ARCHIVE  binaries from scripts/gpu-bundle.sh (default build-gpu/iwb-gpu-bundle.tar.xz):
#                     for the lent GPU machine, which has no Qt and no -dev packages
#   --build           build here from source instead (needs everything scripts/build.sh needs;
#                     the CUDA tests are skipped when Qt6 Test is missing)
#   --models LIST     synthetic presets (default llama-3.2-1b,llama-3-8b, and qwen2.5-1.5b in Q4_K_M)
#   --types LIST      weight types (default F16,Q4_0,Q4_K_M)
#   --skip-tests      no CUDA tests; --skip-bench: no probe, models or benchmarks
#   --work DIR        scratch: unpacked bundle, synthetic models, results (default /tmp/iwb-gpu-check)
#   --llama-bench EXE llama.cpp's CUDA llama-bench, run on the same files side by side (default
#                     build-gpu/llama/llama-bench when present: build it here, carry it)
#   --dry-run         walk every step and print its command; run only the local ones (unpack,
#                     devices), so it works on a machine without a GPU
#
# Exit status: 0 all ran and every test passed; 1 a test failed or a step broke; 3 no CUDA device
# (after the devices step; nothing else is run unless --dry-run). With $OUT set (the device
# tool's run), the table, the raw results and the log are written there.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle="$root/build-gpu/iwb-gpu-bundle.tar.xz"
mode=bundle
models=llama-3.2-1b,llama-3-8b
models_given=0
types=F16,Q4_0,Q4_K_M
run_tests=1
run_bench=1
dry_run=0
work=${IWB_GPU_WORK:-/tmp/iwb-gpu-check}
llama_bench="$root/build-gpu/llama/llama-bench"
parallel=1,2,4,8,16,32,64
# Per-command limits (seconds): a hung kernel must not eat the few minutes a lent GPU gives.
test_timeout=${IWB_GPU_TEST_TIMEOUT:-120}
bench_timeout=${IWB_GPU_BENCH_TIMEOUT:-120}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle=$(realpath -m "$2"); mode=bundle; shift ;;
    --build) mode=build ;;
    --models) models=$2; models_given=1; shift ;;
    --types) types=$2; shift ;;
    --skip-tests) run_tests=0 ;;
    --skip-bench) run_bench=0 ;;
    --work) work=$(realpath -m "$2"); shift ;;
    --dry-run) dry_run=1 ;;
    --llama-bench) llama_bench=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

mkdir -p "$work/results" || exit 1
results="$work/results"
rm -rf "${results:?}"/*
log="$results/gpu-check.log"
start_time=$SECONDS
step() { printf '\n== [%4ds] %s\n' $((SECONDS - start_time)) "$*" | tee -a "$log"; }
note() { echo "$*" | tee -a "$log"; }
# Runs a command (or, in a dry run, prints it), its output into the log too.
run() {
  note "\$ $*"
  [[ $dry_run == 1 ]] && return 0
  "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}
# The same with the command's standard output into a file (JSON for the table), errors in the log.
capture() {
  local file=$1
  shift
  note "\$ $* > $(basename "$file")"
  [[ $dry_run == 1 ]] && return 0
  "$@" >"$file" 2>>"$log"
}
finish() {
  local status=$1
  if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    cp "$results"/gpu-check.* "$OUT/" 2>/dev/null
    cp "$results"/results.json "$OUT/gpu-check-results.json" 2>/dev/null
    [[ -d $results/gui ]] && cp -r "$results/gui" "$OUT/gui"
  fi
  note "gpu-check: finished in $((SECONDS - start_time)) s, status $status"
  exit "$status"
}

# ---------------------------------------------------------------- binaries
# The CUDA toolkit's libraries (libcudart.so.13, libcublas*.so.13): the loader cache, the usual
# toolkit folders, or the pip packages PyTorch brings.
cuda_lib_dirs() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
           /usr/lib/x86_64-linux-gnu; do
    [[ -e $d/libcublas.so.13 || -e $d/libcudart.so.13 || -e $d/libnccl.so.2 ]] && dirs+=("$d")
  done
  local py
  py=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || py=""
  for site in $py; do
    # nccl: llama.cpp's CUDA build links it when the toolkit has it (--llama-bench).
    for d in "$site"/nvidia/cu13/lib "$site"/nvidia/cublas/lib "$site"/nvidia/cuda_runtime/lib "$site"/nvidia/nccl/lib; do
      [[ -d $d ]] && dirs+=("$d")
    done
  done
  local IFS=:
  echo "${dirs[*]}"
}

# Libraries a binary still lacks (ldd's "not found" and "version ... not found" lines).
missing_libs() { ldd "$1" 2>&1 | grep -E 'not found' | sed 's/^[[:space:]]*//' | sort -u; }

step "binaries ($mode)"
if [[ $mode == build ]]; then
  build_dir="$root/build-gpu-local"
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    # The tests need Qt6 Test; without it the engine and iwb still build.
    if ! run cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIWB_UI=OFF -DIWB_CUDA=ON; then
      note "configure with tests failed (Qt6 Test missing?): building iwb alone, CUDA tests not run"
      rm -rf "$build_dir"
      run cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIWB_UI=OFF -DIWB_CUDA=ON \
        -DIWB_TESTS=OFF || finish 1
    fi
  fi
  run cmake --build "$build_dir" --target iwb --parallel "$(nproc)" || finish 1
  bin_dir="$build_dir/app"
  test_exes=()
  if [[ $dry_run == 0 && -f $build_dir/CTestTestfile.cmake ]]; then
    mapfile -t test_exes < <(cd "$build_dir" && ctest -N -L cuda --show-only=json-v1 |
      python3 -c 'import json,sys; [print(t["command"][0]) for t in json.load(sys.stdin).get("tests",[]) if t.get("command")]')
    targets=()
    for t in "${test_exes[@]}"; do targets+=("$(basename "$t")"); done
    [[ ${#targets[@]} -gt 0 ]] && { run cmake --build "$build_dir" --target "${targets[@]}" --parallel "$(nproc)" || finish 1; }
  fi
else
  [[ -f $bundle ]] || { note "gpu-check: no bundle at $bundle (make it with scripts/gpu-bundle.sh, or use --build)"; finish 1; }
  unpacked="$work/bundle"
  rm -rf "$unpacked" && mkdir -p "$unpacked"
  note "unpacking $bundle ($(( $(stat -c %s "$bundle") / 1024 / 1024 )) MiB)"
  tar -C "$unpacked" -xJf "$bundle" || { note "gpu-check: cannot unpack $bundle"; finish 1; }
  # The application's archive (gpu-bundle.sh --ui), when it was made: over the same folders.
  ui_bundle="$(dirname "$bundle")/iwb-gpu-ui-bundle.tar.xz"
  if [[ -f $ui_bundle ]]; then
    note "unpacking $ui_bundle ($(( $(stat -c %s "$ui_bundle") / 1024 / 1024 )) MiB)"
    tar -C "$unpacked" -xJf "$ui_bundle" || note "gpu-check: cannot unpack $ui_bundle (the GUI step is skipped)"
  fi
  cat "$unpacked/BUNDLE_INFO" 2>/dev/null | tee -a "$log"
  bin_dir="$unpacked/bin"
  mapfile -t test_exes < <(ls -d "$unpacked"/tests/* 2>/dev/null)
  export LD_LIBRARY_PATH="$unpacked/lib:$(cuda_lib_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Our libstdc++/libgomp only when the machine's own are older than this build needs.
  if missing_libs "$bin_dir/iwb" | grep -q 'version'; then
    note "the machine's C++ runtime is older than the build's: using the bundle's lib-compat/"
    export LD_LIBRARY_PATH="$unpacked/lib-compat:$LD_LIBRARY_PATH"
  fi
  # The tests take the shared models folder from IWB_SHARED_MODELS_DIR when it is set
  # (tests/test_paths.h): the bundle's own copy of the aidreams model.
  if [[ -d $unpacked/models/llama2c ]]; then export IWB_SHARED_MODELS_DIR="$unpacked/models"; fi
fi
iwb="$bin_dir/iwb"
# llama-bench carried xz-compressed (70 MB plain, 41 MB packed): unpacked into the work folder.
if [[ ! -x $llama_bench && -f $llama_bench.xz && $dry_run == 0 ]]; then
  xz -dc "$llama_bench.xz" >"$work/llama-bench" && chmod +x "$work/llama-bench" && llama_bench="$work/llama-bench"
fi
if [[ ! -x $iwb ]]; then
  note "gpu-check: $iwb was not built (dry run of --build: the remaining steps cannot be walked)"
  finish $([[ $dry_run == 1 ]] && echo 0 || echo 1)
fi
note "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
lacking=$( { missing_libs "$iwb"; for t in "${test_exes[@]}"; do missing_libs "$t"; done; } | sort -u)
if [[ -n $lacking ]]; then
  note "gpu-check: libraries not found on this machine:"
  note "$lacking"
  finish 1
fi

# ---------------------------------------------------------------- devices
step "devices"
"$iwb" devices 2>&1 | tee -a "$log"
"$iwb" devices --json >"$results/devices.json" 2>>"$log" || { note "gpu-check: iwb devices failed"; finish 1; }
cuda_error=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
cuda = [x for x in d["devices"] if x.get("kind") == "cuda"]
print("" if cuda else (d.get("cuda", {}).get("error") or "the CUDA runtime lists no device"))' "$results/devices.json")
if [[ -n $cuda_error ]]; then
  note ""
  [[ $cuda_error == "no CUDA device"* ]] || cuda_error="no CUDA device: $cuda_error"
  note "gpu-check: $cuda_error"
  if [[ $dry_run == 0 ]]; then
    note "gpu-check: nothing else can be checked on this machine (--dry-run walks the remaining steps)"
    finish 3
  fi
  note "(dry run: the remaining steps are only printed)"
fi

# ---------------------------------------------------------------- CUDA tests
test_status=0
if [[ $run_tests == 1 ]]; then
  step "CUDA tests (${#test_exes[@]} executables)"
  [[ ${#test_exes[@]} -eq 0 ]] && note "no CUDA test executables (a build without Qt6 Test, or none labelled cuda)"
  for exe in "${test_exes[@]}"; do
    name=$(basename "$exe")
    out="$results/qt-$name.txt"
    if [[ $dry_run == 1 ]]; then note "\$ QT_QPA_PLATFORM=offscreen $exe -o $out,txt"; continue; fi
    # Qt Test writes one PASS / FAIL! / SKIP line per test function (and data row) to the file;
    # gpu_check_table.py reads them, and this exit status tells a crash from a failure.
    QT_QPA_PLATFORM=offscreen timeout "$test_timeout" "$exe" -o "$out,txt" >>"$log" 2>&1
    rc=$?
    printf '%s\t%d\n' "$name" "$rc" >>"$results/test-runs.tsv"
    [[ $rc -ne 0 ]] && test_status=1
    note "$name: exit $rc; $(grep -c '^PASS ' "$out" 2>/dev/null) PASS, $(grep -c '^FAIL! ' "$out" 2>/dev/null) FAIL!, $(grep -c '^SKIP ' "$out" 2>/dev/null) SKIP lines"
  done
fi

# ---------------------------------------------------------------- probe, models, benchmarks
db="$work/results.sqlite"
if [[ $run_bench == 1 ]]; then
  step "probe (GPU copy bandwidth, cuBLAS f16/bf16 GEMM; and the CPU)"
  capture "$results/probe.json" timeout "$bench_timeout" "$iwb" probe --db "$db" --json || { note "gpu-check: iwb probe failed"; test_status=1; }
  [[ $dry_run == 0 ]] && cat "$results/probe.json" >>"$log"

  # Kernel microbenchmarks, when the bundle carries them: the weight products of llama-3-8b's
  # shapes (GB/s against the probed copy rate) and paged attention (decode GB/s, prefill TFLOP/s
  # against the probed GEMM rate), written to micro.txt for the table.
  if [[ -x $bin_dir/bench_cuda_matvec || -x $bin_dir/bench_cuda_attention ]]; then
    step "kernel microbenchmarks"
    peaks=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
g = next((p for p in d.get("devices", []) if p.get("device_id", "").startswith("cuda")), {})
print("%.0f %.0f" % (g.get("copy_bytes_per_s", 3.35e12) / 1e9, g.get("peak_flops", 989e12) / 1e12))' \
      "$results/probe.json" 2>/dev/null || echo "3350 989")
    read -r peak_gbs peak_tflops <<<"$peaks"
    for bench in bench_cuda_matvec bench_cuda_attention; do
      [[ -x $bin_dir/$bench ]] || continue
      args=(--peak-gbs "$peak_gbs")
      [[ $bench == bench_cuda_matvec ]] && args+=(--types "${IWB_GPU_MICRO_TYPES:-Q4_0,Q8_0,Q4_K,Q6_K,F16}")
      [[ $bench == bench_cuda_attention ]] && args+=(--peak-tflops "$peak_tflops")
      { echo "\$ $bench ${args[*]}"; timeout "$bench_timeout" "$bin_dir/$bench" "${args[@]}" 2>&1; echo; } |
        tee -a "$log" >>"$results/micro.txt"
    done
  fi

  # The application on the GPU without a display: a synthetic model loaded on cuda:0 with kernel
  # profiling, one chat reply, then the Chat, Memory and Roofline tabs saved as PNGs (--capture).
  app="$bin_dir/inference-workbench"
  if [[ -x $app ]]; then
    step "GUI offscreen on cuda:0 (Chat, Memory, Roofline captured)"
    gui_model="$work/models/llama-3.2-1b-Q4_0.gguf"  # the benchmark loop below reuses it
    mkdir -p "$work/models" "$work/gui-home"
    [[ -f $gui_model || $dry_run == 1 ]] || run timeout "$bench_timeout" "$iwb" synth --preset llama-3.2-1b --type Q4_0 -o "$gui_model"
    fonts="$unpacked/fonts"
    [[ -f $fonts/fonts.conf ]] && sed -i "s|@FONT_DIR@|$fonts|g" "$fonts/fonts.conf"
    # A fresh settings folder; the results store with this run's probe, so the roofline has
    # the GPU's roofs and no first-run probe of the CPU starts.
    if run env QT_QPA_PLATFORM=offscreen QT_PLUGIN_PATH="$unpacked/plugins" FONTCONFIG_FILE="$fonts/fonts.conf" \
        XDG_CONFIG_HOME="$work/gui-home/config" XDG_DATA_HOME="$work/gui-home/data" IWB_RESULTS_DB="$db" \
        timeout "$bench_timeout" "$app" --device cuda:0 --profile --prompt "Write a haiku about GPUs." \
        --capture "$results/gui" --capture-tabs chat,memory,roofline "$gui_model"; then
      echo ok >"$results/gui-status.txt"
    else
      note "gpu-check: the GUI capture failed"
      echo failed >"$results/gui-status.txt"
      test_status=1
    fi
  fi

  # Synthetic models: bytes per parameter of each type (Q4_0: 18 bytes per 32 weights).
  declare -A params=([llama-3.2-1b]=1240000000 [llama-3-8b]=8030000000 [qwen2.5-1.5b]=1540000000
    [qwen3-30b-a3b]=30530000000)
  declare -A bytes_per_param=([F16]=2 [BF16]=2 [Q8_0]=1.0625 [Q4_0]=0.5625 [Q4_K_M]=0.61 [F32]=4)
  mkdir -p "$work/models"
  IFS=, read -r -a model_list <<<"$models"
  IFS=, read -r -a type_list <<<"$types"
  pairs=()
  for model in "${model_list[@]}"; do
    for type in "${type_list[@]}"; do pairs+=("$model $type"); done
  done
  # The default chat model's shape and type (Qwen2.5 1.5B, Q4_K_M: rows of 1536 and 8960
  # values, q/k/v biases, the output head tied to the token table) synthesized, since the 1 GB
  # file cannot be carried; with the default model list only (IWB_GPU_DEFAULT_SHAPE=0 skips it).
  [[ $models_given == 0 && ${IWB_GPU_DEFAULT_SHAPE:-1} == 1 ]] && pairs+=("qwen2.5-1.5b Q4_K_M")
  # A mixture of experts (Qwen3-30B-A3B, 128 experts of 768, 8 a token; 19 GB in Q4_K_M): its
  # expert products on the device since 2026-12-08, measured when IWB_GPU_MOE=1 (not by default:
  # the file alone takes a minute or more of the few a lent GPU gives).
  [[ ${IWB_GPU_MOE:-0} == 1 ]] && pairs+=("qwen3-30b-a3b Q4_K_M")
  for pair in "${pairs[@]}"; do
      read -r model type <<<"$pair"
      file="$work/models/$model-$type.gguf"
      tag="$model-$type"
      step "$tag: synthesize, bench, batch-bench"
      need=$(python3 -c "print(int(${params[$model]:-8000000000} * ${bytes_per_param[$type]:-2} * 1.05))")
      avail=$(df -B1 --output=avail "$work/models" | tail -1)
      if [[ ! -f $file && $avail -lt $need ]]; then
        note "skipped $tag: needs $((need >> 30)) GiB on disk, $((avail >> 30)) GiB free in $work/models"
        printf '%s\tskipped: %d GiB needed, %d GiB free\n' "$tag" $((need >> 30)) $((avail >> 30)) >>"$results/skipped.tsv"
        continue
      fi
      # 256 random rows a tensor, repeated by a hash (iwb synth --distinct-rows): the same shapes,
      # types and bytes to read, so the same speed; llama-3-8b Q4_K_M with every row random took
      # 75 of run 1's 355 s on the H200 (2026-12-04), its K-quant rounding search being slow.
      # IWB_GPU_DISTINCT_ROWS=0 draws every row.
      [[ -f $file ]] || run timeout "$bench_timeout" "$iwb" synth --preset "$model" --type "$type" \
        --distinct-rows "${IWB_GPU_DISTINCT_ROWS:-256}" -o "$file" ||
        { note "gpu-check: synth $tag failed"; test_status=1; continue; }
      capture "$results/bench-$tag.json" timeout "$bench_timeout" "$iwb" bench -m "$file" --device cuda:0 -p 2048 -n 128 -b 2048 -r 3 \
        --json --db "$db" || { note "gpu-check: bench $tag failed"; test_status=1; }
      # llama.cpp's CUDA build on the same file: its pp2048 and tg128 (all layers on the GPU).
      if [[ -x $llama_bench ]]; then
        capture "$results/llama-$tag.json" timeout "$bench_timeout" "$llama_bench" -m "$file" -ngl 99 -p 2048 \
          -n 128 -b 2048 -r 3 -o json || note "gpu-check: llama-bench $tag failed (see the log)"
      fi
      # Q4_0's decode on the GGUF layout too (IWB_CUDA_SPLIT=0), to show what the split
      # layout changes on this device, and Q4_K_M's (its Q6_K matrices split since 2026-12-07)
      # (IWB_GPU_AB=0 skips it).
      if [[ $type =~ ^(Q4_0|Q4_K_M)$ && ${IWB_GPU_AB:-1} == 1 ]]; then
        capture "$results/ab-gguf-$tag.json" env IWB_CUDA_SPLIT=0 timeout "$bench_timeout" "$iwb" bench -m "$file" \
          --device cuda:0 -p 512 -n 128 -r 2 --json --db "$db" || note "gpu-check: bench (GGUF layout) $tag failed"
      fi
      # Decode with each op's products launched one by one (IWB_CUDA_GROUP=0) beside the default
      # one launch for q, k and v and one for gate and up (IWB_GPU_AB=0 skips it).
      if [[ ${IWB_GPU_AB:-1} == 1 && $type =~ ^(F16|BF16|F32|Q4_0|Q8_0|Q4_K_M)$ ]]; then  # the types it groups
        capture "$results/ab-nogroup-$tag.json" env IWB_CUDA_GROUP=0 timeout "$bench_timeout" "$iwb" bench -m "$file" \
          --device cuda:0 -p 0 -n 128 -r 3 --json --no-store || note "gpu-check: bench (products one by one) $tag failed"
      fi
      # Decode with each kernel launched after the one before has finished (IWB_CUDA_PDL=0) beside
      # the default programmatic launch, where the next kernel starts and prefetches its weights
      # during the last one's tail (compute capability 9.0 and up; every type).
      if [[ ${IWB_GPU_AB:-1} == 1 ]]; then
        capture "$results/ab-nopdl-$tag.json" env IWB_CUDA_PDL=0 timeout "$bench_timeout" "$iwb" bench -m "$file" \
          --device cuda:0 -p 0 -n 128 -r 3 --json --no-store || note "gpu-check: bench (no programmatic launch) $tag failed"
      fi
      # Decode with every product quantizing its own int8 input (IWB_CUDA_FUSED_Q8=0) beside the
      # default, where the norm and the activation write it (the types on int8 activations).
      if [[ ${IWB_GPU_AB:-1} == 1 && $type =~ ^(Q4_0|Q8_0|Q4_K_M)$ ]]; then
        capture "$results/ab-nofuse-$tag.json" env IWB_CUDA_FUSED_Q8=0 timeout "$bench_timeout" "$iwb" bench -m "$file" \
          --device cuda:0 -p 0 -n 128 -r 3 --json --no-store || note "gpu-check: bench (separate quantize) $tag failed"
      fi
      # Where the time goes: one ~1,800-token prefill and 64 decode steps with every kernel timed
      # (iwb run --profile), llama-3-8b only (IWB_GPU_PROFILE=0 skips it).
      if [[ $model == llama-3-8b && ${IWB_GPU_PROFILE:-1} == 1 ]]; then
        [[ -f $work/prompt.txt ]] || python3 -c 'print(" ".join(["the quick brown fox jumps over the lazy dog"] * 40))' >"$work/prompt.txt"
        # The timings and the kernel table are on standard error; the generated text is dropped.
        note "\$ $iwb run -m $file --device cuda:0 --profile -b 2048 -c 4096 -n 64 --temp 0 -f $work/prompt.txt"
        if [[ $dry_run == 0 ]]; then
          timeout "$bench_timeout" "$iwb" run -m "$file" --device cuda:0 --profile -b 2048 -c 4096 -n 64 --temp 0 \
            -f "$work/prompt.txt" 2>"$results/profile-$tag.txt" >/dev/null || note "gpu-check: profile $tag failed"
          # The first prefill's attn_q GEMMs were 15x their warm time on the H200 (session 30):
          # the same profile with CUDA's lazy module loading off tells whether that is the cause.
          if [[ $type == F16 ]]; then
            CUDA_MODULE_LOADING=EAGER timeout "$bench_timeout" "$iwb" run -m "$file" --device cuda:0 --profile -b 2048 \
              -c 4096 -n 64 --temp 0 -f "$work/prompt.txt" 2>"$results/profile-eager-$tag.txt" >/dev/null \
              || note "gpu-check: profile (eager module loading) $tag failed"
          fi
        fi
      fi
      # Decode 4,096 tokens deep with an f16 and a q8_0 KV cache (llama-3-8b only;
      # IWB_GPU_KV=0 skips it): the decode attention's key splits and their merge at a real
      # depth, and a quantized cache through the whole engine at a real shape.
      if [[ $model == llama-3-8b && $type =~ ^(F16|Q4_0)$ && ${IWB_GPU_KV:-1} == 1 ]]; then
        for kv in f16 q8_0; do
          capture "$results/kv-$kv-$tag.json" timeout "$bench_timeout" "$iwb" bench -m "$file" --device cuda:0 -p 0 -n 64 \
            -d 0,4096 -r 2 --kv-type "$kv" --json --no-store || note "gpu-check: bench with a $kv cache, $tag failed"
        done
      fi
      capture "$results/batch-$tag.json" timeout "$bench_timeout" "$iwb" batch-bench -m "$file" --device cuda:0 --parallel "$parallel" \
        -p 128 -n 128 --batch-tokens 2048 --json || { note "gpu-check: batch-bench $tag failed"; test_status=1; }
      # 8B F16 is 16 GB: one model on disk at a time (IWB_GPU_KEEP_MODELS=1 keeps them for a
      # later command on the same machine, e.g. llama-bench carried separately).
      [[ $dry_run == 0 && ${IWB_GPU_KEEP_MODELS:-0} != 1 ]] && rm -f "$file"
  done
fi

# ---------------------------------------------------------------- the table
step "table"
if [[ $dry_run == 1 ]]; then
  note "(dry run: no results to tabulate)"
  finish 0
fi
python3 "$root/scripts/gpu_check_table.py" "$results" | tee "$results/gpu-check.txt"
[[ ${PIPESTATUS[0]} -eq 0 ]] || test_status=1
finish "$test_status"
