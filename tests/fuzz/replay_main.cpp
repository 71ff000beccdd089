// Replays fuzz inputs without libFuzzer: every file named on the command line, or every file
// under a named folder, goes once through the target's LLVMFuzzerTestOneInput. CTest runs this
// over the committed corpus (tests/fuzz/corpus/<target>/) in every build, the sanitizer build
// too, so an input that once crashed stays fixed. scripts/fuzz.sh builds the real fuzzers.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

bool replay_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE|FOLDER...\n", argv[0]);
    return 2;
  }
  size_t num_inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());  // the same order every run
      for (const auto& file : files) num_inputs += replay_file(file) ? 1 : 0;
    } else if (std::filesystem::exists(path, error)) {
      num_inputs += replay_file(path) ? 1 : 0;
    } else {
      std::fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
      return 1;
    }
  }
  std::printf("replayed %zu inputs without a crash\n", num_inputs);
  return num_inputs > 0 ? 0 : 1;  // an empty corpus is a mistake, not a pass
}
