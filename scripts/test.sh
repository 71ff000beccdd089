#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole CTest suite; then rebuilds the file-parsing
# tests under AddressSanitizer and runs them too. Exit status 0 only when everything passed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}

# A cold run writes about 12 GiB (the build with its Python environment, then the ASan build);
# on a fuller disk it fails at a link with "No space left on device", so say so first.
free_kib=$(df -Pk "$root" | awk 'NR == 2 {print $4}')
if [[ "$free_kib" =~ ^[0-9]+$ ]] && (( free_kib < 12 * 1024 * 1024 )); then
  echo "test.sh: warning: $(( free_kib / 1024 / 1024 )) GiB free on the disk of $root; a cold run needs about 12 GiB" >&2
fi

"$root/scripts/build.sh" "$@"
(cd "$build_dir" && ctest --output-on-failure --parallel "$(nproc)" --timeout 600)

# Hostile-input tests again under ASan/UBSan (engine only: no Qt Widgets, no CUDA).
if [[ "${IWB_SKIP_ASAN:-0}" != 1 ]]; then
  asan_dir="$root/build-asan"
  IWB_BUILD_DIR="$asan_dir" "$root/scripts/build.sh" -DIWB_SANITIZE=ON -DIWB_UI=OFF -DIWB_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=Debug
  (cd "$asan_dir" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure --parallel "$(nproc)" -L asan)
fi
