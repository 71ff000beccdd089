// llama2.c checkpoint + tokenizer → llama-architecture GGUF: metadata keys, tokenizer arrays
// and tensors named and shaped as llama.cpp's llama loader expects them.
#include "iwb/engine/convert/llama2c.h"

#include "iwb/kernels/quantize.h"

#include <cmath>
#include <cstring>
#include <filesystem>

namespace iwb::convert {
namespace {

// llama.cpp's llama_ftype values (include/llama.h) for general.file_type.
constexpr uint32_t kFtypeAllF32 = 0;
constexpr uint32_t kFtypeMostlyF16 = 1;

// Rotary layout, checked against llama.cpp's source: llama2.c's run.c rotates adjacent pairs
// (2i, 2i+1) inside each head with theta = pos * 10000^(-2i/head_size), as Meta's original
// checkpoints do. llama.cpp runs LLM_ARCH_LLAMA with LLAMA_ROPE_TYPE_NORM, which rotates the
// same adjacent pairs with the same frequencies. Only Hugging Face checkpoints (rotate_half,
// pairs (i, i + head_size/2)) need convert_hf_to_gguf.py's permute() on wq/wk; llama.cpp's own
// convert-llama2c-to-ggml copies wq/wk unchanged, and so do we.

class TensorAdder {
 public:
  TensorAdder(gguf::GgufWriter* writer, Llama2cConvertSummary* summary) : m_writer(writer), m_summary(summary) {}

  // A llama2.c row-major [rows, cols] array as a ggml tensor of shape {cols, rows}.
  Status add(const std::string& name, std::span<const float> data, int64_t cols, int64_t rows, GgmlType type) {
    if (data.size() != static_cast<size_t>(cols * rows)) {
      return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' expects " + std::to_string(cols * rows) +
                                                        " values, the checkpoint slice has " +
                                                        std::to_string(data.size()));
    }
    std::vector<int64_t> shape = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    gguf::GgufWriter::TensorFiller filler;
    if (type == GgmlType::F32) {
      filler = [data](std::span<uint8_t> dst) {
        std::memcpy(dst.data(), data.data(), data.size_bytes());
        return Status{};
      };
    } else {
      filler = [data, type, name](std::span<uint8_t> dst) { return convert_to(name, data, type, dst); };
    }
    IWB_RETURN_IF_ERROR(m_writer->add_tensor(name, std::move(shape), type, std::move(filler)));
    m_summary->num_tensors += 1;
    m_summary->num_parameters += data.size();
    m_summary->tensor_bytes += *ggml_row_bytes(type, cols) * static_cast<uint64_t>(rows);
    return {};
  }

 private:
  static Status convert_to(const std::string& name, std::span<const float> src, GgmlType type,
                           std::span<uint8_t> dst) {
    if (!quantize_row_ref(type, src.data(), dst.data(), static_cast<int64_t>(src.size()))) {
      return make_error(ErrorCode::Unsupported, "tensor '" + name + "': cannot convert to " +
                                                    std::string(ggml_type_name(type)));
    }
    if (type == GgmlType::F16) {
      // A finite weight beyond F16's range (65504) would silently become infinity.
      for (size_t i = 0; i < src.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, dst.data() + 2 * i, sizeof(h));
        if ((h & 0x7C00) == 0x7C00 && std::isfinite(src[i])) {
          return make_error(ErrorCode::Unsupported, "tensor '" + name + "': value " + std::to_string(src[i]) +
                                                        " at index " + std::to_string(i) +
                                                        " overflows F16; convert with --type f32");
        }
      }
    }
    return {};
  }

  gguf::GgufWriter* m_writer;
  Llama2cConvertSummary* m_summary;
};

std::string block_name(int64_t layer, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + suffix + ".weight";
}

void set_metadata(const Llama2cConfig& c, const Llama2cConvertOptions& options, gguf::GgufWriter* w) {
  w->set_string("general.architecture", "llama");
  w->set_string("general.name", options.name.empty() ? "llama2c" : options.name);
  w->set_u32("general.file_type", options.weight_type == GgmlType::F16 ? kFtypeMostlyF16 : kFtypeAllF32);
  w->set_u32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));
  w->set_u32("llama.context_length", static_cast<uint32_t>(c.seq_len));
  w->set_u32("llama.embedding_length", static_cast<uint32_t>(c.dim));
  w->set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
  w->set_u32("llama.block_count", static_cast<uint32_t>(c.num_layers));
  w->set_u32("llama.attention.head_count", static_cast<uint32_t>(c.num_heads));
  w->set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  // llama2.c rotates the whole head.
  w->set_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_size()));
  w->set_f32("llama.rope.freq_base", kLlama2cRopeBase);
  w->set_f32("llama.attention.layer_norm_rms_epsilon", kLlama2cRmsEps);
}

void set_tokenizer(const Llama2cTokenizer& tok, gguf::GgufWriter* w) {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  pieces.reserve(tok.tokens.size());
  scores.reserve(tok.tokens.size());
  types.reserve(tok.tokens.size());
  for (const Llama2cToken& t : tok.tokens) {
    pieces.push_back(t.piece);
    scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }
  w->set_string("tokenizer.ggml.model", "llama");
  w->set("tokenizer.ggml.tokens", gguf::Value::string_array(pieces));
  w->set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w->set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  w->set_u32("tokenizer.ggml.bos_token_id", kLlama2cBosId);
  w->set_u32("tokenizer.ggml.eos_token_id", kLlama2cEosId);
  w->set_u32("tokenizer.ggml.unknown_token_id", kLlama2cUnkId);
  // run.c's generate() prepends BOS and never appends EOS.
  w->set_bool("tokenizer.ggml.add_bos_token", true);
  w->set_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace

Status build_llama2c_gguf(const Llama2cCheckpoint& checkpoint, const Llama2cTokenizer& tokenizer,
                          const Llama2cConvertOptions& options, gguf::GgufWriter* writer,
                          Llama2cConvertSummary* summary) {
  const Llama2cConfig& c = checkpoint.config();
  if (options.weight_type != GgmlType::F32 && options.weight_type != GgmlType::F16) {
    return make_error(ErrorCode::Unsupported, "llama2.c conversion writes F32 or F16 weights, not " +
                                                  std::string(ggml_type_name(options.weight_type)));
  }
  if (static_cast<int64_t>(tokenizer.tokens.size()) != c.vocab_size) {
    return make_error(ErrorCode::InvalidArgument, "tokenizer holds " + std::to_string(tokenizer.tokens.size()) +
                                                      " tokens, the checkpoint's vocab_size is " +
                                                      std::to_string(c.vocab_size));
  }
  *summary = Llama2cConvertSummary{};
  summary->config = c;
  set_metadata(c, options, writer);
  set_tokenizer(tokenizer, writer);

  const GgmlType wt = options.weight_type;
  const GgmlType norm = GgmlType::F32;  // 1-D norms stay F32, as in llama.cpp's "mostly" types
  TensorAdder t(writer, summary);
  IWB_RETURN_IF_ERROR(t.add("token_embd.weight", checkpoint.token_embedding(), c.dim, c.vocab_size, wt));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "attn_norm"), checkpoint.rms_att(l), c.dim, 1, norm));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "attn_q"), checkpoint.wq(l), c.dim, c.dim, wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "attn_k"), checkpoint.wk(l), c.dim, c.kv_dim(), wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "attn_v"), checkpoint.wv(l), c.dim, c.kv_dim(), wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "attn_output"), checkpoint.wo(l), c.dim, c.dim, wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "ffn_norm"), checkpoint.rms_ffn(l), c.dim, 1, norm));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "ffn_gate"), checkpoint.w1(l), c.dim, c.hidden_dim, wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "ffn_down"), checkpoint.w2(l), c.hidden_dim, c.dim, wt));
    IWB_RETURN_IF_ERROR(t.add(block_name(l, "ffn_up"), checkpoint.w3(l), c.dim, c.hidden_dim, wt));
  }
  IWB_RETURN_IF_ERROR(t.add("output_norm.weight", checkpoint.rms_final(), c.dim, 1, norm));
  // A shared classifier is left out: llama.cpp (and our loader) fall back to token_embd.
  if (!c.is_classifier_shared) {
    IWB_RETURN_IF_ERROR(t.add("output.weight", checkpoint.classifier(), c.dim, c.vocab_size, wt));
  }
  return {};
}

Result<Llama2cConvertSummary> convert_llama2c_to_gguf(const std::string& checkpoint_path,
                                                       const std::string& tokenizer_path,
                                                       const std::string& out_path,
                                                       const Llama2cConvertOptions& options) {
  auto checkpoint = Llama2cCheckpoint::open(checkpoint_path);
  if (!checkpoint) return checkpoint.status();
  auto tokenizer = load_llama2c_tokenizer(tokenizer_path, (*checkpoint)->config().vocab_size);
  if (!tokenizer) return tokenizer.status();

  gguf::GgufWriter writer;
  Llama2cConvertSummary summary;
  IWB_RETURN_IF_ERROR(build_llama2c_gguf(**checkpoint, *tokenizer, options, &writer, &summary));
  IWB_RETURN_IF_ERROR(writer.write_file(out_path));

  std::error_code ec;
  const auto size = std::filesystem::file_size(out_path, ec);
  if (ec) return make_error(ErrorCode::IoError, "cannot stat '" + out_path + "' after writing: " + ec.message());
  summary.file_bytes = size;
  return summary;
}

}  // namespace iwb::convert
