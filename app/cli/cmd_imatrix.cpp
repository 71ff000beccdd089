// `iwb imatrix -m MODEL [-f TEXT] -o FILE.imatrix [--chunks N] [-c CTX] [-t N] [--no-ppl]`:
// per-channel mean squared activations of every weight matmul's input over calibration text,
// written in llama.cpp's legacy imatrix format (llama-quantize --imatrix reads it too), and the
// text's perplexity from the same run, printed as llama-imatrix prints it.
#include "commands.h"
#include "options/option_groups.h"

#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/imatrix_collect.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace iwb::cli {

int run_imatrix(int argc, char** argv) {
  quant::ImatrixOptions o;
  std::string text_file, output;
  OptionTable t("imatrix", "-m MODEL.gguf -o FILE.imatrix [-f TEXT] [-c CTX] [options]",
                "Per-channel mean squared activations of every matmul's input, in llama.cpp's\n"
                "legacy imatrix format (llama-quantize --imatrix reads it too).");
  add_model_option(t, &o.model_path, "model to run (the unquantized one, ideally)");
  t.add({.names = {"-f", "--file"},
         .value_name = "TEXT",
         .help = "calibration text",
         .destination = &text_file,
         .default_text = "the built-in sample"});
  add_output_file_option(t, &output, "importance matrix to write (llama.cpp's legacy .dat layout)");
  add_context_option(t, &o.context, "tokens per chunk", 8);
  t.add({.names = {"--chunks"},
         .value_name = "N",
         .help = "at most N chunks; 0: all the text holds",
         .destination = &o.num_chunks,
         .min = 0});
  add_threads_option(t, &o.num_threads);
  t.add({.names = {"--process-output"},
         .help = "also collect output.weight's input (llama-imatrix leaves it out)",
         .destination = &o.include_output});
  bool no_perplexity = false;
  t.add({.names = {"--no-ppl"},
         .help = "do not compute the text's perplexity (llama-imatrix's option)",
         .destination = &no_perplexity});
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  o.compute_perplexity = !no_perplexity;
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
  // The perplexity so far after each chunk: shown with the progress, and printed at the end as
  // llama-imatrix's "[1]x,[2]y," line.
  std::vector<double> running;
  o.progress = [&running](int64_t chunk, int64_t num_chunks) {
    std::fprintf(stderr, "\rchunk %lld/%lld", static_cast<long long>(chunk), static_cast<long long>(num_chunks));
    if (!running.empty()) std::fprintf(stderr, ", perplexity %.4f", running.back());
    if (chunk == num_chunks) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
  o.chunk_perplexity = [&running](int64_t, double perplexity) { running.push_back(perplexity); };
  quant::ImatrixPerplexity perplexity;
  Result<quant::Imatrix> m = quant::collect_imatrix(o, &perplexity);
  if (!m) {
    std::fprintf(stderr, "\niwb imatrix: %s\n", m.error_message().c_str());
    return 1;
  }
  if (Status s = quant::write_imatrix_file(*m, output); !s) {
    std::fprintf(stderr, "iwb imatrix: %s\n", s.message().c_str());
    return 1;
  }
  // Token rows through the dense matrices; expert tensors count each expert apart.
  int64_t rows = 0, num_expert_tensors = 0;
  for (const auto& [name, e] : m->entries) {
    if (e.expert_rows.empty())
      rows = std::max(rows, e.num_rows);
    else
      ++num_expert_tensors;
  }
  std::printf("wrote %s: %zu matrices, %d chunks of %lld tokens (%lld token rows) from %s\n", output.c_str(),
              m->entries.size(), m->num_chunks, static_cast<long long>(o.context), static_cast<long long>(rows),
              o.text_name.c_str());
  if (num_expert_tensors > 0) {
    std::printf("  %lld expert tensors: each expert's channels over the rows routed to it\n",
                static_cast<long long>(num_expert_tensors));
  }
  if (perplexity.num_scored > 0) {
    // llama-imatrix's lines, so scripts that read them read ours.
    for (size_t c = 0; c < running.size(); ++c) std::printf("[%zu]%.4f,", c + 1, running[c]);
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%lld tokens scored: each chunk's second half)\n",
                perplexity.perplexity, perplexity.perplexity_error, static_cast<long long>(perplexity.num_scored));
  }
  return 0;
}

}  // namespace iwb::cli
