#!/usr/bin/env bash
# Builds here what the lent GPU machine cannot build (it has nvcc, cuBLAS, CMake and g++ but no
# Qt and no -dev packages): a CUDA-enabled, UI-less build of `iwb` and of the CUDA test
# executables, packed stripped with the shared libraries they need into one .tar.xz that
# scripts/gpu-check.sh unpacks there. Usage: scripts/gpu-bundle.sh [--no-build] [-o ARCHIVE] [--ui]
# --ui: also the application (a CUDA build with IWB_UI=ON) in a second archive beside the first,
# iwb-gpu-ui-bundle.tar.xz: inference-workbench, the Qt libraries and plugins the offscreen
# platform needs, and DejaVu fonts with a fontconfig file (the GPU machine may have no fonts).
#
# Carried: every library ldd resolves outside glibc, except the CUDA driver (libcuda, which
# only the machine's driver can provide) and the CUDA toolkit's runtime and cuBLAS: the GPU
# machine has the same CUDA 13 toolkit (nvcc 13.0, driver 580), cuBLAS alone is over 500 MB
# (far over the 64 MiB a `run` carries), and the sonames (libcudart.so.13, libcublas.so.13)
# make a mismatch fail loudly at load time. libstdc++, libgcc_s and libgomp go to lib-compat/,
# used there only when the machine's own are older than the ones this build needs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${IWB_GPU_BUILD_DIR:-"$root/build-gpu"}
archive="$build_dir/iwb-gpu-bundle.tar.xz"
# The project's default build type, as every figure in docs/benchmarks.md: host code -O2 (the
# device code is nvcc's -O3 either way), and ccache objects shared with the other builds here.
build_type=${IWB_BUNDLE_BUILD_TYPE:-RelWithDebInfo}
limit_bytes=$((60 * 1024 * 1024))  # the carry limit is 64 MiB, with the repository beside it
do_build=1
with_ui=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) do_build=0 ;;
    --ui) with_ui=1 ;;
    -o) archive=$(realpath -m "$2"); shift ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null || { echo "gpu-bundle.sh: nvcc not found: a CUDA build needs the CUDA toolkit" >&2; exit 1; }
export CCACHE_DIR=${CCACHE_DIR:-"$HOME/.cache/ccache"} CCACHE_BASEDIR=${CCACHE_BASEDIR:-"$root"}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

if [[ $do_build == 1 ]]; then
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DIWB_UI=OFF -DIWB_CUDA=ON \
      -DIWB_TESTS=ON
  fi
  [[ $with_ui == 1 ]] && cmake -DIWB_UI=ON "$build_dir" >/dev/null
fi
grep -q 'iwb_kernels_cuda' "$build_dir/build.ninja" 2>/dev/null ||
  { echo "gpu-bundle.sh: $build_dir is not a CUDA build (it has no iwb_kernels_cuda target)" >&2; exit 1; }

# The CUDA tests: every CTest test labelled cuda. Test and target share their name
# (iwb_add_test); CTest names the executable only once it exists, so ask again after building.
cuda_tests_json() { (cd "$build_dir" && ctest -N -L cuda --show-only=json-v1); }
mapfile -t cuda_names < <(cuda_tests_json | python3 -c '
import json, sys
for t in json.load(sys.stdin).get("tests", []):
    print(t["name"])')
# The kernel microbenchmarks (bench_cuda_matvec, bench_cuda_attention): gpu-check.sh runs them
# when carried, so a device run also says where the time goes kernel by kernel.
micro_benches=(bench_cuda_matvec bench_cuda_attention)
targets=(iwb "${cuda_names[@]}" "${micro_benches[@]}")
[[ $with_ui == 1 ]] && targets+=(inference-workbench)
if [[ $do_build == 1 ]]; then
  echo "building: ${targets[*]}"
  cmake --build "$build_dir" --target "${targets[@]}" --parallel "$(nproc)"
fi
# IWB_GPU_BUNDLE_TESTS="test_a,test_b": only these tests (a smaller archive, so something else
# fits beside it in one run's carry, such as llama.cpp's llama-bench).
mapfile -t cuda_tests < <(cuda_tests_json | IWB_ONLY="${IWB_GPU_BUNDLE_TESTS:-}" python3 -c '
import json, os, sys
only = set(filter(None, os.environ["IWB_ONLY"].replace(",", " ").split()))
seen = set()
for t in json.load(sys.stdin).get("tests", []):
    exe = (t.get("command") or [""])[0]
    if only and t["name"] not in only:
        continue
    if not exe:
        print("gpu-bundle.sh: %s has no executable (not built?)" % t["name"], file=sys.stderr)
    elif exe not in seen:
        seen.add(exe)
        print(exe)')
[[ ${#cuda_tests[@]} -gt 0 ]] || echo "gpu-bundle.sh: note: no test is labelled cuda in $build_dir" >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/tests" "$stage/lib" "$stage/lib-compat" "$stage/models/llama2c"
cp "$build_dir/app/iwb" "$stage/bin/"
for exe in "${cuda_tests[@]}"; do cp "$exe" "$stage/tests/"; done
for bench in "${micro_benches[@]}"; do
  [[ -x $build_dir/tests/kernels/$bench ]] && cp "$build_dir/tests/kernels/$bench" "$stage/bin/"
done
strip --strip-unneeded "$stage/bin/"* "$stage/tests/"* 2>/dev/null || true

# Libraries: what ldd resolves, minus glibc, the driver and the CUDA toolkit (see the header).
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libcuda\.so|libcudart|libcublas|libcublasLt|libnvidia)'
compat='^(libstdc\+\+|libgcc_s|libgomp)'
for f in "$stage/bin/"* "$stage/tests/"*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  if [[ $name =~ $compat ]]; then cp -L "$path" "$stage/lib-compat/$name"; else cp -L "$path" "$stage/lib/$name"; fi
done

# The tiny real model the end-to-end CUDA tests load (they skip without it); a few hundred KiB.
models=${IWB_SHARED_MODELS_DIR:-"$root/../shared/models"}
for f in aidreams260K.bin aidreams260K-tok512.bin; do
  [[ -f "$models/llama2c/$f" ]] && cp "$models/llama2c/$f" "$stage/models/llama2c/"
done
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "build type $build_type; $(nvcc --version | tail -1)"
} >"$stage/BUNDLE_INFO"

mkdir -p "$(dirname "$archive")"
tar -C "$stage" -cf - . | xz -T0 -9 >"$archive.tmp"
mv "$archive.tmp" "$archive"
size=$(stat -c %s "$archive")
echo "bundle: $archive ($(( size / 1024 / 1024 )) MiB compressed; $(du -sh "$stage" | cut -f1) unpacked)"
echo "  bin: $(ls "$stage/bin" | tr '\n' ' ')"
echo "  tests: $(ls "$stage/tests" | tr '\n' ' ')"
echo "  lib: $(ls "$stage/lib" | wc -l) libraries, lib-compat: $(ls "$stage/lib-compat" | tr '\n' ' ')"
if (( size > limit_bytes )); then
  echo "gpu-bundle.sh: the archive is over 60 MiB: it would not fit the 64 MiB a run carries" >&2
  exit 1
fi
[[ $with_ui == 1 ]] || exit 0

# ---- The application, offscreen: unpacked over the first archive by gpu-check.sh.
ui_archive="$(dirname "$archive")/iwb-gpu-ui-bundle.tar.xz"
ui_stage=$(mktemp -d)
trap 'rm -rf "$stage" "$ui_stage"' EXIT
app="$build_dir/app/inference-workbench"
[[ -x $app ]] || { echo "gpu-bundle.sh: $app was not built" >&2; exit 1; }
qt_plugins=$(qtpaths6 --query QT_INSTALL_PLUGINS 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/qt6/plugins)
mkdir -p "$ui_stage/bin" "$ui_stage/lib" "$ui_stage/lib-compat" "$ui_stage/fonts"
cp "$app" "$ui_stage/bin/"
# offscreen: the platform; sqlite: the conversation and results stores; svg: the icons.
for plugin in platforms/libqoffscreen.so sqldrivers/libqsqlite.so iconengines/libqsvgicon.so imageformats/libqsvg.so; do
  mkdir -p "$ui_stage/plugins/$(dirname "$plugin")"
  cp "$qt_plugins/$plugin" "$ui_stage/plugins/$plugin"
done
strip --strip-unneeded "$ui_stage/bin/"* 2>/dev/null || true
for f in "$ui_stage/bin/"* "$ui_stage"/plugins/*/*.so; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  [[ -e $stage/lib/$name ]] && continue  # already in the first archive
  if [[ $name =~ $compat ]]; then cp -L "$path" "$ui_stage/lib-compat/$name"; else cp -L "$path" "$ui_stage/lib/$name"; fi
done
fonts=/usr/share/fonts/truetype/dejavu
for font in DejaVuSans.ttf DejaVuSans-Bold.ttf DejaVuSansMono.ttf; do
  [[ -f $fonts/$font ]] && cp "$fonts/$font" "$ui_stage/fonts/"
done
# gpu-check.sh writes the folder into this file's <dir> element where it unpacks.
cat >"$ui_stage/fonts/fonts.conf" <<'CONF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>@FONT_DIR@</dir><cachedir>@FONT_DIR@/cache</cachedir></fontconfig>
CONF
tar -C "$ui_stage" -cf - . | xz -T0 -9 >"$ui_archive.tmp"
mv "$ui_archive.tmp" "$ui_archive"
ui_size=$(stat -c %s "$ui_archive")
echo "ui bundle: $ui_archive ($(( ui_size / 1024 / 1024 )) MiB compressed; $(du -sh "$ui_stage" | cut -f1) unpacked)"
echo "  lib: $(ls "$ui_stage/lib" | wc -l) more libraries; plugins: $(cd "$ui_stage/plugins" && ls -d */* | tr '\n' ' ')"
if (( size + ui_size > limit_bytes )); then
  echo "gpu-bundle.sh: the two archives are over 60 MiB together: they would not fit one run's carry" >&2
  exit 1
fi
