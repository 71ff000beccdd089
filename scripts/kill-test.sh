#!/usr/bin/env bash
# Kill test (issue 20): builds what it needs, then SIGKILLs chat replies, GGUF writes,
# quantizations, evals and bench runs at random moments (50 kills per scenario by default) and
# checks after each that nothing finished was lost (tests/robustness/kill_test.py).
#
#   scripts/kill-test.sh [KILLS] [SCENARIOS]      e.g. scripts/kill-test.sh 50 chat,gguf
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${IWB_BUILD_DIR:-"$root/build"}
kills=${1:-50}
scenarios=${2:-chat,gguf,quantize,eval,bench}
"$root/scripts/build.sh" >/dev/null
driver=()
[[ -x "$build/tests/robustness/kill_chat_driver" ]] && driver=(--driver "$build/tests/robustness/kill_chat_driver")
work=${IWB_KILL_WORK:-"$build/kill-test.work"}
CUDA_VISIBLE_DEVICES= python3 "$root/tests/robustness/kill_test.py" --iwb "$build/app/iwb" "${driver[@]}" \
  --models "${IWB_SHARED_MODELS_DIR:-$root/../shared/models}" --work "$work" --kills "$kills" --scenarios "$scenarios"
