#!/usr/bin/env bash
# Configures (once) and builds the project into build/ (or $IWB_BUILD_DIR) with ccache.
# Extra arguments go to the first CMake configure, e.g. -DIWB_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}

"$root/scripts/install-deps.sh"

# nvcc is usually outside PATH on Debian installs of the CUDA toolkit.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CCACHE_DIR=${CCACHE_DIR:-"$HOME/.cache/ccache"}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Relative paths in the cache keys: a fresh clone in another folder reuses the same objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-"$root"}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build_dir" -G Ninja "$@"
fi
cmake --build "$build_dir" --parallel "$(nproc)"

# The serving tests' Python packages (tests/serve): without network this only warns, and
# those tests then fail saying how to make the environment.
"$root/scripts/pyenv.sh" "$build_dir" || echo "build: warning: could not create $build_dir/pyenv (scripts/pyenv.sh)" >&2

# llama.cpp's tokenizer test files (ggml-vocab-*.gguf with .inp/.out) for test_tokenizer_vectors,
# once, into ~/.cache/inference-workbench/llama-vocab; without network the tests skip them.
"$root/scripts/fetch-llama-vocab.sh" || echo "build: warning: could not fetch llama.cpp's vocab test files (scripts/fetch-llama-vocab.sh)" >&2
