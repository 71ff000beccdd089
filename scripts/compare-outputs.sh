#!/usr/bin/env bash
# Checks that two `iwb` builds compute the same thing: greedy token ids (plain and with the
# profiler recording), and perplexity to nine digits, on aidreams and on synthetic llama, gemma3
# and qwen2 models. For refactors that must not change the numbers (build the old commit in a
# git worktree, then: scripts/compare-outputs.sh OLD/app/iwb NEW/app/iwb). Exit 1 on a difference.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=$1
new=$2
work=${3:-$(mktemp -d)}
models="$root/../shared/models"
mkdir -p "$work"
cd "$work"

# Test files, written once by the new build (both read the same bytes).
[[ -f aidreams.gguf ]] || "$new" convert llama2c --checkpoint "$models/llama2c/aidreams260K.bin" \
  --tokenizer "$models/llama2c/aidreams260K-tok512.bin" -o aidreams.gguf >/dev/null
[[ -f tllama.gguf ]] || "$new" synth --preset test-llama --type Q4_0 -o tllama.gguf >/dev/null
[[ -f gemma.gguf ]] || "$new" synth --preset gemma-3-270m --type Q8_0 -o gemma.gguf >/dev/null
[[ -f qwen.gguf ]] || "$new" synth --preset qwen2.5-0.5b --type Q4_K_M \
  --vocab "$models/vocab-gguf/ggml-vocab-qwen2.gguf" -o qwen.gguf >/dev/null

status=0
for m in aidreams.gguf tllama.gguf gemma.gguf qwen.gguf; do
  for side in old new; do
    bin=${!side}
    "$bin" run -m "$m" -p "Once upon a time" -n 24 --temp 0 --repeat-penalty 1.0 --ids -t 2 2>/dev/null | tail -1 \
      > "out.$side.run"
    "$bin" run -m "$m" -p "Once upon a time" -n 24 --temp 0 --repeat-penalty 1.0 --ids -t 2 --profile 2>/dev/null |
      grep -v '^ ' | tail -1 > "out.$side.profiled"
    "$bin" eval -m "$m" -c 128 --chunks 2 -n 0 --json --no-store -t 2 2>/dev/null |
      grep -oE '"perplexity[a-z_]*": *[0-9.e+-]+' | tr '\n' ' ' > "out.$side.eval"
  done
  for kind in run profiled eval; do
    if cmp -s "out.old.$kind" "out.new.$kind"; then
      echo "$m $kind: identical ($(head -c 60 "out.new.$kind"))"
    else
      echo "$m $kind: DIFFERENT"
      diff "out.old.$kind" "out.new.$kind" | head -4
      status=1
    fi
  done
done
exit $status
