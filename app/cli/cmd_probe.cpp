// `iwb probe [--json] [-t N] [--size MiB] [--no-store] [--db PATH]`: measures the ceilings of
// the CPU (and of each CUDA device) and records them in the results store for the roofline.
#include "commands.h"
#include "json_writer.h"

#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/store/results_store.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb probe [--json] [-t THREADS] [--size MIB] [--no-store] [--db PATH]\n"
               "  -t, --threads N  CPU threads (default: all)\n"
               "  --size MIB       each bandwidth buffer, MiB (default 512; far beyond the caches)\n"
               "  --no-store       do not record the results\n"
               "  --db PATH        results store (default %s)\n",
               ResultsStore::default_path().c_str());
}

void print_text(const ProbeResult& r) {
  std::printf("%-8s %s\n", r.device_id.c_str(), r.device_name.c_str());
  if (r.num_threads) std::printf("  threads      %d\n", r.num_threads);
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
  j.field("triad_bytes_per_s", r.triad_bytes_per_s).field("peak_flops", r.peak_flops);
  j.field("peak_flops_kind", r.peak_flops_kind).field("peak_int8_ops", r.peak_int8_ops);
  j.field("peak_int8_kind", r.peak_int8_kind).field("ridge_point", r.ridge_point()).end_object();
}

}  // namespace

int run_probe(int argc, char** argv) {
  ProbeOptions options;
  bool json = false;
  bool store = true;
  std::string db_path = ResultsStore::default_path();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "-h" || a == "--help") { print_usage(stdout); return 0; }
    if (a == "--json") json = true;
    else if (a == "--no-store") store = false;
    else if ((a == "-t" || a == "--threads") && has_value) options.num_threads = std::atoi(argv[++i]);
    else if (a == "--size" && has_value) options.buffer_bytes = std::strtoull(argv[++i], nullptr, 10) << 20;
    else if (a == "--db" && has_value) db_path = argv[++i];
    else {
      std::fprintf(stderr, "iwb probe: unknown or incomplete option '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
  }

  std::vector<ProbeResult> results;
  auto cpu = probe_cpu(options);
  if (!cpu) {
    std::fprintf(stderr, "iwb probe: %s\n", cpu.error_message().c_str());
    return 1;
  }
  results.push_back(*cpu);
  auto gpus = probe_cuda_devices();
  std::string gpu_note;
  if (gpus) results.insert(results.end(), gpus->begin(), gpus->end());
  else gpu_note = gpus.error_message();

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
