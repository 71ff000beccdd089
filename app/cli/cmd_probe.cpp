// `iwb probe [--json] [-t N] [--size MiB] [--no-store] [--db PATH]`: measures the ceilings of
// the CPU (read-only, copy and triad bandwidth, f32 and int8 peaks; each CUDA device's copy
// bandwidth and GEMM peak) and records them in the results store for the roofline and MBU.
#include "commands.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/store/results_store.h"

#include <cstdio>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

void print_text(const ProbeResult& r) {
  std::printf("%-8s %s\n", r.device_id.c_str(), r.device_name.c_str());
  if (r.num_threads) std::printf("  threads      %d\n", r.num_threads);
  if (r.has_read_bandwidth()) {
    std::printf("  read-only    %8.1f GB/s  (the decode roof: MBU and the roofline's memory roof)\n",
                r.read_bytes_per_s / 1e9);
  }
  std::printf("  copy         %8.1f GB/s\n", r.copy_bytes_per_s / 1e9);
  if (r.triad_bytes_per_s > 0) std::printf("  triad        %8.1f GB/s\n", r.triad_bytes_per_s / 1e9);
  std::printf("  peak         %8.1f GFLOP/s (%s)\n", r.peak_flops / 1e9, r.peak_flops_kind.c_str());
  if (r.peak_int8_ops > 0) {
    std::printf("  int8 peak    %8.1f GOP/s (%s)\n", r.peak_int8_ops / 1e9, r.peak_int8_kind.c_str());
  }
  std::printf("  ridge point  %8.2f FLOP/byte\n", r.ridge_point());
}

void add_json(JsonWriter& j, const ProbeResult& r) {
  j.begin_object().field("device_id", r.device_id).field("device_name", r.device_name).field("date", r.date);
  j.field("num_threads", r.num_threads).field("copy_bytes_per_s", r.copy_bytes_per_s);
  j.field("triad_bytes_per_s", r.triad_bytes_per_s).field("read_bytes_per_s", r.read_bytes_per_s);
  // The memory roof MBU divides by: read-only when measured, else the better of copy and triad.
  j.field("bandwidth_bytes_per_s", r.bandwidth_bytes_per_s()).field("peak_flops", r.peak_flops);
  j.field("peak_flops_kind", r.peak_flops_kind).field("peak_int8_ops", r.peak_int8_ops);
  j.field("peak_int8_kind", r.peak_int8_kind).field("ridge_point", r.ridge_point()).end_object();
}

}  // namespace

int run_probe(int argc, char** argv) {
  ProbeOptions options;
  bool json = false;
  bool is_store_skipped = false;
  std::string db_path = ResultsStore::default_path();
  uint64_t buffer_mib = options.buffer_bytes >> 20;
  OptionTable t("probe", "[--json] [-t THREADS] [--size MIB] [--no-store] [--db PATH]",
                "Measures the ceilings of the CPU (and of each CUDA device) for the roofline.");
  add_threads_option(t, &options.num_threads);
  t.add({.names = {"--size"},
         .value_name = "MIB",
         .help = "each bandwidth buffer, MiB (far beyond the caches)",
         .destination = &buffer_mib,
         .min = 1,
         .max = 1 << 20});
  add_json_option(t, &json);
  add_results_store_options(t, &is_store_skipped, &db_path, "the results");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  options.buffer_bytes = buffer_mib << 20;
  const bool store = !is_store_skipped;

  std::vector<ProbeResult> results;
  auto cpu = probe_cpu(options);
  if (!cpu) {
    std::fprintf(stderr, "iwb probe: %s\n", cpu.error_message().c_str());
    return 1;
  }
  results.push_back(*cpu);
  auto gpus = probe_cuda_devices();
  std::string gpu_note;
  if (gpus)
    results.insert(results.end(), gpus->begin(), gpus->end());
  else
    gpu_note = gpus.error_message();

  if (store) {
    auto db = ResultsStore::open(db_path);
    if (!db) {
      std::fprintf(stderr, "iwb probe: %s\n", db.error_message().c_str());
      return 1;
    }
    for (const ProbeResult& r : results) {
      if (Status s = (*db)->add_probe(r); !s) {
        std::fprintf(stderr, "iwb probe: %s\n", s.message().c_str());
        return 1;
      }
    }
  }

  if (json) {
    JsonWriter j;
    j.begin_object().key("devices").begin_array();
    for (const ProbeResult& r : results) add_json(j, r);
    j.end_array();
    if (!gpu_note.empty()) j.field("cuda", gpu_note);
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  } else {
    for (const ProbeResult& r : results) print_text(r);
    if (!gpu_note.empty()) std::printf("cuda     not probed: %s\n", gpu_note.c_str());
    if (store) std::printf("recorded in %s\n", db_path.c_str());
  }
  return 0;
}

}  // namespace iwb::cli
