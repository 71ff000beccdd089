#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test files (models/ggml-vocab-*.gguf with their .inp/.out
# vectors) from the llama-cpp-python sdist on PyPI into ~/.cache/inference-workbench/llama-vocab
# (or $IWB_LLAMA_VOCAB_DIR), for tests/engine/test_tokenizer_vectors. Nothing to do when the
# folder is complete; without network it warns and exits 0, and the tests skip saying so.
# IWB_LLAMA_SDIST=/path/to/llama_cpp_python-0.3.36.tar.gz uses a local copy instead of pip.
set -euo pipefail

version=0.3.36
# sha256 of llama_cpp_python-0.3.36.tar.gz as PyPI serves it.
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
dest=${IWB_LLAMA_VOCAB_DIR:-"$HOME/.cache/inference-workbench/llama-vocab"}
stamp="$dest/.llama-cpp-python-$version"

if [[ -f "$stamp" ]]; then
  exit 0
fi

warn() { echo "fetch-llama-vocab: warning: $*; the llama.cpp vocab tests will be skipped" >&2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sdist="$tmp/llama_cpp_python-$version.tar.gz"
if [[ -n "${IWB_LLAMA_SDIST:-}" ]]; then
  cp "$IWB_LLAMA_SDIST" "$sdist"
else
  echo "fetch-llama-vocab: downloading llama-cpp-python==$version (sdist, ~77 MB) for its vocab test files"
  # Short timeouts: an offline machine should not hold up every build.
  if ! python3 -m pip download --quiet --disable-pip-version-check --timeout 20 --retries 1 --no-deps \
      --no-binary :all: -d "$tmp" "llama-cpp-python==$version" >"$tmp/pip.log" 2>&1; then
    tail -n 3 "$tmp/pip.log" >&2 || true
    warn "could not download llama-cpp-python==$version from PyPI (no network?)"
    exit 0
  fi
fi
if [[ ! -f "$sdist" ]]; then
  warn "pip did not leave $(basename "$sdist")"
  exit 0
fi
actual=$(sha256sum "$sdist" | cut -d' ' -f1)
if [[ "$actual" != "$sha256" ]]; then
  warn "$(basename "$sdist") has sha256 $actual, expected $sha256; not extracting it"
  exit 0
fi

# Extract into a staging folder first, so an interrupted run never leaves a half-filled cache.
prefix="llama_cpp_python-$version/vendor/llama.cpp/models"
mkdir -p "$tmp/extract"
tar -xzf "$sdist" -C "$tmp/extract" --wildcards "$prefix/ggml-vocab-*"
mkdir -p "$dest"
cp "$tmp/extract/$prefix"/ggml-vocab-* "$dest/"
touch "$stamp"
echo "fetch-llama-vocab: $(find "$tmp/extract/$prefix" -type f | wc -l) files in $dest"
