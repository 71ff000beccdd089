#!/usr/bin/env bash
# The quantization table of docs/quantization.md: quantizes BASE.gguf to each type (with and
# without an importance matrix collected on CALIB.txt), evaluates every file against BASE on
# the evaluation text (perplexity, KL divergence, top-1 agreement, speed), records every run
# in the results store, and prints a Markdown table. Files go to OUT_DIR.
#
#   scripts/quant-table.sh [-c CTX] [-k CHUNKS] [-t THREADS] [-f EVAL.txt] [-i CALIB.txt] [-I "T1 T2"]
#       -o OUT_DIR BASE.gguf TYPE...
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
iwb=${IWB:-"${IWB_BUILD_DIR:-$root/build}/app/iwb"}
ctx=512 chunks=0 threads=2 text="" calib="" imatrix_types="" out=""
while getopts "c:k:t:f:i:I:o:" opt; do
  case $opt in
    c) ctx=$OPTARG ;;
    k) chunks=$OPTARG ;;
    t) threads=$OPTARG ;;
    f) text=$OPTARG ;;
    i) calib=$OPTARG ;;
    I) imatrix_types=$OPTARG ;;
    o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -lt 1 || -z $out ]]; then
  echo "usage: $0 [-c CTX] [-k CHUNKS] [-t THREADS] [-f EVAL.txt] [-i CALIB.txt] [-I \"TYPES\"] -o OUT_DIR BASE.gguf TYPE..." >&2
  exit 2
fi
base=$1
shift
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
text_args=()
[[ -n $text ]] && text_args=(-f "$text")
eval_one() {  # eval_one MODEL LABEL
  "$iwb" eval -m "$1" --base "$base" -c "$ctx" --chunks "$chunks" -t "$threads" "${text_args[@]}" --json \
    | jq -c --arg name "$2" '. + {"label": $name}' >> "$out/results.jsonl"
}
: > "$out/results.jsonl"
eval_one "$base" "base (reference)"
for type in "$@"; do
  "$iwb" quantize -m "$base" -o "$out/$type.gguf" --type "$type" -t "$threads" > "$out/$type.quantize.txt" 2>/dev/null
  eval_one "$out/$type.gguf" "$type"
done
if [[ -n $imatrix_types ]]; then
  calib_args=()
  [[ -n $calib ]] && calib_args=(-f "$calib")
  "$iwb" imatrix -m "$base" "${calib_args[@]}" -c "$ctx" -t "$threads" -o "$out/base.imatrix" > "$out/imatrix.txt"
  for type in $imatrix_types; do
    "$iwb" quantize -m "$base" -o "$out/$type-imatrix.gguf" --type "$type" --imatrix "$out/base.imatrix" -t "$threads" \
      > "$out/$type-imatrix.quantize.txt" 2>/dev/null
    eval_one "$out/$type-imatrix.gguf" "$type + imatrix"
  done
fi
echo "| file | size (MiB) | bits/weight | prompt tok/s | gen tok/s | perplexity | KL mean | KL p99 | top-1 agreement |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
jq -r '"| \(.label) | \(.file_bytes / 1048576 | . * 10 | round / 10) | \(.bits_per_weight | . * 100 | round / 100) | \(.prompt_tokens_per_s | . * 10 | round / 10) | \(.gen_tokens_per_s | . * 100 | round / 100) | \(.perplexity | . * 1000 | round / 1000) ± \(.perplexity_error | . * 1000 | round / 1000) | \(.kl_mean | . * 100000 | round / 100000) | \(.kl_p99 | . * 10000 | round / 10000) | \(.top1_agreement * 100 | . * 10 | round / 10)% |"' \
  "$out/results.jsonl"
