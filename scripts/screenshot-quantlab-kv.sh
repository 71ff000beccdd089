#!/usr/bin/env bash
# Regenerates docs/images/quantlab-kv-pareto.png: starts the application under a virtual X
# display with MODEL open, runs the Quantization tab's queue on it (weight types and KV cache
# types, `--lab-run` / `--lab-kv`) into a private results store, waits until every run has
# finished, and captures the window with ImageMagick's `import`.
#   scripts/screenshot-quantlab-kv.sh MODEL.gguf [OUT.png]
# IWB_LAB_TYPES (default Q8_0,Q4_0) and IWB_LAB_KV (default q8_0,q8_0/q4_0,fp8_e4m3,q4_0) say
# what the queue runs, IWB_LAB_KV_EVERY_TYPE=1 the KV types on every weight type too (not only
# the base's weights); IWB_LAB_TIMEOUT (seconds, default 3600) how long to wait for it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}
model=${1:?usage: scripts/screenshot-quantlab-kv.sh MODEL.gguf [OUT.png]}
out=${2:-"$root/docs/images/quantlab-kv-pareto.png"}
types=${IWB_LAB_TYPES:-Q8_0,Q4_0}
kv=${IWB_LAB_KV:-q8_0,q8_0/q4_0,fp8_e4m3,q4_0}
timeout=${IWB_LAB_TIMEOUT:-3600}
width=${IWB_SCREENSHOT_WIDTH:-1600}
height=${IWB_SCREENSHOT_HEIGHT:-1000}
[[ -f "$model" ]] || { echo "no model at $model" >&2; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Private settings, store, lab output and logits cache: nothing from the user's own runs.
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_RUNTIME_DIR="$work/runtime"
export IWB_RESULTS_DB="$work/results.sqlite" IWB_LOGITS_CACHE="$work/logits"
mkdir -p "$XDG_RUNTIME_DIR" "$XDG_CONFIG_HOME/Inference Workbench" && chmod 700 "$XDG_RUNTIME_DIR"
# No first-start machine probe: it would hold the model's load (and the queue) for a minute.
printf '[roofline]\nfirstRunProbeDeclined=true\n' >"$XDG_CONFIG_HOME/Inference Workbench/Inference Workbench.conf"
# The reference, each KV type on the base, each weight type (with each KV type, asked).
num_types=$(tr ',' '\n' <<<"$types" | grep -c .)
num_kv=$(tr ',' '\n' <<<"$kv" | grep -c .)
runs=$((1 + num_types + num_kv))
every=()
if [[ ${IWB_LAB_KV_EVERY_TYPE:-0} == 1 ]]; then
  runs=$((runs + num_types * num_kv))
  every=(--lab-kv-every-type)
fi
mkdir -p "$(dirname "$out")"

xvfb-run -a -s "-screen 0 $((width + 120))x$((height + 100))x24" bash -c '
  "$1" -qwindowgeometry "$3x$4+0+0" --tab quantization --lab-run "$7" --lab-kv "$8" ${10:+"${10}"} "$2" &
  app=$!
  finished() {
    sqlite3 "$IWB_RESULTS_DB" "SELECT COUNT(*) FROM quant_runs WHERE status != '"'"'running'"'"'" 2>/dev/null || echo 0
  }
  waited=0
  until [[ $(finished) -ge $6 ]]; do
    sleep 5
    waited=$((waited + 5))
    if (( waited > $9 )) || ! kill -0 "$app" 2>/dev/null; then
      echo "the queue did not finish ($(finished) of $6 runs)" >&2
      kill "$app" 2>/dev/null || true
      exit 1
    fi
  done
  sleep 3  # the table and charts reload as the last run is recorded
  import -window root -crop "$3x$4+0+0" +repage "$5"
  kill "$app"
  wait "$app" 2>/dev/null || true
' screenshot "$build_dir/app/inference-workbench" "$model" "$width" "$height" "$work/shot.png" "$runs" "$types" "$kv" \
  "$timeout" ${every[@]+"${every[@]}"}

sqlite3 -header -column "$IWB_RESULTS_DB" "SELECT weight_type, kv_cache_type, status, printf('%.5f', kl_mean) AS kl,
  printf('%.3f', perplexity) AS ppl, kv_bytes_per_token, gen_depth, printf('%.2f', depth_gen_tokens_per_s) AS depth_tps,
  fit_sequences, error FROM quant_runs ORDER BY id"
# Fewer colours keep the PNG small enough to live in the repository.
convert "$work/shot.png" -strip -colors 256 PNG8:"$out"
echo "wrote $out ($(stat -c %s "$out") bytes)"
