// Reading tokenizer.ggml.* from a GGUF into a Vocab, and checking a Vocab before use. Every
// problem is reported with the key it concerns, so a broken file can be diagnosed from the message.
#include "iwb/engine/tokenizer/vocab.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "tokenizer/pretokenizer_table.h"
#include "tokenizer/vocab_rules.h"

#include <string>
#include <unordered_map>
#include <utility>

namespace iwb::tokenizer {
namespace {

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

Status corrupt(std::string message) { return make_error(ErrorCode::CorruptFile, std::move(message)); }

// An array of `element` values stored under `key`; nullptr with ok status when absent.
Status find_array(const gguf::GgufFile& file, std::string_view key, const gguf::Array** out) {
  *out = nullptr;
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return {};
  const gguf::Array* array = value->as_array();
  if (array == nullptr) {
    return corrupt(std::string(key) + " should be an array but is a " +
                   std::string(gguf::value_type_name(value->type())));
  }
  *out = array;
  return {};
}

Status read_strings(const gguf::Array& array, std::string_view key, std::vector<std::string>* out) {
  if (array.element_type != gguf::ValueType::String) {
    return corrupt(std::string(key) + " should hold strings but holds " +
                   std::string(gguf::value_type_name(array.element_type)));
  }
  out->clear();
  out->reserve(array.items.size());
  for (const gguf::Value& item : array.items) out->push_back(*item.as_string());
  return {};
}

// An array that must have one entry per token: fewer is an error; more is tolerated, as
// llama.cpp does, and cut off.
Status check_per_token_length(const gguf::Array& array, std::string_view key, size_t num_tokens) {
  if (array.items.size() < num_tokens) {
    return corrupt(std::string(key) + " has " + std::to_string(array.items.size()) +
                   " entries but tokenizer.ggml.tokens has " + std::to_string(num_tokens));
  }
  return {};
}

Status read_scores(const gguf::GgufFile& file, Vocab* v) {
  const gguf::Array* array = nullptr;
  IWB_RETURN_IF_ERROR(find_array(file, kScoresKey, &array));
  v->scores.assign(v->tokens.size(), 0.0f);
  if (array == nullptr) return {};
  if (array->element_type != gguf::ValueType::Float32 && array->element_type != gguf::ValueType::Int32) {
    return corrupt(std::string(kScoresKey) + " should hold f32 or i32 but holds " +
                   std::string(gguf::value_type_name(array->element_type)));
  }
  IWB_RETURN_IF_ERROR(check_per_token_length(*array, kScoresKey, v->tokens.size()));
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    v->scores[i] = static_cast<float>(array->items[i].as_float().value_or(0.0));
  }
  return {};
}

Status read_types(const gguf::GgufFile& file, Vocab* v) {
  const gguf::Array* array = nullptr;
  IWB_RETURN_IF_ERROR(find_array(file, kTypesKey, &array));
  v->types.assign(v->tokens.size(), TokenType::Normal);
  if (array == nullptr) return {};
  if (array->element_type != gguf::ValueType::Int32) {
    return corrupt(std::string(kTypesKey) + " should hold i32 but holds " +
                   std::string(gguf::value_type_name(array->element_type)));
  }
  IWB_RETURN_IF_ERROR(check_per_token_length(*array, kTypesKey, v->tokens.size()));
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    const int64_t t = array->items[i].as_int().value_or(0);
    // Values beyond the known types are "undefined", as llama.cpp treats them.
    v->types[i] = (t >= 1 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Undefined;
  }
  return {};
}

// Reads one special-token id key. -1 (or its u32 spelling) means "none".
Status read_special_id(const gguf::GgufFile& file, std::string_view key, size_t num_tokens, TokenId* id) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return {};
  const std::optional<int64_t> raw = value->as_int();
  if (!raw) return corrupt(std::string(key) + " should be an integer token id");
  if (*raw == -1 || *raw == 0xFFFFFFFFll) {
    *id = kNoToken;
    return {};
  }
  if (*raw < 0 || static_cast<uint64_t>(*raw) >= num_tokens) {
    return corrupt(std::string(key) + " = " + std::to_string(*raw) + " is out of range: the vocabulary has " +
                   std::to_string(num_tokens) + " tokens");
  }
  *id = static_cast<TokenId>(*raw);
  return {};
}

Status read_special_ids(const gguf::GgufFile& file, Vocab* v) {
  const size_t n = v->tokens.size();
  SpecialTokenIds& s = v->special;
  // Defaults that do not fit this vocabulary are dropped, as llama.cpp does.
  for (TokenId* id : {&s.bos, &s.eos, &s.eot, &s.eom, &s.unk, &s.pad, &s.sep, &s.mask}) {
    if (*id != kNoToken && static_cast<size_t>(*id) >= n) *id = kNoToken;
  }
  const std::pair<std::string_view, TokenId*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &s.bos},
      {"tokenizer.ggml.eos_token_id", &s.eos},
      {"tokenizer.ggml.eot_token_id", &s.eot},
      {"tokenizer.ggml.eom_token_id", &s.eom},
      {"tokenizer.ggml.unknown_token_id", &s.unk},
      {"tokenizer.ggml.seperator_token_id", &s.sep},
      {"tokenizer.ggml.padding_token_id", &s.pad},
      {"tokenizer.ggml.mask_token_id", &s.mask},
      {"tokenizer.ggml.prefix_token_id", &s.fim_prefix},
      {"tokenizer.ggml.suffix_token_id", &s.fim_suffix},
      {"tokenizer.ggml.middle_token_id", &s.fim_middle},
      {"tokenizer.ggml.fim_pre_token_id", &s.fim_prefix},
      {"tokenizer.ggml.fim_suf_token_id", &s.fim_suffix},
      {"tokenizer.ggml.fim_mid_token_id", &s.fim_middle},
  };
  for (const auto& [key, id] : keys) IWB_RETURN_IF_ERROR(read_special_id(file, key, n, id));
  // BERT files name the classifier token instead of a BOS.
  if (v->kind == VocabKind::WordPiece && file.find("tokenizer.ggml.bos_token_id") == nullptr) {
    IWB_RETURN_IF_ERROR(read_special_id(file, "tokenizer.ggml.cls_token_id", n, &s.bos));
  }
  return {};
}

Status require_id(bool is_added, TokenId id, std::string_view add_key, std::string_view id_key) {
  if (is_added && id == kNoToken) {
    return make_error(ErrorCode::InvalidArgument,
                      std::string(add_key) + " is true, but " + std::string(id_key) + " is not set");
  }
  return {};
}

}  // namespace

std::string_view vocab_kind_name(VocabKind kind) {
  switch (kind) {
    case VocabKind::Spm: return "SPM";
    case VocabKind::Bpe: return "BPE";
    case VocabKind::WordPiece: return "WordPiece";
  }
  return "unknown";
}

Result<Vocab> vocab_from_gguf(const gguf::GgufFile& file) {
  Vocab v;
  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) {
    return make_error(ErrorCode::NotFound, "the file has no tokenizer: tokenizer.ggml.model is missing");
  }
  v.model = *model;
  v.pre = file.get_string("tokenizer.ggml.pre").value_or("");
  IWB_RETURN_IF_ERROR(apply_model_defaults(&v));
  if (auto prefix = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *prefix;

  const gguf::Array* tokens = nullptr;
  IWB_RETURN_IF_ERROR(find_array(file, kTokensKey, &tokens));
  if (tokens == nullptr)
    return make_error(ErrorCode::NotFound, "the file has no token list: tokenizer.ggml.tokens is missing");
  IWB_RETURN_IF_ERROR(read_strings(*tokens, kTokensKey, &v.tokens));
  if (v.tokens.empty()) return corrupt("tokenizer.ggml.tokens is empty");
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    // llama.cpp gives empty entries a unique placeholder so lookups stay one-to-one.
    if (v.tokens[i].empty()) v.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  IWB_RETURN_IF_ERROR(read_scores(file, &v));
  IWB_RETURN_IF_ERROR(read_types(file, &v));

  if (v.kind == VocabKind::Bpe) {
    const gguf::Array* merges = nullptr;
    IWB_RETURN_IF_ERROR(find_array(file, kMergesKey, &merges));
    if (merges == nullptr)
      return make_error(ErrorCode::NotFound, "BPE vocabulary without merges: tokenizer.ggml.merges is missing");
    IWB_RETURN_IF_ERROR(read_strings(*merges, kMergesKey, &v.merges));
  }

  IWB_RETURN_IF_ERROR(read_special_ids(file, &v));
  if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  // llama.cpp turns Gemma 4's BOS on whatever the file says (its files that say false are wrong).
  if (const PreTokenizerFamily* family = find_pre_tokenizer(v.pre);
      v.kind == VocabKind::Bpe && family != nullptr && family->is_add_bos_forced) {
    v.add_bos = true;
  }
  if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_sep_token")) v.add_sep = *b;
  if (auto b = file.get_bool("tokenizer.ggml.normalizer.lowercase")) {
    v.lowercase = *b;
    v.strip_accents = *b;  // llama.cpp: accents follow lowercasing unless stated
  }
  if (auto b = file.get_bool("tokenizer.ggml.normalizer.strip_accents")) v.strip_accents = *b;

  apply_text_rules(&v, file.get_string("general.name").value_or(""));
  IWB_RETURN_IF_ERROR(validate_vocab(v));
  return v;
}

Status validate_vocab(const Vocab& v) {
  const size_t n = v.tokens.size();
  if (n == 0) return make_error(ErrorCode::InvalidArgument, "the vocabulary has no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return make_error(ErrorCode::InvalidArgument, "the vocabulary is too large");
  if (v.scores.size() != n && !v.scores.empty()) {
    return make_error(ErrorCode::InvalidArgument, "vocabulary has " + std::to_string(n) + " tokens but " +
                                                      std::to_string(v.scores.size()) + " scores");
  }
  if (v.types.size() != n && !v.types.empty()) {
    return make_error(ErrorCode::InvalidArgument, "vocabulary has " + std::to_string(n) + " tokens but " +
                                                      std::to_string(v.types.size()) + " token types");
  }
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v.tokens[i].empty()) return make_error(ErrorCode::InvalidArgument, "token " + std::to_string(i) + " is empty");
    auto [it, is_new] = seen.emplace(v.tokens[i], i);
    if (!is_new) {
      return make_error(ErrorCode::InvalidArgument, "duplicate token '" + v.tokens[i] + "' has ids " +
                                                        std::to_string(it->second) + " and " + std::to_string(i));
    }
  }
  auto check_id = [&](TokenId id, std::string_view what) -> Status {
    if (id == kNoToken || (id >= 0 && static_cast<size_t>(id) < n)) return {};
    return make_error(ErrorCode::InvalidArgument, std::string(what) + " id " + std::to_string(id) +
                                                      " is out of range: the vocabulary has " + std::to_string(n) +
                                                      " tokens");
  };
  const SpecialTokenIds& s = v.special;
  const std::pair<TokenId, std::string_view> ids[] = {{s.bos, "BOS"},
                                                      {s.eos, "EOS"},
                                                      {s.eot, "EOT"},
                                                      {s.eom, "EOM"},
                                                      {s.unk, "unknown-token"},
                                                      {s.pad, "padding"},
                                                      {s.sep, "separator"},
                                                      {s.mask, "mask"},
                                                      {s.fim_prefix, "FIM prefix"},
                                                      {s.fim_suffix, "FIM suffix"},
                                                      {s.fim_middle, "FIM middle"}};
  for (const auto& [id, what] : ids) IWB_RETURN_IF_ERROR(check_id(id, what));
  for (TokenId id : v.end_of_generation) IWB_RETURN_IF_ERROR(check_id(id, "end-of-generation"));
  for (TokenId id : v.lstrip_tokens) IWB_RETURN_IF_ERROR(check_id(id, "lstrip"));
  for (TokenId id : v.rstrip_tokens) IWB_RETURN_IF_ERROR(check_id(id, "rstrip"));

  if (v.kind != VocabKind::Bpe && !v.merges.empty()) {
    return make_error(ErrorCode::InvalidArgument, "merges are only used by BPE vocabularies");
  }
  if (v.kind == VocabKind::Bpe && find_pre_tokenizer(v.pre) == nullptr) {
    return make_error(ErrorCode::Unsupported, "pre-tokenizer '" + v.pre + "' (tokenizer.ggml.pre) is not supported");
  }
  IWB_RETURN_IF_ERROR(require_id(v.add_bos, s.bos, "add_bos (tokenizer.ggml.add_bos_token)",
                                 "the BOS token (tokenizer.ggml.bos_token_id)"));
  IWB_RETURN_IF_ERROR(require_id(v.add_eos, s.eos, "add_eos (tokenizer.ggml.add_eos_token)",
                                 "the EOS token (tokenizer.ggml.eos_token_id)"));
  IWB_RETURN_IF_ERROR(require_id(v.add_sep, s.sep, "add_sep (tokenizer.ggml.add_sep_token)",
                                 "the separator token (tokenizer.ggml.seperator_token_id)"));
  return {};
}

}  // namespace iwb::tokenizer
