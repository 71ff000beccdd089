#!/usr/bin/env bash
# Regenerates docs/images/main-window.png: builds, starts the application under a virtual X
# display (xvfb) with a model open, and captures the window with ImageMagick's `import`.
#   scripts/screenshot.sh [MODEL.gguf] [OUT.png] [-- APP-OPTIONS...]
# APP-OPTIONS go to the application, e.g. `-- --profile --tab roofline --prompt "Hello"` for the
# roofline while the model answers; IWB_SCREENSHOT_DELAY (seconds, default 3) says when to capture.
# Without a model it converts the tiny llama2.c model from ../shared/models to GGUF (so the
# tensor table has rows); without that, it opens a vocabulary-only GGUF.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}
models=${IWB_SHARED_MODELS_DIR:-"$root/../shared/models"}
model=${1:-}
out=${2:-"$root/docs/images/main-window.png"}
[[ $# -gt 2 && $3 == "--" ]] && app_options=("${@:4}") || app_options=()
# IWB_SCREENSHOT_WIDTH / _HEIGHT: the window size (default 1280x800).
width=${IWB_SCREENSHOT_WIDTH:-1280}
height=${IWB_SCREENSHOT_HEIGHT:-800}

IWB_WITH_XVFB=1 "$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

work=$(mktemp -d)
# The model goes to a tidy folder rather than $work: its path is shown in the window header.
model_dir=${TMPDIR:-/tmp}/inference-workbench-screenshot
trap 'rm -rf "$work" "$model_dir"' EXIT

if [[ -z "$model" ]]; then
  mkdir -p "$model_dir"
  if "$build_dir/app/iwb" convert llama2c --checkpoint "$models/llama2c/aidreams260K.bin" \
       --tokenizer "$models/llama2c/aidreams260K-tok512.bin" -o "$model_dir/aidreams260K.gguf" >/dev/null; then
    model="$model_dir/aidreams260K.gguf"
  else
    model="$models/vocab-gguf/ggml-vocab-llama-spm.gguf"
  fi
fi

# A private settings folder: no recent files or window geometry from the user's own runs.
export XDG_CONFIG_HOME="$work/config"
# A private data folder too: the chat restores the last conversation from it, so with --prompt
# each run's prompt would carry the previous runs' turns. The machine's stored probe (the
# roofline's ceilings) stays the user's results store.
export IWB_RESULTS_DB="${IWB_RESULTS_DB:-${XDG_DATA_HOME:-$HOME/.local/share}/inference-workbench/results.sqlite}"
export XDG_DATA_HOME="$work/data"
export XDG_RUNTIME_DIR="$work/runtime"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
mkdir -p "$(dirname "$out")"

# No window manager runs under xvfb, so -qwindowgeometry places the window exactly and the
# capture is a crop of the root window.
xvfb-run -a -s "-screen 0 $((width + 120))x$((height + 100))x24" bash -c '
  "$1" -qwindowgeometry "$3x$4+0+0" "$2" "${@:6}" &
  app=$!
  sleep "${IWB_SCREENSHOT_DELAY:-3}"
  import -window root -crop "$3x$4+0+0" +repage "$5"
  kill "$app"
  wait "$app" 2>/dev/null || true
' screenshot "$build_dir/app/inference-workbench" "$model" "$width" "$height" "$work/shot.png" \
  ${app_options[@]+"${app_options[@]}"}

# Fewer colours keep the PNG small enough to live in the repository.
convert "$work/shot.png" -strip -colors 256 PNG8:"$out"
echo "wrote $out ($(stat -c %s "$out") bytes)"
