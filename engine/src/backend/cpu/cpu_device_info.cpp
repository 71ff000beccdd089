// describe_cpu_device: the host CPU as a ComputeDeviceInfo, from /proc and CPUID.
#include "iwb/engine/backend/device_info.h"
#include "iwb/kernels/cpu_amx.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include <unistd.h>

namespace iwb {
namespace {

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// The value of the first "key : value" line of a /proc file, or "" when absent.
std::string read_proc_field(const char* path, std::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) == key) {
      return trim(std::string_view(line).substr(colon + 1));
    }
  }
  return {};
}

// A /proc/meminfo entry ("MemTotal: 16314788 kB") in bytes; 0 when absent.
uint64_t read_meminfo_bytes(std::string_view key) {
  const std::string value = read_proc_field("/proc/meminfo", key);
  if (value.empty()) return 0;
  try {
    return static_cast<uint64_t>(std::stoull(value)) * 1024u;
  } catch (...) {  // a malformed line means "unknown", not a failure
    return 0;
  }
}

std::string cpu_model_name() {
  // x86 reports "model name"; many ARM kernels only have "Hardware" or "Processor".
  for (std::string_view key : {"model name", "Hardware", "Processor"}) {
    std::string name = read_proc_field("/proc/cpuinfo", key);
    if (!name.empty()) return name;
  }
  return "unknown CPU";
}

#if defined(__x86_64__) || defined(__i386__)
// CPUID bits the compilers' __builtin_cpu_supports do not all know (clang 14: "f16c",
// "avxvnni"; GCC 12 reads avxvnni false on Zen 5): leaf 1 ECX bit 29, leaf 7.1 EAX bit 4.
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, unsigned bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3]) == 0) return false;
  return (r[reg] & (1u << bit)) != 0;
}
#endif

std::vector<std::string> detect_simd_features() {
  std::vector<std::string> features;
#if defined(__x86_64__) || defined(__i386__)
  // Asked of the CPU at run time: the fast kernels pick their path from this, whatever
  // -march the binary was built with.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx")) features.emplace_back("avx");
  if (__builtin_cpu_supports("avx2")) features.emplace_back("avx2");
  if (__builtin_cpu_supports("fma")) features.emplace_back("fma");
  if (cpuid_bit(1, 0, 2, 29)) features.emplace_back("f16c");
  if (__builtin_cpu_supports("avx2") && cpuid_bit(7, 1, 0, 4)) features.emplace_back("avxvnni");
  if (__builtin_cpu_supports("avx512f")) features.emplace_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) features.emplace_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) features.emplace_back("avx512vl");
  if (__builtin_cpu_supports("avx512vnni")) features.emplace_back("avx512vnni");
  if (__builtin_cpu_supports("avx512bf16")) features.emplace_back("avx512bf16");
#elif defined(__aarch64__)
  features.emplace_back("neon");  // mandatory in AArch64
#endif
  return features;
}

// A sysfs cache size ("32768K", "1M", "512") in bytes; 0 when unreadable.
uint64_t parse_cache_size(const std::string& text) {
  size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (...) {
    return 0;
  }
  const char unit = end < text.size() ? text[end] : '\0';
  if (unit == 'K') return value << 10;
  if (unit == 'M') return value << 20;
  if (unit == 'G') return value << 30;
  return value;
}

// The largest cache of core 0: sysfs's per-level sizes (what the core complex shares, where
// sysconf's L3 figure on AMD is the whole socket's), else sysconf's L3 or L2.
uint64_t largest_cache_bytes() {
  uint64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string size;
    if (!(in >> size)) break;
    const uint64_t bytes = parse_cache_size(size);
    if (bytes > largest) largest = bytes;
  }
  if (largest > 0) return largest;
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    if (const long bytes = sysconf(name); bytes > 0) return static_cast<uint64_t>(bytes);
  }
  return 0;
}

}  // namespace

ComputeDeviceInfo describe_cpu_device() {
  ComputeDeviceInfo info;
  info.kind = ComputeDeviceKind::Cpu;
  info.id = "cpu";
  info.name = cpu_model_name();

  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  info.num_logical_cores = online > 0 ? static_cast<int>(online)
                                      : static_cast<int>(std::thread::hardware_concurrency());

  info.total_memory_bytes = read_meminfo_bytes("MemTotal");
  info.free_memory_bytes = read_meminfo_bytes("MemAvailable");
  if (info.total_memory_bytes == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_size > 0) {
      info.total_memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
    }
  }
  info.simd_features = detect_simd_features();
  info.amx_status = cpu_amx_status();
  info.cache_bytes = largest_cache_bytes();
  return info;
}

}  // namespace iwb
