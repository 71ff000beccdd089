// `iwb convert llama2c --checkpoint X.bin --tokenizer T.bin -o OUT.gguf [--type f32|f16]
// [--name NAME]`: turn another checkpoint format into a GGUF this engine and llama.cpp load.
#include "commands.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/model/model_info.h"

#include <cstdio>
#include <string>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb convert llama2c --checkpoint MODEL.bin --tokenizer TOKENIZER.bin -o OUT.gguf\n"
               "                           [--type f32|f16] [--name NAME]\n"
               "  --checkpoint FILE  llama2.c checkpoint (legacy export: 7-int header, fp32 weights)\n"
               "  --tokenizer FILE   llama2.c tokenizer file (tokenizer.bin format)\n"
               "  -o, --output FILE  GGUF file to write\n"
               "  --type T           type of the 2-D weights: f32 (default) or f16; norms stay f32\n"
               "  --name NAME        general.name written into the file (default: llama2c)\n");
}

struct Options {
  std::string checkpoint;
  std::string tokenizer;
  std::string output;
  convert::Llama2cConvertOptions convert;
};

// Returns an exit status to stop with, or -1 to go on.
int parse_llama2c(int argc, char** argv, Options* o) {
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") { print_usage(stdout); return 0; }
    const bool takes_value = a == "--checkpoint" || a == "--tokenizer" || a == "-o" || a == "--output" ||
                             a == "--type" || a == "--name";
    if (!takes_value) {
      std::fprintf(stderr, "iwb convert: unknown argument '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "iwb convert: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--checkpoint") o->checkpoint = v;
    else if (a == "--tokenizer") o->tokenizer = v;
    else if (a == "-o" || a == "--output") o->output = v;
    else if (a == "--name") o->convert.name = v;
    else if (v == "f32" || v == "F32") o->convert.weight_type = GgmlType::F32;
    else if (v == "f16" || v == "F16") o->convert.weight_type = GgmlType::F16;
    else {
      std::fprintf(stderr, "iwb convert: --type must be f32 or f16, got '%s'\n", v.c_str());
      return 2;
    }
  }
  const char* missing = o->checkpoint.empty() ? "--checkpoint"
                        : o->tokenizer.empty() ? "--tokenizer"
                        : o->output.empty()    ? "-o"
                                               : nullptr;
  if (missing) {
    std::fprintf(stderr, "iwb convert: %s is required\n", missing);
    print_usage(stderr);
    return 2;
  }
  return -1;
}

}  // namespace

int run_convert(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string format = argv[1];
  if (format == "-h" || format == "--help") {
    print_usage(stdout);
    return 0;
  }
  if (format != "llama2c") {
    std::fprintf(stderr, "iwb convert: unknown source format '%s' (supported: llama2c)\n", format.c_str());
    print_usage(stderr);
    return 2;
  }
  Options o;
  if (int rc = parse_llama2c(argc, argv, &o); rc >= 0) return rc;

  auto result = convert::convert_llama2c_to_gguf(o.checkpoint, o.tokenizer, o.output, o.convert);
  if (!result) {
    std::fprintf(stderr, "iwb convert: %s\n", result.error_message().c_str());
    return 1;
  }
  const convert::Llama2cConvertSummary& s = *result;
  const convert::Llama2cConfig& c = s.config;
  std::printf("converted %s\n", o.checkpoint.c_str());
  std::printf("  dim %lld, hidden %lld, layers %lld, heads %lld, KV heads %lld, vocab %lld, seq_len %lld, %s classifier\n",
              static_cast<long long>(c.dim), static_cast<long long>(c.hidden_dim),
              static_cast<long long>(c.num_layers), static_cast<long long>(c.num_heads),
              static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.vocab_size),
              static_cast<long long>(c.seq_len), c.is_classifier_shared ? "shared" : "separate");
  std::printf("  %lld tensors (%s), %s parameters, %s of tensor data\n", static_cast<long long>(s.num_tensors),
              std::string(ggml_type_name(o.convert.weight_type)).c_str(), format_count(s.num_parameters).c_str(),
              format_bytes(s.tensor_bytes).c_str());
  std::printf("wrote %s (%llu bytes)\n", o.output.c_str(), static_cast<unsigned long long>(s.file_bytes));
  return 0;
}

}  // namespace iwb::cli
