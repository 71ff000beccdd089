// Tokenizer metadata for synthetic models: a vocab GGUF's tokenizer.* keys, or a byte-level
// SPM vocabulary ("llama" model): special tokens, one token per byte, padding.
#include "synth/synth_tokenizer.h"

#include "iwb/engine/gguf/gguf_file.h"

#include <cstdio>

namespace iwb::synth::detail {
namespace {

// llama.cpp's token types (llama_token_type).
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeByte = 6;

}  // namespace

Result<int64_t> copy_tokenizer(const std::string& path, gguf::GgufWriter* writer) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return make_error(file.status().code(), "vocab file '" + path + "': " + file.error_message());
  const gguf::Array* tokens = (*file)->get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->items.empty() || tokens->element_type != gguf::ValueType::String) {
    return make_error(ErrorCode::NotFound, "vocab file '" + path + "' has no tokenizer (tokenizer.ggml.tokens)");
  }
  int64_t num_keys = 0;
  for (const gguf::KeyValue& kv : (*file)->metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) {
      writer->set(kv.key, kv.value);
      ++num_keys;
    }
  }
  if (num_keys == 0) return make_error(ErrorCode::NotFound, "vocab file '" + path + "' has no tokenizer.* keys");
  return static_cast<int64_t>(tokens->items.size());
}

Status add_byte_level_tokenizer(int64_t vocab_size, gguf::GgufWriter* writer,
                                const std::vector<std::string>& control_tokens) {
  const int64_t min_vocab = kByteLevelMinVocab + static_cast<int64_t>(control_tokens.size());
  if (vocab_size < min_vocab) {
    return make_error(ErrorCode::InvalidArgument, "a byte-level tokenizer needs at least " + std::to_string(min_vocab) +
                                                      " tokens, the shape has " + std::to_string(vocab_size));
  }
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kTypeUnknown, kTypeControl, kTypeControl};
  std::vector<float> scores(3, 0.0f);
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    pieces.emplace_back(piece);
    types.push_back(kTypeByte);
    scores.push_back(0.0f);
  }
  // SentencePiece writes every space as U+2581; as a token of its own it decodes back to a
  // space (byte tokens decode to their raw bytes, which would leave the U+2581 in the text).
  pieces.emplace_back("\xE2\x96\x81");
  types.push_back(kTypeNormal);
  scores.push_back(0.0f);
  for (const std::string& token : control_tokens) {
    pieces.push_back(token);
    types.push_back(kTypeControl);
    scores.push_back(0.0f);
  }
  // Padding up to the embedding's rows, as llama.cpp's converter pads a vocabulary. Normal
  // tokens, so generated text shows them; no text ever tokenizes to one, because SentencePiece
  // only merges pairs whose concatenation is itself a token ("[P" is not).
  for (int64_t id = min_vocab; id < vocab_size; ++id) {
    pieces.push_back("[PAD" + std::to_string(id) + "]");
    types.push_back(kTypeNormal);
    scores.push_back(-1000.0f);
  }
  writer->set_string("tokenizer.ggml.model", "llama");
  writer->set("tokenizer.ggml.tokens", gguf::Value::string_array(pieces));
  writer->set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  writer->set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  writer->set_u32("tokenizer.ggml.unknown_token_id", 0);
  writer->set_u32("tokenizer.ggml.bos_token_id", 1);
  writer->set_u32("tokenizer.ggml.eos_token_id", 2);
  writer->set_bool("tokenizer.ggml.add_bos_token", true);
  writer->set_bool("tokenizer.ggml.add_eos_token", false);
  // Text maps to its bytes one to one (no "▁" prefix added before the first word).
  writer->set_bool("tokenizer.ggml.add_space_prefix", false);
  return {};
}

}  // namespace iwb::synth::detail
