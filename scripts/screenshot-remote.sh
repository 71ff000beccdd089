#!/usr/bin/env bash
# Regenerates docs/images/connect-dialog.png and docs/images/chat-remote.png: the Connect dialog
# connected to a real `iwb serve`, and a chat reply streamed from it, captured under a virtual X
# display (xvfb) by build/tests/ui/remote_screenshots.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_BUILD_DIR:-"$root/build"}
IWB_WITH_XVFB=1 "$root/scripts/install-deps.sh"
cmake --build "$build_dir" --target remote_screenshots

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A private settings folder and no session bus: nothing from (or into) the user's own setup.
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_RUNTIME_DIR="$work/runtime"
export DBUS_SESSION_BUS_ADDRESS="unix:path=$work/no-bus"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
xvfb-run -a -s "-screen 0 1400x900x24" "$build_dir/tests/ui/remote_screenshots" "$work"
# Fewer colours keep the PNGs small enough to live in the repository.
for name in connect-dialog chat-remote; do
  convert "$work/$name.png" -strip -colors 256 PNG8:"$root/docs/images/$name.png"
  echo "wrote docs/images/$name.png ($(stat -c %s "$root/docs/images/$name.png") bytes)"
done
