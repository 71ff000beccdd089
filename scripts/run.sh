#!/usr/bin/env bash
# Installs dependencies, builds, fetches the default model if it is absent, and starts the
# desktop application. Arguments go to the application (e.g. a model file to open); without
# a model argument the default model is opened. Without network the application still starts
# and says what is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}

"$root/scripts/build.sh"

has_model_arg=0
for arg in "$@"; do
  [[ "$arg" == *.gguf ]] && has_model_arg=1
done
if [[ $has_model_arg == 0 ]]; then
  if model=$("$root/scripts/fetch-model.sh"); then
    set -- "$model" "$@"
  else
    echo "run.sh: the default model could not be fetched (see above); starting without it." >&2
  fi
fi
# The engine's kernels run on its own thread pool (spin briefly, then sleep: no OMP_WAIT_POLICY
# needed). OpenMP still runs the quantizer's and the probe's loops, where sleeping idle threads
# cost nothing noticeable and keep the GUI thread responsive.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec "$build_dir/app/inference-workbench" "$@"
