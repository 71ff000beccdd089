// `iwb convert llama2c --checkpoint X.bin --tokenizer T.bin -o OUT.gguf [--type f32|f16]
// [--name NAME]`: turn another checkpoint format into a GGUF this engine and llama.cpp load.
#include "commands.h"
#include "options/option_groups.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/model/model_info.h"

#include <cstdio>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  std::string format;
  std::string checkpoint;
  std::string tokenizer;
  std::string output;
  std::string type = "f32";
  convert::Llama2cConvertOptions convert;
};

// Returns an exit status to stop with, or -1 to go on.
int parse(int argc, char** argv, Options* o) {
  OptionTable t("convert", "llama2c --checkpoint MODEL.bin --tokenizer TOKENIZER.bin -o OUT.gguf [options]",
                "Turns another checkpoint format into a GGUF this engine and llama.cpp load.");
  t.add({.value_name = "FORMAT",
         .help = "the source format: llama2c",
         .destination = CustomSetter([o](std::string_view, std::string_view value) -> std::string {
           if (value != "llama2c") return "unknown source format '" + std::string(value) + "' (supported: llama2c)";
           o->format = std::string(value);
           return {};
         }),
         .is_required = true,
         .missing_message = "no source format given (supported: llama2c)"});
  t.add({.names = {"--checkpoint"},
         .value_name = "FILE",
         .help = "llama2.c checkpoint (legacy export: 7-int header, fp32 weights)",
         .destination = &o->checkpoint,
         .is_required = true});
  t.add({.names = {"--tokenizer"},
         .value_name = "FILE",
         .help = "llama2.c tokenizer file (tokenizer.bin format)",
         .destination = &o->tokenizer,
         .is_required = true});
  add_output_file_option(t, &o->output, "GGUF file to write");
  t.add({.names = {"--type"},
         .help = "type of the 2-D weights; norms stay f32",
         .destination = &o->type,
         .choices = {"f32", "f16"}});
  t.add({.names = {"--name"},
         .value_name = "NAME",
         .help = "general.name written into the file",
         .destination = &o->convert.name,
         .default_text = "llama2c"});
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  o->convert.weight_type = o->type == "f16" ? GgmlType::F16 : GgmlType::F32;
  return -1;
}

}  // namespace

int run_convert(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;

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
