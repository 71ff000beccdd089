// `iwb info MODEL.gguf [-c N] [--json] [--no-tensors]`: what a GGUF file holds and what it
// needs to run at context N.
#include "commands.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"

#include <cstdio>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

struct Options {
  std::string path;
  int64_t context = 0;
  bool json = false;
  bool is_tensor_table_skipped = false;
};

int parse(int argc, char** argv, Options* o) {
  OptionTable t("info", "MODEL.gguf [options]", "What a GGUF file holds and what it needs to run at a context.");
  t.add({.value_name = "MODEL.gguf",
         .help = "the GGUF file",
         .destination = &o->path,
         .is_required = true,
         .missing_message = "no model given (iwb info MODEL.gguf)"});
  add_context_option(t, &o->context, "context length for the memory estimate; 0: the model's, at most 4096", 0);
  add_json_option(t, &o->json, "machine-readable output");
  t.add({.names = {"--no-tensors"}, .help = "leave out the tensor table", .destination = &o->is_tensor_table_skipped});
  return parse_command_line(t, argc, argv);
}

// Qwen 3.5: which layers recur and which attend (the heads above are the attention layers').
void print_layer_kinds(const ModelHyperParams& h) {
  std::printf(
      "  %lld recurrent layers (gated delta net: %lld key / %lld value heads of %lld, conv %lld), %lld attention",
      static_cast<long long>(h.num_recurrent_layers()), static_cast<long long>(h.linear_num_key_heads),
      static_cast<long long>(h.linear_num_value_heads), static_cast<long long>(h.linear_head_dim),
      static_cast<long long>(h.linear_conv_kernel), static_cast<long long>(h.num_attention_layers()));
  std::vector<int64_t> attention;
  for (size_t il = 0; il < h.layer_kv.size(); ++il) {
    if (!h.layer_kv[il].is_recurrent) attention.push_back(static_cast<int64_t>(il));
  }
  std::string layers;
  const int64_t interval = h.attention_layer_interval();
  for (size_t i = 0; i < attention.size(); ++i) {
    // A regular pattern shows its first two and its last.
    if (interval > 0 && attention.size() > 3 && i >= 2 && i + 1 < attention.size()) {
      if (i == 2) layers += ", ...";
      continue;
    }
    layers += (layers.empty() ? "" : ", ") + std::to_string(attention[i]);
  }
  if (interval > 0) {
    std::printf(" (one layer in %lld: %s)\n", static_cast<long long>(interval), layers.c_str());
  } else {
    std::printf(" (layers %s)\n", layers.c_str());
  }
}

void print_text(const gguf::GgufFile& f, const ModelSummary& m, const MemoryEstimate& mem, bool show_tensors) {
  const ModelHyperParams& h = m.hparams;
  std::printf("file          %s\n", m.path.c_str());
  std::printf("size          %s (%llu bytes), GGUF v%u, alignment %llu, %zu tensors, %zu metadata keys\n",
              format_bytes(m.file_size).c_str(), static_cast<unsigned long long>(m.file_size), m.gguf_version,
              static_cast<unsigned long long>(f.alignment()), f.tensors().size(), f.metadata().size());
  std::printf("architecture  %s\n", m.architecture.empty() ? "(none)" : m.architecture.c_str());
  std::printf("name          %s\n", m.name.c_str());
  if (m.is_vocab_only) {
    std::printf("parameters    none (vocabulary-only file)\n");
  } else {
    std::printf("parameters    %s (%llu)\n", format_count(m.num_params).c_str(),
                static_cast<unsigned long long>(m.num_params));
    std::printf("file type     %s\n", m.file_type.c_str());
  }
  if (h.block_count) {
    std::printf("\nhyper-parameters\n");
    std::printf("  context %lld, embedding %lld, feed-forward %lld, layers %lld",
                static_cast<long long>(h.context_length), static_cast<long long>(h.embedding_length),
                static_cast<long long>(h.feed_forward_length), static_cast<long long>(h.trunk_layers()));
    if (h.nextn_predict_layers > 0) {
      std::printf(" (+%lld multi-token prediction: --spec mtp drafts with it)",
                  static_cast<long long>(h.nextn_predict_layers));
    }
    std::printf("\n");
    std::printf("  heads %lld, KV heads %lld%s, head dim K %lld / V %lld, vocab %lld\n",
                static_cast<long long>(h.head_count), static_cast<long long>(h.head_count_kv),
                h.kv_lora_rank > 0               ? " (latent attention)"
                : h.head_count_kv < h.head_count ? " (GQA)"
                                                 : "",
                static_cast<long long>(h.key_length), static_cast<long long>(h.value_length),
                static_cast<long long>(h.vocab_size));
    std::printf("  rope base %g, rms eps %g\n", h.rope_freq_base, h.rms_norm_eps);
    if (h.num_recurrent_layers() > 0) print_layer_kinds(h);
    if (h.kv_lora_rank > 0) {
      // The one KV head above is the latent each token stores; each head's own widths follow.
      std::printf(
          "  latent attention: key/value latent %lld + %lld roped, query latent %s, per head q/k %lld, v %lld\n",
          static_cast<long long>(h.kv_lora_rank), static_cast<long long>(h.key_length - h.kv_lora_rank),
          h.q_lora_rank > 0 ? std::to_string(h.q_lora_rank).c_str() : "none", static_cast<long long>(h.key_length_mla),
          static_cast<long long>(h.value_length_mla));
    }
    if (h.expert_count > 0) {
      // The weights above count every expert; a token reads expert_used_count of them per layer.
      std::printf("  experts %lld per layer, %lld per token, expert feed-forward %lld\n",
                  static_cast<long long>(h.expert_count), static_cast<long long>(h.expert_used_count),
                  static_cast<long long>(h.expert_feed_forward_length));
      if (h.expert_shared_count > 0 || h.leading_dense_block_count > 0) {
        std::printf("  shared experts %lld, leading dense layers %lld\n", static_cast<long long>(h.expert_shared_count),
                    static_cast<long long>(h.leading_dense_block_count));
      }
      if (h.expert_shared_feed_forward_length > 0) {
        std::printf("  shared expert feed-forward %lld\n", static_cast<long long>(h.expert_shared_feed_forward_length));
      }
    }
  }
  std::printf("\ntokenizer     %s", m.tokenizer_model.empty() ? "(none)" : m.tokenizer_model.c_str());
  if (!m.tokenizer_pre.empty()) std::printf(" / pre %s", m.tokenizer_pre.c_str());
  std::printf(", %lld tokens, chat template: %s\n", static_cast<long long>(m.tokenizer_vocab_size),
              m.has_chat_template ? "yes" : "no");

  std::printf("\nmetadata\n");
  for (const gguf::KeyValue& kv : f.metadata()) {
    std::printf("  %-44s %-4s %s\n", kv.key.c_str(), std::string(gguf::value_type_name(kv.value.type())).c_str(),
                kv.value.to_display_string().c_str());
  }

  if (show_tensors && !f.tensors().empty()) {
    std::printf("\ntensors\n  %-40s %-7s %-24s %12s\n", "name", "type", "shape", "bytes");
    for (const gguf::TensorInfo& t : f.tensors()) {
      std::printf("  %-40s %-7s %-24s %12llu\n", t.name.c_str(), std::string(ggml_type_name(t.type)).c_str(),
                  t.shape_string().c_str(), static_cast<unsigned long long>(t.num_bytes));
    }
  }
  if (!m.totals_by_type.empty()) {
    std::printf("\ntotals by type\n");
    for (const auto& [type, totals] : m.totals_by_type) {
      std::printf("  %-7s %5lld tensors %14llu elements %12s\n", type.c_str(),
                  static_cast<long long>(totals.num_tensors), static_cast<unsigned long long>(totals.num_elements),
                  format_bytes(totals.num_bytes).c_str());
    }
  }
  if (!m.is_vocab_only) {
    std::printf("\nmemory at context %lld\n", static_cast<long long>(mem.context));
    std::printf("  weights  %12s\n", format_bytes(mem.weight_bytes).c_str());
    if (h.kv_lora_rank > 0) {  // the values are the key rows' first values: keys only
      std::printf("  KV cache %12s  (f16, %lld layers x %lld dims of latent and roped key; values inside)\n",
                  format_bytes(mem.kv_cache_bytes).c_str(), static_cast<long long>(h.trunk_layers()),
                  static_cast<long long>(h.key_length));
    } else if (h.num_recurrent_layers() > 0) {  // Qwen 3.5: the attention layers alone keep keys and values
      std::printf(
          "  KV cache %12s  (f16, %lld attention layers x %lld KV heads x %lld+%lld dims; the recurrent "
          "layers keep none)\n",
          format_bytes(mem.kv_cache_bytes).c_str(), static_cast<long long>(h.num_attention_layers()),
          static_cast<long long>(h.head_count_kv), static_cast<long long>(h.key_length),
          static_cast<long long>(h.value_length));
    } else if (!h.layer_kv.empty()) {  // Gemma 4: the sliding and global layers' rows differ
      std::printf(
          "  KV cache %12s  (f16, %lld layers of their own KV heads and head sizes: %lld values per position)\n",
          format_bytes(mem.kv_cache_bytes).c_str(), static_cast<long long>(h.trunk_layers()),
          static_cast<long long>(h.kv_values_per_position()));
    } else {
      std::printf("  KV cache %12s  (f16, %lld layers x %lld KV heads x %lld+%lld dims)\n",
                  format_bytes(mem.kv_cache_bytes).c_str(), static_cast<long long>(h.trunk_layers()),
                  static_cast<long long>(h.head_count_kv), static_cast<long long>(h.key_length),
                  static_cast<long long>(h.value_length));
    }
    std::printf("  scratch  %12s  (estimate)\n", format_bytes(mem.scratch_bytes).c_str());
    if (mem.recurrent_state_bytes > 0) {
      // Fixed whatever the context: each running sequence holds one, beside its KV blocks.
      std::printf(
          "  recurrent%12s  (f32 state per sequence: %lld recurrent layers x (the convolution's last %lld inputs + "
          "%lld heads' %lldx%lld))\n",
          format_bytes(mem.recurrent_state_bytes).c_str(), static_cast<long long>(h.num_recurrent_layers()),
          static_cast<long long>(h.linear_conv_kernel - 1), static_cast<long long>(h.linear_num_value_heads),
          static_cast<long long>(h.linear_head_dim), static_cast<long long>(h.linear_head_dim));
    }
    std::printf("  total    %12s\n", format_bytes(mem.total()).c_str());
  }
}

void print_json(const gguf::GgufFile& f, const ModelSummary& m, const MemoryEstimate& mem, bool show_tensors) {
  const ModelHyperParams& h = m.hparams;
  JsonWriter j;
  j.begin_object();
  j.field("path", m.path).field("file_size", m.file_size).field("gguf_version", uint64_t{m.gguf_version});
  j.field("alignment", f.alignment()).field("architecture", m.architecture).field("name", m.name);
  j.field("num_params", m.num_params).field("file_type", m.file_type).field("vocab_only", m.is_vocab_only);
  j.key("hparams").begin_object();
  j.field("context_length", h.context_length).field("embedding_length", h.embedding_length);
  j.field("feed_forward_length", h.feed_forward_length).field("block_count", h.block_count);
  j.field("head_count", h.head_count).field("head_count_kv", h.head_count_kv);
  j.field("key_length", h.key_length).field("value_length", h.value_length).field("vocab_size", h.vocab_size);
  j.field("rope_freq_base", h.rope_freq_base).field("rms_norm_eps", h.rms_norm_eps);
  j.field("expert_count", h.expert_count).field("expert_used_count", h.expert_used_count);
  j.field("expert_feed_forward_length", h.expert_feed_forward_length);
  j.field("expert_shared_count", h.expert_shared_count);
  j.field("expert_shared_feed_forward_length", h.expert_shared_feed_forward_length);
  j.field("leading_dense_block_count", h.leading_dense_block_count);
  j.field("nextn_predict_layers", h.nextn_predict_layers);
  j.field("kv_lora_rank", h.kv_lora_rank).field("q_lora_rank", h.q_lora_rank);
  j.field("key_length_mla", h.key_length_mla).field("value_length_mla", h.value_length_mla);
  j.field("linear_conv_kernel", h.linear_conv_kernel).field("linear_num_key_heads", h.linear_num_key_heads);
  j.field("linear_num_value_heads", h.linear_num_value_heads).field("linear_head_dim", h.linear_head_dim);
  j.key("recurrent_layers").begin_array();
  for (size_t il = 0; il < h.layer_kv.size(); ++il) {
    if (h.layer_kv[il].is_recurrent) j.value(static_cast<int64_t>(il));
  }
  j.end_array();
  j.field("recurrent_state_bytes_per_sequence", h.recurrent_state_bytes_per_sequence);
  j.end_object();
  j.key("tokenizer").begin_object();
  j.field("model", m.tokenizer_model).field("pre", m.tokenizer_pre).field("vocab_size", m.tokenizer_vocab_size);
  j.field("has_chat_template", m.has_chat_template);
  j.end_object();
  j.key("metadata").begin_object();
  for (const gguf::KeyValue& kv : f.metadata()) j.field(kv.key, kv.value.to_display_string());
  j.end_object();
  if (show_tensors) {
    j.key("tensors").begin_array();
    for (const gguf::TensorInfo& t : f.tensors()) {
      j.begin_object().field("name", t.name).field("type", std::string(ggml_type_name(t.type)));
      j.key("shape").begin_array();
      for (int64_t d : t.shape) j.value(d);
      j.end_array();
      j.field("bytes", t.num_bytes).end_object();
    }
    j.end_array();
  }
  j.key("totals_by_type").begin_object();
  for (const auto& [type, totals] : m.totals_by_type) {
    j.key(type).begin_object().field("tensors", totals.num_tensors).field("elements", totals.num_elements);
    j.field("bytes", totals.num_bytes).end_object();
  }
  j.end_object();
  j.key("memory").begin_object();
  j.field("context", mem.context).field("weights", mem.weight_bytes).field("kv_cache", mem.kv_cache_bytes);
  j.field("scratch", mem.scratch_bytes).field("recurrent_state", mem.recurrent_state_bytes).field("total", mem.total());
  j.end_object();
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int run_info(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  auto file = gguf::GgufFile::open(o.path);
  if (!file) {
    std::fprintf(stderr, "iwb info: %s\n", file.error_message().c_str());
    return 1;
  }
  auto summary = summarize_model(**file);
  if (!summary) {
    std::fprintf(stderr, "iwb info: %s\n", summary.error_message().c_str());
    return 1;
  }
  int64_t context = o.context;
  if (context <= 0) {
    const int64_t trained = summary->hparams.context_length;
    context = trained > 0 ? std::min<int64_t>(trained, 4096) : 4096;
  }
  const MemoryEstimate mem = estimate_memory(*summary, context);
  if (o.json)
    print_json(**file, *summary, mem, !o.is_tensor_table_skipped);
  else
    print_text(**file, *summary, mem, !o.is_tensor_table_skipped);
  return 0;
}

}  // namespace iwb::cli
