#!/usr/bin/env bash
# Installs dependencies, builds, and starts the desktop application. Arguments go to the
# application (e.g. a model file to open).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}

"$root/scripts/build.sh"
exec "$build_dir/app/inference-workbench" "$@"
