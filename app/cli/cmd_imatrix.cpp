// `iwb imatrix -m MODEL [-f TEXT] -o FILE.imatrix [--chunks N] [-c CTX] [-t N]`: per-channel
// mean squared activations of every weight matmul's input over calibration text, written in
// llama.cpp's legacy imatrix format (llama-quantize --imatrix reads it too).
#include "commands.h"

#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/imatrix_collect.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb imatrix -m MODEL.gguf -o FILE.imatrix [-f TEXT] [--chunks N] [-c CTX] [-t N] [--process-output]\n"
               "  -m, --model FILE    model to run (the unquantized one, ideally)\n"
               "  -f, --file TEXT     calibration text (default: the built-in sample)\n"
               "  -o, --output FILE   importance matrix to write (llama.cpp's legacy .dat layout)\n"
               "  -c, --ctx N         tokens per chunk (default 512)\n"
               "  --chunks N          at most N chunks (default: all the text holds)\n"
               "  -t, --threads N     CPU threads (default: all cores)\n"
               "  --process-output    also collect output.weight's input (llama-imatrix leaves it out)\n");
}

}  // namespace

int run_imatrix(int argc, char** argv) {
  quant::ImatrixOptions o;
  std::string text_file, output;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    }
    if (a == "--process-output") { o.include_output = true; continue; }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "iwb imatrix: unknown argument or missing value: '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
    const std::string v = argv[++i];
    int64_t n = 0;
    auto number = [&](int64_t min) {
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || p != v.data() + v.size() || n < min) {
        std::fprintf(stderr, "iwb imatrix: %s needs a whole number >= %lld, not '%s'\n", a.c_str(),
                     static_cast<long long>(min), v.c_str());
        return false;
      }
      return true;
    };
    if (a == "-m" || a == "--model") o.model_path = v;
    else if (a == "-f" || a == "--file") text_file = v;
    else if (a == "-o" || a == "--output") output = v;
    else if (a == "-c" || a == "--ctx") { if (!number(8)) return 2; o.context = n; }
    else if (a == "--chunks") { if (!number(0)) return 2; o.num_chunks = n; }
    else if (a == "-t" || a == "--threads") { if (!number(1)) return 2; o.num_threads = static_cast<int>(n); }
    else {
      std::fprintf(stderr, "iwb imatrix: unknown argument '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
  }
  if (o.model_path.empty() || output.empty()) {
    std::fprintf(stderr, "iwb imatrix: %s is required\n", o.model_path.empty() ? "-m" : "-o");
    print_usage(stderr);
    return 2;
  }
  if (text_file.empty()) {
    o.text = quant::builtin_eval_text();
  } else {
    std::ifstream in(text_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "iwb imatrix: cannot read the text '%s'\n", text_file.c_str());
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    o.text = text.str();
    o.text_name = std::filesystem::path(text_file).filename().string();
  }
  o.progress = [](int64_t chunk, int64_t num_chunks) {
    std::fprintf(stderr, "\rchunk %lld/%lld", static_cast<long long>(chunk), static_cast<long long>(num_chunks));
    if (chunk == num_chunks) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
  Result<quant::Imatrix> m = quant::collect_imatrix(o);
  if (!m) {
    std::fprintf(stderr, "\niwb imatrix: %s\n", m.error_message().c_str());
    return 1;
  }
  if (Status s = quant::write_imatrix_file(*m, output); !s) {
    std::fprintf(stderr, "iwb imatrix: %s\n", s.message().c_str());
    return 1;
  }
  int64_t rows = 0;
  for (const auto& [name, e] : m->entries) rows = std::max(rows, e.num_rows);
  std::printf("wrote %s: %zu matrices, %d chunks of %lld tokens (%lld token rows) from %s\n", output.c_str(),
              m->entries.size(), m->num_chunks, static_cast<long long>(o.context), static_cast<long long>(rows),
              o.text_name.c_str());
  return 0;
}

}  // namespace iwb::cli
