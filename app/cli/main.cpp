// iwb: the headless command-line tool over the same engine as the desktop application.
#include "commands.h"

#include <cstdio>
#include <cstring>
#include <string_view>

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

constexpr Command kCommands[] = {
    {"info", "describe a GGUF file: metadata, tensors, memory at a context", iwb::cli::run_info},
    {"tokenize", "tokenize text with a model's own tokenizer", iwb::cli::run_tokenize},
    {"convert", "convert another checkpoint format to GGUF (llama2c)", iwb::cli::run_convert},
    {"synth", "write a model of a real shape with random weights (any tensor type)", iwb::cli::run_synth},
    {"quantize", "rewrite a model's weights in another type (Q8_0 ... Q2_K, Q4_K_M), with an imatrix",
     iwb::cli::run_quantize},
    {"imatrix", "collect an importance matrix (mean squared activations) for quantize --imatrix",
     iwb::cli::run_imatrix},
    {"eval", "perplexity, and KL divergence / top-1 agreement against a base model", iwb::cli::run_eval},
    {"logits", "every position's logits and greedy ids for token ids (comparing with llama.cpp)", iwb::cli::run_logits},
    {"devices", "list compute devices (CPU, CUDA)", iwb::cli::run_devices},
    {"models", "list GGUF models in the folders people keep them in", iwb::cli::run_models},
    {"run", "generate text with a model (prompt or chat), with timings", iwb::cli::run_run},
    {"serve", "serve a model over an OpenAI-compatible HTTP API, with Prometheus metrics", iwb::cli::run_serve},
    {"bench-serve",
     "load on an OpenAI-compatible server (vLLM, SGLang, llama-server): latency, throughput, its metrics",
     iwb::cli::run_bench_serve},
    {"probe", "measure memory bandwidth and peak arithmetic (the roofline ceilings)", iwb::cli::run_probe},
    {"bench", "prompt and generation throughput (ppN, tgN) with MBU/MFU, recorded", iwb::cli::run_bench},
    {"batch-bench", "continuous batching: throughput, TTFT, KV blocks at several parallelisms",
     iwb::cli::run_batch_bench},
    {"spec-bench", "speculative decoding (draft model, prompt lookup, self-draft, MTP head) against plain decoding",
     iwb::cli::run_spec_bench},
    {"profile-overhead", "measure what the kernel profiler costs (profiling off vs on)",
     iwb::cli::run_profile_overhead},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: iwb <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-16.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(out, "\n'iwb <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (c.name == argv[1]) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "iwb: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
