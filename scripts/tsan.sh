#!/usr/bin/env bash
# ThreadSanitizer over the tests of the threaded parts (label "tsan": the thread pool, the
# engine with batching and speculation, the server core and its abuse test, the chat panel
# and KV-batch UI tests with the engine worker thread) in build-tsan/ (issue 20).
#
#   scripts/tsan.sh [ctest arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${IWB_TSAN_BUILD_DIR:-"$root/build-tsan"}
IWB_BUILD_DIR="$build" "$root/scripts/build.sh" -DIWB_TSAN=ON -DIWB_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# second_deadlock_stack: both stacks of a lock-order report; halt_on_error: a race fails the test.
# OMP_NUM_THREADS=1: the few OpenMP loops (load-time quantizing, synth) run on their caller's
# thread; libgomp is not built with TSan, so TSan cannot see its barriers (loops that name their
# thread count are suppressed in tests/tsan.supp). The kernels' own thread pool and every engine,
# server and UI thread stay under TSan.
cd "$build"
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp" \
  ctest --output-on-failure -L tsan "$@"
