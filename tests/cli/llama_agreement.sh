#!/usr/bin/env bash
# CTest: logits and 32 greedy tokens agree with llama.cpp's (scripts/compare-logits-llama.sh) on
# synthetic files of every dense architecture, F32 and Q8_0. Needs a llama.cpp build folder in
# LLAMA_CPP_BUILD; without one it skips (exit 77) saying so. Arguments: IWB_BINARY SOURCE_DIR.
set -euo pipefail
iwb=$1
src=$2
if [[ -z "${LLAMA_CPP_BUILD:-}" ]]; then
  echo "skipped: set LLAMA_CPP_BUILD to a llama.cpp build folder (with bin/libllama.so) to compare with llama.cpp"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for preset in test-llama test-qwen2 test-qwen3; do
  for type in F32 Q8_0; do
    file="$work/$preset-$type.gguf"
    "$iwb" synth --preset "$preset" --type "$type" --seed 3 -o "$file" >/dev/null 2>&1
    if out=$("$src/scripts/compare-logits-llama.sh" --llama-build "$LLAMA_CPP_BUILD" --iwb "$iwb" -m "$file" \
        --num-tokens 16 --greedy 32); then
      echo "$preset $type: $(tail -1 <<<"$out")"
    else
      echo "$preset $type: FAILED"
      echo "$out"
      status=1
    fi
  done
done
exit $status
