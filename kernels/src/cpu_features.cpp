// Run-time CPU feature detection for the AVX2 and AVX-512 kernel paths.
#include "cpu_features.h"

#include "iwb/kernels/dequantize_fast.h"

#include "iwb/kernels/cpu_amx.h"
#include "iwb/kernels/cpu_features.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace iwb::detail {
namespace {

bool env_is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] == '1';
}

// CPUID leaf 7 sub-leaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports("avxvnni") reads false
// on a Zen 5 that has it). The AVX2 check before it covers the OS saving the YMM state.
bool cpu_reports_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 4)) != 0;
#else
  return false;
#endif
}

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_reports_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
#else
  return false;
#endif
}

CpuPath detect_path() {
#if defined(__x86_64__) || defined(__i386__)
  // The overrides let the tests cover the narrower paths on a machine that has them all.
  if (env_is_set("IWB_CPU_PORTABLE")) return CpuPath::Portable;
  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_reports_f16c();
  if (!has_avx2) return CpuPath::Portable;
  if (env_is_set("IWB_CPU_AVX2")) return CpuPath::Avx2;
  const bool has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  const bool has_vnni = cpu_reports_avx_vnni();
  if (has_vnni && env_is_set("IWB_CPU_AVX_VNNI")) return CpuPath::AvxVnni;
  if (has_avx512) return CpuPath::Avx512;
  return has_vnni ? CpuPath::AvxVnni : CpuPath::Avx2;
#else
  return CpuPath::Portable;
#endif
}

// AMX: what the CPU reports, whether the OS lets this process use the tiles, and why not.
struct AmxState {
  bool has_int8 = false;
  bool has_bf16 = false;
  std::string reason;  // "" when used
};

AmxState detect_amx() {
  AmxState s;
#if defined(__linux__) && defined(__x86_64__)
  if (cpu_path() != CpuPath::Avx512) {
    s.reason = env_is_set("IWB_CPU_PORTABLE") || env_is_set("IWB_CPU_AVX2") || env_is_set("IWB_CPU_AVX_VNNI")
                   ? "the AVX-512 path is switched off by the environment"
                   : "the CPU has no AMX (no AVX-512 path)";
    return s;
  }
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) {
    s.reason = "the CPU has no AMX (no CPUID leaf 7)";
    return s;
  }
  const bool has_tile = (edx & (1u << 24)) != 0, has_int8 = (edx & (1u << 25)) != 0, has_bf16 = (edx & (1u << 22)) != 0;
  if (!has_tile || (!has_int8 && !has_bf16)) {
    s.reason = "the CPU has no AMX";
    return s;
  }
  if (env_is_set("IWB_CPU_NO_AMX")) {
    s.reason = "disabled by IWB_CPU_NO_AMX=1";
    return s;
  }
  // Linux keeps the 8 KiB tile data state off until a process asks for it (5.16 and later).
  constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    s.reason = std::string("the kernel refused the AMX tile data state: ") + std::strerror(errno);
    return s;
  }
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0 || (bitmask & (1ul << kXfeatureXtiledata)) == 0) {
    s.reason = "the kernel did not grant the AMX tile data state";
    return s;
  }
  s.has_int8 = has_int8;
  s.has_bf16 = has_bf16;
#else
  s.reason = "AMX needs Linux on x86-64";
#endif
  return s;
}

const AmxState& amx_state() {
  static const AmxState kState = detect_amx();
  return kState;
}

}  // namespace

CpuPath cpu_path() {
  static const CpuPath kPath = detect_path();
  return kPath;
}

bool has_avx_vnni() {
  static const bool kHas = cpu_path() != CpuPath::Portable && cpu_reports_avx_vnni();
  return kHas;
}

bool has_avx512_vbmi() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool kHas =
      cpu_path() == CpuPath::Avx512 && __builtin_cpu_supports("avx512vbmi") && !env_is_set("IWB_CPU_NO_VBMI");
  return kHas;
#else
  return false;
#endif
}

bool has_amx_int8() { return amx_state().has_int8; }
bool has_amx_bf16() { return amx_state().has_bf16; }
const char* amx_unused_reason() { return amx_state().reason.c_str(); }

bool has_avx2_fma_f16c() { return cpu_path() != CpuPath::Portable; }

bool is_matmul_exact_forced() {
  static const bool kForced = env_is_set("IWB_MATMUL_EXACT");
  return kForced;
}

#if defined(__x86_64__) || defined(__i386__)
// CPUID's family (base plus extended), as AMD numbers its generations: 19h Zen 3/4, 1Ah Zen 5.
static unsigned amd_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}

// Family 19h holds two cores: Zen 4 is models 10h-1Fh (Genoa), 60h-7Fh (Raphael, Phoenix) and
// A0h-AFh (Bergamo, Siena); the rest are Zen 3 (00h-0Fh Milan, 20h-5Fh client parts).
static bool is_amd_zen3() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (amd_family() != 0x19 || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned model = ((eax >> 12) & 0xF0) | ((eax >> 4) & 0xF);
  const bool is_zen4 =
      (model >= 0x10 && model <= 0x1F) || (model >= 0x60 && model <= 0x7F) || (model >= 0xA0 && model <= 0xAF);
  return !is_zen4;
}
#endif

const DecodeStreaming& decode_streaming() {
  static const DecodeStreaming kStreaming = [] {
    DecodeStreaming d;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // Intel Xeon (Sapphire Rapids class, 2 vCPU): one core keeps too few misses in flight for
    // the hardware prefetchers alone; four streams with each row fetched 2 KiB ahead doubled
    // a thread's read rate (bench_matmul_tokens, 1 thread, 1536 x 151936: Q4_K 15.3 -> 7.8 ms,
    // Q6_K 19.7 -> 13.5, Q4_0 17.3 -> 9.5, Q8_0 26.5 -> 18.0; default model tg64 with 2 threads
    // 17.0 -> 23.2 tokens/s). AMD Zen 5 measured best with two streams and no software
    // prefetch (three no better, four worse), so other CPUs keep that.
    // Rows over 768 bytes go in segments, so a row's prefetches never leave the core waiting
    // on its line fill buffers (default model tg64 with 2 threads, read-only probe 32.4 GB/s:
    // Q4_K_M 23.6 -> 27.3-28.0 tokens/s, Q4_0 21.4 -> 25.3-26.2, Q8_0 13.3 -> 16.1-16.5;
    // segments of 512 and 1024 bytes within 2% of 768, 2048 5% slower).
    if (__builtin_cpu_is("intel")) d = {4, 2048, 768, 0};
    // Intel Xeon (model 207, 2 threads): three and four tokens of K-quants through the token
    // lanes rather than the 4 x 4 tiles, from memory (default model Q4_K_M, `iwb bench -p N -n
    // 0`: pp3 44.6 -> 57.2 tokens/s, pp4 55.9 -> 56.7; two tokens take the decode steps,
    // 39.8, against 38.7 in lanes). Zen 5 measured the lanes slower at two tokens on rows in L3
    // (0.49 against 0.33 ms), so other CPUs keep the tiles below five until measured.
    if (__builtin_cpu_is("intel")) d.k_lanes_min_tokens = 3;
    // Q4_K and Q5_K then took three tokens through their decode layout's several-token kernel,
    // which unpacks each row once for all three (decode steps go before the lanes; the other
    // K-quants keep the lanes from three). Ice Lake, model 106, bench_matmul_tokens --threads 2
    // --copies 20 with the weights in 2 MiB pages, ms at 1536x8960 / 8960x1536, alternated
    // twice: 0.544-0.627 / 0.536-0.544 against the lanes' 0.662-0.683 / 0.620-0.629; rows in L2,
    // one thread, 1536x768: 0.075 against 0.080. From four tokens the lanes win there
    // (0.642-0.670 / 0.505-0.636 against 0.790-0.879 / 0.618-0.777): that kernel's work grows
    // with every token.
    if (__builtin_cpu_is("intel")) d.k_decode_max_tokens = 3;
    // AMD Zen 4 (family 19h; a 2 vCPU EPYC guest): rows of 1.5 KiB and more stream best one
    // at a time, shorter ones in two streams. Default model tg32 with 2 threads, five
    // alternations each, medians: every row in one stream against two gave F16 (rows of 3 KiB)
    // +16%, Q8_0 (1.6 KiB) +10%, Q4_0 (864 bytes) -7%; this rule against two streams for all,
    // F16 +17%, Q4_0 +5%, Q8_0 and Q4_K_M +2%. Zen 5 (1Ah) keeps two for all.
    // And F16/BF16/F32 rows whose f32 activations take 16 KiB or more (8,960 inputs: 35 KiB,
    // past half the 32 KiB L1d) go four at a time through the tile kernel, so the activations
    // are read once per four rows: F16 8960x1536 from memory (bench_matmul_tokens --copies 12,
    // 2 threads) 16.5-17.8 -> 24.6-28.3 GB/s; rows of 1536 inputs (6 KiB of activations) stay
    // faster one at a time (26-28 against 18-19 GB/s in tiles).
    // Zen 3 (a 2 vCPU EPYC Milan guest) differs for rows between 1.5 and 2 KiB: Q8_0's rows of
    // 1,536 inputs (1,632 bytes) read faster in two streams (default model Q8_0 tg32, 2 threads,
    // eight alternations: 1.00-1.18, median 1.12x; llama.cpp beside it 11.1-12.5 tokens/s; the
    // rule built in against 1,536, three more: 13.5-14.4 -> 15.2-16.2),
    // while F16's 3 KiB rows keep one (two streams: 0.88-0.97x).
    if (__builtin_cpu_is("amd") && amd_family() == 0x19) {
      d.single_stream_row_bytes = is_amd_zen3() ? 2048 : 1536;
      d.tile_activation_bytes = 16384;
    }
    // AMD Zen 5 (1Ah): Q4_0's decode layout (256 bytes per 128 inputs) reads its activations
    // at twice the weights' bytes; for ffn_down's 8,960 inputs (18 KiB of them) it held a core
    // to 15 GB/s of weights against 30 for the general VBMI dot on Q8_0 blocks (9.5 KiB), while
    // on 1,536 inputs (3 KiB) it is the faster one (bench_matmul_tokens --copies 8, 1 thread:
    // 8960x1536 14.8-14.9 -> 29.7-30.6 GB/s, 1536x8960 25.8-26.7 with the general dot against
    // 29.4-29.5). So rows whose layout would take 8 KiB or more keep the general dot. (The
    // K-quants' layouts stay on every row: Q4_K and Q5_K on 8960x1536 lose 7-26% without.)
    if (__builtin_cpu_is("amd") && amd_family() == 0x1A) d.q4_0_layout_max_bytes = 8192;
#endif
    if (const char* v = std::getenv("IWB_DECODE_STREAMS"); v != nullptr && std::atoi(v) > 0) d.streams = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_PREFETCH"); v != nullptr && std::atoi(v) >= 0)
      d.prefetch_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_SEGMENT"); v != nullptr && std::atoi(v) >= 0)
      d.segment_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_SINGLE_STREAM_BYTES"); v != nullptr && std::atoi(v) >= 0)
      d.single_stream_row_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_TILE_ACTIVATION_BYTES"); v != nullptr && std::atoi(v) >= 0)
      d.tile_activation_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_Q4_0_LAYOUT_MAX_BYTES"); v != nullptr && std::atoi(v) >= 0)
      d.q4_0_layout_max_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_K_LAYOUT_MAX_BYTES"); v != nullptr && std::atoi(v) >= 0)
      d.k_layout_max_bytes = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_K_LANES_MIN_TOKENS"); v != nullptr && std::atoi(v) >= 0)
      d.k_lanes_min_tokens = std::atoi(v);
    if (const char* v = std::getenv("IWB_DECODE_K_MAX_TOKENS"); v != nullptr && std::atoi(v) >= 2)
      d.k_decode_max_tokens = std::atoi(v);
    d.streams = std::min(d.streams, 8);
    return d;
  }();
  return kStreaming;
}

}  // namespace iwb::detail

namespace iwb {
bool cpu_has_avx2_fma() { return detail::has_avx2_fma_f16c(); }
bool cpu_reports_avx_vnni() { return detail::cpu_reports_avx_vnni(); }

std::string cpu_amx_status() {
  if (!detail::has_amx_int8() && !detail::has_amx_bf16())
    return std::string("not used (") + detail::amx_unused_reason() + ")";
  std::string kinds;
  if (detail::has_amx_int8()) kinds = "int8";
  if (detail::has_amx_bf16()) kinds += kinds.empty() ? "bf16" : ", bf16";
  return "used (" + kinds + ")";
}
}  // namespace iwb
