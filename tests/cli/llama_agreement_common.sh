# Sourced by llama_agreement.sh and llama_agreement_moe.sh after they set iwb and src: skips (exit
# 77) without LLAMA_CPP_BUILD, makes the scratch folder $work, and gives `agree LABEL ARGS...`,
# which runs scripts/compare-logits-llama.sh with ARGS and prints LABEL with its summary line, or
# LABEL: FAILED with the whole table (and then sets status=1, the scripts' exit status).
if [[ -z "${LLAMA_CPP_BUILD:-}" ]]; then
  echo "skipped: set LLAMA_CPP_BUILD to a llama.cpp build folder (with bin/libllama.so) to compare with llama.cpp"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

agree() {
  local label=$1 out
  shift
  if out=$("$src/scripts/compare-logits-llama.sh" --llama-build "$LLAMA_CPP_BUILD" --iwb "$iwb" "$@"); then
    echo "$label: $(tail -1 <<<"$out")"
  else
    echo "$label: FAILED"
    echo "$out"
    status=1
  fi
}
