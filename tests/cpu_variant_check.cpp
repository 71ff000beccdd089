// Runs a CPU-path variant of a test (iwb_add_test_variant in tests/CMakeLists.txt: the same test
// executable with IWB_CPU_AVX2=1, IWB_CPU_NO_VBMI=1, ...), or skips it (exit 77, CTest's
// SKIP_RETURN_CODE) when those settings leave every kernel choice as it is without them on this
// CPU: IWB_CPU_AVX2=1 on an AVX2-only CPU, IWB_CPU_AVX_VNNI=1 or IWB_CPU_NO_VBMI=1 on one without
// those instructions. The test's own run covers exactly those kernels then; the variant would
// run them again (under ASan a minute or more per variant).
//
//   cpu_variant_check VAR... -- TEST_EXECUTABLE [ARGS...]
//   cpu_variant_check --describe      the kernel choices under this environment, one line
#include "cpu_features.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

const char* path_name(iwb::detail::CpuPath path) {
  switch (path) {
    case iwb::detail::CpuPath::Portable: return "portable";
    case iwb::detail::CpuPath::Avx2: return "avx2";
    case iwb::detail::CpuPath::AvxVnni: return "avx-vnni";
    case iwb::detail::CpuPath::Avx512: return "avx512";
  }
  return "?";
}

// Every choice cpu_features.cpp makes from the CPU and the environment.
std::string describe() {
  using namespace iwb::detail;
  const DecodeStreaming& d = decode_streaming();
  char text[512];
  std::snprintf(text, sizeof text,
                "path %s, avx-vnni %d, vbmi %d, amx int8 %d, amx bf16 %d; decode streams %d, prefetch %d, "
                "segment %d, single stream %d, tiles %d, q4_0 layout %d, k layout %d, k lanes %d, k decode %d",
                path_name(iwb::detail::cpu_path()), has_avx_vnni(), has_avx512_vbmi(), has_amx_int8(), has_amx_bf16(),
                d.streams, d.prefetch_bytes, d.segment_bytes, d.single_stream_row_bytes, d.tile_activation_bytes,
                d.q4_0_layout_max_bytes, d.k_layout_max_bytes, d.k_lanes_min_tokens, d.k_decode_max_tokens);
  return text;
}

// The description a process without `vars` in its environment gives (this program, run again).
std::string describe_without(char** vars, int count) {
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < count; ++i) unsetenv(vars[i]);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl("/proc/self/exe", "cpu_variant_check", "--describe", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--describe") == 0) {
    std::puts(describe().c_str());
    return 0;
  }
  int separator = 1;
  while (separator < argc && std::strcmp(argv[separator], "--") != 0) ++separator;
  if (separator < 2 || separator + 1 >= argc) {
    std::fprintf(stderr, "usage: cpu_variant_check VAR... -- TEST_EXECUTABLE [ARGS...]\n");
    return 2;
  }
  const std::string forced = describe();
  const std::string plain = describe_without(argv + 1, separator - 1);
  if (!plain.empty() && plain == forced) {
    std::string settings;
    for (int i = 1; i < separator; ++i) settings += std::string(i > 1 ? ", " : "") + argv[i];
    std::printf("SKIP: %s changes no kernel choice on this CPU (%s); the test's own run covers these kernels\n",
                settings.c_str(), forced.c_str());
    return 77;
  }
  execv(argv[separator + 1], argv + separator + 1);
  std::perror(argv[separator + 1]);
  return 127;
}
