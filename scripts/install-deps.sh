#!/usr/bin/env bash
# Installs the Debian packages the project builds and runs with. Idempotent: when everything
# is present it only checks (a second or so) and installs nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache mold pkg-config git
  qt6-base-dev qt6-base-dev-tools libqt6svg6 qt6-svg-dev libqt6sql6-sqlite
  libqcustomplot-dev libqcustomplot2.1-qt6
  libpcre2-dev libicu-dev libsqlite3-dev libxxhash-dev
  libcpp-httplib-dev nlohmann-json3-dev
  libcmark-gfm-dev libcmark-gfm-extensions-dev
  qtkeychain-qt6-dev
  python3 python3-pip python3-venv
)
# For the libFuzzer build (scripts/fuzz.sh): clang with its libFuzzer and sanitizer runtimes.
if [[ "${IWB_WITH_FUZZ:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi
# For looking at the application as a person would (screenshots under a virtual display).
if [[ "${IWB_WITH_XVFB:-0}" == 1 ]]; then
  packages+=(xvfb xauth x11-apps imagemagick)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
