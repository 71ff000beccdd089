#!/usr/bin/env bash
# Creates (once, and again when tests/serve/requirements.txt changes) the Python virtual
# environment the serving tests use: $build_dir/pyenv with the openai client and
# prometheus_client (and jinja2) from PyPI. Never touches the system Python. Usage: pyenv.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-${IWB_BUILD_DIR:-"$root/build"}}
env_dir="$build_dir/pyenv"
requirements="$root/tests/serve/requirements.txt"
stamp="$env_dir/requirements.installed"

if [[ -x "$env_dir/bin/python" ]] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi
echo "pyenv: creating $env_dir (openai, prometheus_client, jinja2)"
mkdir -p "$build_dir"
python3 -m venv "$env_dir"
"$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
