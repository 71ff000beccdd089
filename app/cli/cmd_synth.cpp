// `iwb synth --preset NAME --type TYPE [--vocab VOCAB.gguf] [--seed S] [-t N] -o OUT.gguf`:
// a model with a real shape and random weights, for measuring on shapes nobody shipped here.
#include "commands.h"
#include "options/option_groups.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/synth/synth_model.h"

#include <cinttypes>
#include <cstdio>
#include <string>

namespace iwb::cli {
namespace {

// ", 128 experts of 768, 8 per token" for a mixture of experts; empty otherwise.
std::string experts_text(const synth::SynthShape& s) {
  if (s.num_experts <= 0) return {};
  return ", " + std::to_string(s.num_experts) + " experts of " + std::to_string(s.expert_feed_forward_length) + ", " +
         std::to_string(s.num_experts_used) + " per token";
}

void print_list() {
  std::printf("presets:\n");
  for (const synth::SynthShape& s : synth::synth_presets()) {
    if (s.is_test_shape) continue;
    std::printf("  %-15s %-7s %s: width %" PRId64 ", %" PRId64 " layers, %" PRId64 " heads (%" PRId64 " KV) of %" PRId64
                ", FFN %" PRId64 "%s, vocab %" PRId64 ", %s parameters\n",
                s.name.c_str(), s.architecture.c_str(), s.description.c_str(), s.embedding_length, s.num_layers,
                s.num_heads, s.num_kv_heads, s.head_dim, s.feed_forward_length, experts_text(s).c_str(), s.vocab_size,
                format_count(static_cast<uint64_t>(s.num_parameters())).c_str());
  }
  std::printf("small test shapes:");
  for (const synth::SynthShape& s : synth::synth_presets()) {
    if (s.is_test_shape) std::printf(" %s", s.name.c_str());
  }
  std::printf("\ntypes:");
  for (const std::string& t : synth::weight_type_names()) std::printf(" %s", t.c_str());
  std::printf("\n");
}

struct Options {
  synth::SynthOptions synth;
  int64_t num_layers = 0;         // 0: the preset's
  int64_t num_nextn_layers = -1;  // -1: the preset's
  bool is_preset_given = false;
  bool list = false;
};

// Returns an exit status to stop with, or -1 to go on.
int parse(int argc, char** argv, Options* o) {
  OptionTable t("synth",
                "--preset NAME --type TYPE -o OUT.gguf [--vocab VOCAB.gguf] [--seed S] [-t N]\n"
                "       iwb synth --list",
                "A model with a real shape and random weights, for measuring shapes nobody shipped here.");
  t.add({.names = {"--preset"},
         .value_name = "NAME",
         .help = "model shape (see --list)",
         .destination = CustomSetter([o](std::string_view, std::string_view value) -> std::string {
           const synth::SynthShape* shape = synth::find_synth_preset(std::string(value));
           if (shape == nullptr) return "unknown preset '" + std::string(value) + "' ('iwb synth --list' shows them)";
           o->synth.shape = *shape;
           o->is_preset_given = true;
           return {};
         })});
  t.add({.names = {"--type"},
         .value_name = "TYPE",
         .help = "tensor type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K,\n"
                 "Q4_K, Q5_K, Q6_K, MXFP4, or llama.cpp's mixes Q4_K_M, Q5_K_M",
         .destination = &o->synth.weight_type});
  t.add({.names = {"--vocab"},
         .value_name = "FILE",
         .help = "copy the tokenizer of this GGUF (the vocabulary size follows it);\n"
                 "without it, a byte-level tokenizer padded to the preset's vocabulary",
         .destination = &o->synth.vocab_path});
  t.add({.names = {"-s", "--seed"},
         .value_name = "S",
         .help = "random seed; the same seed writes the same file",
         .destination = &o->synth.seed});
  t.add({.names = {"--layers"},
         .value_name = "N",
         .help = "keep only the first N layers, each at its real size (a big model's shapes and types\n"
                 "at a fraction of the file, e.g. to compare with llama.cpp in F32); 0: the preset's",
         .destination = &o->num_layers,
         .min = 0});
  t.add({.names = {"--nextn-layers"},
         .value_name = "N",
         .help = "multi-token-prediction layers after the trunk (nextn_predict_layers; glm4moe,\n"
                 "deepseek2, qwen35 and qwen35moe, for --spec mtp); default: the preset's",
         .destination = &o->num_nextn_layers,
         .min = 0});
  t.add({.names = {"--distinct-rows"},
         .value_name = "N",
         .help = "draw only N random rows per tensor that is not F32 and repeat them: the same shapes,\n"
                 "types and speed, written many times faster (for benchmarks, not logit comparisons);\n"
                 "0: every row random",
         .destination = &o->synth.distinct_rows,
         .min = 0});
  add_threads_option(t, &o->synth.num_threads);
  t.add({.names = {"-o", "--output"},
         .value_name = "FILE",
         .help = "GGUF file to write",
         .destination = &o->synth.output_path});
  t.add({.names = {"--list"}, .help = "list the presets and types", .destination = &o->list});
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (o->list) return -1;
  if (!o->is_preset_given) return report_usage_error(t, "--preset is required");
  if (o->synth.output_path.empty()) return report_usage_error(t, "-o is required");
  if (o->num_layers < 0 || o->num_layers > o->synth.shape.num_layers) {
    return report_usage_error(t, "--layers must be 1 to the preset's " + std::to_string(o->synth.shape.num_layers));
  }
  if (o->num_layers > 0) o->synth.shape = o->synth.shape.with_layers(o->num_layers);
  if (o->num_nextn_layers >= 0) {
    const std::string& arch = o->synth.shape.architecture;
    if (o->num_nextn_layers > 0 && arch != "glm4moe" && arch != "deepseek2" && arch != "qwen35" &&
        arch != "qwen35moe") {
      return report_usage_error(t, "--nextn-layers: " + arch + " has no multi-token-prediction layers");
    }
    o->synth.shape.num_nextn_layers = o->num_nextn_layers;
  }
  return -1;
}

void print_progress(const synth::SynthProgress& p) {
  if (!p.is_done) return;
  const double percent =
      p.total_bytes ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.total_bytes) : 100.0;
  std::fprintf(stderr, "\r[%4" PRId64 "/%" PRId64 "] %5.1f%%  %-32s %-5s", p.tensor_index + 1, p.num_tensors, percent,
               p.tensor_name.c_str(), std::string(ggml_type_name(p.type)).c_str());
  if (p.tensor_index + 1 == p.num_tensors) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int run_synth(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  if (o.list) {
    print_list();
    return 0;
  }
  o.synth.progress = print_progress;
  auto result = synth::synthesize_model(o.synth);
  if (!result) {
    std::fprintf(stderr, "\niwb synth: %s\n", result.error_message().c_str());
    return 1;
  }
  const synth::SynthReport& r = *result;
  const synth::SynthShape& s = r.shape;
  std::printf("synthesized %s (%s) as %s, seed %" PRIu64 "\n", s.name.c_str(), s.description.c_str(),
              r.types.name.c_str(), o.synth.seed);
  std::printf("  %s: width %" PRId64 ", %" PRId64 " layers, %" PRId64 " heads (%" PRId64 " KV) of %" PRId64
              ", FFN %" PRId64 "%s, vocab %" PRId64 ", %s parameters\n",
              s.architecture.c_str(), s.embedding_length, s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim,
              s.feed_forward_length, experts_text(s).c_str(), s.vocab_size,
              format_count(static_cast<uint64_t>(r.num_parameters)).c_str());
  std::printf("  %s\n", r.tokenizer_note.c_str());
  // Tensors per type, and any that fell back because their rows do not fit the wanted type.
  std::string counts;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::MXFP4}) {
    int n = 0;
    for (const synth::SynthTensorSummary& ts : r.tensors) n += ts.type == t;
    if (n) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(ggml_type_name(t));
  }
  std::printf("  %zu tensors: %s\n", r.tensors.size(), counts.c_str());
  int num_fallbacks = 0;
  for (const synth::SynthTensorSummary& ts : r.tensors) {
    if (ts.type == ts.wanted) continue;
    if (++num_fallbacks <= 3) {
      std::printf("  %s: rows of %" PRId64 " do not fit %s, written as %s\n", ts.name.c_str(), ts.shape[0],
                  std::string(ggml_type_name(ts.wanted)).c_str(), std::string(ggml_type_name(ts.type)).c_str());
    }
  }
  if (num_fallbacks > 3) std::printf("  ... %d tensors in all fell back the same way\n", num_fallbacks);
  std::printf("wrote %s: %s (%" PRIu64 " bytes) in %.1f s\n", o.synth.output_path.c_str(),
              format_bytes(r.file_bytes).c_str(), r.file_bytes, r.seconds);
  return 0;
}

}  // namespace iwb::cli
