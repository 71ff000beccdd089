#!/usr/bin/env bash
# Logits agreement with llama.cpp on one GGUF: builds scripts/llama-logits/llama_logits.cpp
# against a llama.cpp build folder (outside this repository's build), runs it and `iwb logits` on
# the same token ids, and prints per position max |diff|, the relative error (max |diff| over
# max |logit|, as tests/engine/test_forward_reference.cpp measures) and top-1 agreement, then
# whether N greedy tokens are equal. Exit 0 when every position is within the tolerance and the
# greedy tokens are equal, or part only at a near-tie (at the step where they part, iwb's logits
# of the two tokens are closer than the largest |diff| between the two programs' logits measured
# on this file: the two are known to round differently by more than that), 1 when not, 2 on a
# usage or setup error. The tolerance is one of the
# forward tests' (tests/engine/test_forward_reference.cpp): 5e-3 for F32 files, the one for
# attention inputs rounded differently (llama.cpp also rounds queries and attention weights to
# f16), and 8e-2 for quantized files, whose activations llama.cpp rounds to 8 bits per block
# (--tol overrides it; docs/llama-agreement.md).
# --mtp compares the multi-token-prediction (next-n) head instead, on a file with an MTP layer:
# row p is the MTP head's logits at position p reading token p and the target's last hidden state
# (after the output norm) at position p-1, zeros for p = 0, as llama.cpp's draft-mtp driver feeds
# it. Both sides run with --greedy 0 and there is no greedy comparison.
#
#   scripts/compare-logits-llama.sh --llama-build /work/llama-build --iwb build/app/iwb -m MODEL.gguf \
#       [--tokens 5,17,...|--num-tokens 16] [--seed 1] [--greedy 32] [-c 512] [--tol auto] [-t 2] [--mtp]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

llama_build=${LLAMA_CPP_BUILD:-}
llama_src=""
iwb="$root/build/app/iwb"
model=""
tokens=""
num_tokens=16
seed=1
greedy=32
ctx=512
iwb_ctx=""
tol=auto
threads=2
flash=off
mtp=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --llama-build) llama_build=$2; shift 2 ;;
    --llama-src) llama_src=$2; shift 2 ;;
    --iwb) iwb=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --num-tokens) num_tokens=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --greedy) greedy=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    --iwb-ctx) iwb_ctx=$2; shift 2 ;;  # iwb's context only: a self-check that a difference shows
    --tol) tol=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --flash-attn) flash=$2; shift 2 ;;
    --mtp) mtp=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-logits-llama: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -n "$model" ]] || { echo "compare-logits-llama: -m MODEL.gguf is required" >&2; exit 2; }
[[ -n "$llama_build" ]] || { echo "compare-logits-llama: give --llama-build DIR or set LLAMA_CPP_BUILD" >&2; exit 2; }
[[ -x "$iwb" ]] || { echo "compare-logits-llama: no iwb at $iwb (build it, or give --iwb)" >&2; exit 2; }
mtp_flag=()
if [[ $mtp == 1 ]]; then
  greedy=0
  mtp_flag=(--mtp)
fi

# llama.cpp's headers: the source tree the build folder was configured from, unless given.
if [[ -z "$llama_src" ]]; then
  llama_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$llama_build/CMakeCache.txt" 2>/dev/null || true)
fi
libdir="$llama_build/bin"
[[ -f "$libdir/libllama.so" ]] || libdir="$llama_build/src"
if [[ ! -f "$llama_src/include/llama.h" || ! -f "$libdir/libllama.so" ]]; then
  echo "compare-logits-llama: need llama.h under $llama_src/include and libllama.so in $llama_build/bin" >&2
  exit 2
fi
ggml_dir="$llama_build/bin"
[[ -f "$ggml_dir/libggml.so" ]] || ggml_dir="$llama_build/ggml/src"

# The program lives beside the build folder's own, in a folder of ours (rebuilt when older).
out_dir=${LLAMA_LOGITS_DIR:-"${TMPDIR:-/tmp}/iwb-llama-logits-$(id -u)"}
mkdir -p "$out_dir"
prog="$out_dir/llama_logits"
src="$root/scripts/llama-logits/llama_logits.cpp"
if [[ ! -x "$prog" || "$src" -nt "$prog" || "$libdir/libllama.so" -nt "$prog" ]]; then
  "${CXX:-c++}" -std=c++17 -O2 -I"$llama_src/include" -I"$llama_src/ggml/include" -I"$llama_src/src" \
    "$src" -o "$prog.tmp" \
    -L"$libdir" -L"$ggml_dir" -lllama -lggml -lggml-base -Wl,-rpath,"$libdir" -Wl,-rpath,"$ggml_dir"
  mv "$prog.tmp" "$prog"
fi

info=$("$iwb" info "$model" --json --no-tensors)
if [[ "$tol" == auto ]]; then
  file_type=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["file_type"])' <<<"$info")
  if [[ "$file_type" == F32 ]]; then tol=5e-3; else tol=8e-2; fi
fi

iwb_ctx=${iwb_ctx:-$ctx}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z "$tokens" ]]; then
  vocab=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["hparams"]["vocab_size"])' <<<"$info")
  # Random ids past the first three (<unk>, <s>, </s> in SentencePiece vocabularies).
  tokens=$(python3 -c "import random; r=random.Random($seed); print(','.join(str(r.randrange(3, $vocab)) for _ in range($num_tokens)))")
fi

"$prog" -m "$model" --tokens "$tokens" -o "$work/llama.bin" --greedy "$greedy" -c "$ctx" -t "$threads" \
  --flash-attn "$flash" ${mtp_flag[@]+"${mtp_flag[@]}"} > "$work/llama.greedy"
"$iwb" logits -m "$model" --tokens "$tokens" -o "$work/iwb.bin" --greedy "$greedy" -c "$iwb_ctx" -t "$threads" \
  --device cpu ${mtp_flag[@]+"${mtp_flag[@]}"} > "$work/iwb.greedy"

# Where the greedy runs part, iwb's logits at that step say how near the tie was (no greedy run with --mtp).
greedy_ref=() greedy_got=()
if [[ $mtp == 0 ]]; then
  # An empty line (--greedy 0) makes read fail: no greedy tokens, not an error.
  read -r -a greedy_ref < "$work/llama.greedy" || true
  read -r -a greedy_got < "$work/iwb.greedy" || true
fi
split=""
for ((i = 0; i < ${#greedy_ref[@]}; ++i)); do
  if [[ "${greedy_ref[i]}" != "${greedy_got[i]:-}" ]]; then split=$i; break; fi
done
if [[ -n "$split" ]]; then
  prefix=$tokens
  for ((i = 0; i < split; ++i)); do prefix+=",${greedy_ref[i]}"; done
  "$iwb" logits -m "$model" --tokens "$prefix" -o "$work/split.bin" -c "$iwb_ctx" -t "$threads" --device cpu
  echo "$split ${greedy_ref[split]} ${greedy_got[split]:-}" > "$work/split.txt"
fi

python3 - "$work" "$tol" "$model" "$mtp" <<'EOF'
import array, os, sys
work, tol, model, mtp = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"

def read(path):
    with open(path, "rb") as f:
        if f.read(4) != b"IWBL":
            sys.exit(f"compare-logits-llama: {path} is not a logits file")
        header = array.array("i"); header.fromfile(f, 2)
        rows = array.array("f"); rows.fromfile(f, header[0] * header[1])
    return header[0], header[1], rows

n, vocab, ref = read(os.path.join(work, "llama.bin"))
n2, vocab2, got = read(os.path.join(work, "iwb.bin"))
if (n, vocab) != (n2, vocab2):
    sys.exit(f"compare-logits-llama: llama.cpp gave {n} x {vocab} logits, iwb {n2} x {vocab2}")
worst, worst_abs, top1 = 0.0, 0.0, 0
print(f"{os.path.basename(model)}: {n} positions, vocabulary {vocab}{', MTP head' if mtp else ''}")
print(f"{'pos':>4} {'max|diff|':>11} {'max|logit|':>11} {'rel.error':>10}  top-1 (llama.cpp / iwb)")
for p in range(n):
    r, g = ref[p * vocab:(p + 1) * vocab], got[p * vocab:(p + 1) * vocab]
    diff = max(abs(a - b) for a, b in zip(r, g))
    scale = max(abs(a) for a in r)
    rel = diff / scale if scale > 0 else diff
    worst = max(worst, rel)
    worst_abs = max(worst_abs, diff)
    ta, tb = max(range(vocab), key=r.__getitem__), max(range(vocab), key=g.__getitem__)
    top1 += ta == tb
    print(f"{p:>4} {diff:>11.3e} {scale:>11.3e} {rel:>10.3e}  {ta} / {tb}{'' if ta == tb else '  DIFFERENT'}")
greedy_ref = open(os.path.join(work, "llama.greedy")).read().split()
greedy_got = open(os.path.join(work, "iwb.greedy")).read().split()
if mtp or not (greedy_ref or greedy_got):  # the logits alone (--mtp, or --greedy 0)
    ok = worst < tol
    print(f"summary: {'MTP head, ' if mtp else ''}max relative error {worst:.3e} (tolerance {tol:g}), "
          f"top-1 {top1}/{n}: {'AGREE' if ok else 'DISAGREE'}")
    sys.exit(0 if ok else 1)
same = sum(a == b for a, b in zip(greedy_ref, greedy_got))
first_diff = next((i for i, (a, b) in enumerate(zip(greedy_ref, greedy_got)) if a != b), None)
is_equal = greedy_ref == greedy_got and len(greedy_ref) > 0
print(f"llama.cpp greedy: {' '.join(greedy_ref)}")
print(f"iwb greedy:       {' '.join(greedy_got)}")
split_path = os.path.join(work, "split.txt")
is_near_tie = False
if os.path.exists(split_path):
    fields = open(split_path).read().split()
    step, want = int(fields[0]), int(fields[1])
    have = int(fields[2]) if len(fields) > 2 else -1  # iwb's run ended before that step
    rows, vocab3, last = read(os.path.join(work, "split.bin"))
    row = last[(rows - 1) * vocab3:rows * vocab3]
    # iwb's token scores at least llama.cpp's there (it is iwb's argmax); a gap under the largest
    # difference the two programs' logits showed on this file is a tie their roundings decide.
    gap = row[have] - row[want] if 0 <= have < vocab3 and 0 <= want < vocab3 else float("inf")
    is_near_tie = gap < worst_abs
    have_logit = row[have] if 0 <= have < vocab3 else float("nan")
    print(f"greedy step {step}: llama.cpp took {want}, iwb {have}; iwb's logits there: {have_logit:.4f} vs "
          f"{row[want]:.4f} (gap {gap:.2e}, max |logit| {max(abs(v) for v in row):.3f}; "
          f"{'a near-tie' if is_near_tie else 'not a near-tie'}: the logits' max |diff| is {worst_abs:.2e})")
ok = worst < tol and (is_equal or is_near_tie)
greedy_text = ("equal" if is_equal else
               f"equal until step {first_diff}, then part at a near-tie" if is_near_tie else
               f"differ from step {first_diff} ({same} equal)")
print(f"summary: max relative error {worst:.3e} (tolerance {tol:g}), top-1 {top1}/{n}, "
      f"greedy {len(greedy_ref)} tokens {greedy_text}: {'AGREE' if ok else 'DISAGREE'}")
sys.exit(0 if ok else 1)
EOF
