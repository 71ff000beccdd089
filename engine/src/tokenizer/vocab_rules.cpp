// llama.cpp's vocabulary conventions, kept apart from the GGUF reading: which ids are special
// by default for each tokenizer model, which pre-tokenizer turns on which behaviour, and which
// token texts mark the end of a turn.
#include "tokenizer/vocab_rules.h"

#include "tokenizer/pretokenizer_table.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace iwb::tokenizer {
namespace {

bool is_one_of(std::string_view text, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), text) != options.end();
}

// DeepSeek's turn end (V3, V3.1: its EOS, as in kEotTexts), which llama.cpp's end-of-generation
// list also has: a file that names another EOS still ends its turns there. Kimi K2's <|im_end|>,
// [EOT] and [EOS] are in kEndOfGenerationTexts.
constexpr std::string_view kDeepSeekEndOfSentence =
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

// Texts llama.cpp takes for each role when the file does not name the token.
constexpr std::string_view kEotTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPrefixTexts[] = {"<|fim_prefix|>", "<fim-prefix>",      "<fim_prefix>",
                                                "<PRE>",          "\xE2\x96\x81<PRE>", "<|code_prefix|>"};
constexpr std::string_view kFimSuffixTexts[] = {"<|fim_suffix|>", "<fim-suffix>",      "<fim_suffix>",
                                                "<SUF>",          "\xE2\x96\x81<SUF>", "<|code_suffix|>"};
constexpr std::string_view kFimMiddleTexts[] = {"<|fim_middle|>", "<fim-middle>",      "<fim_middle>",
                                                "<MID>",          "\xE2\x96\x81<MID>", "<|code_middle|>"};
// Tokens that end generation wherever they appear in a vocabulary.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    // Gemma 4: the end of a turn, and of a tool call's turn (the reply comes from the tool).
    "<eos>", "<turn|>", "<|tool_response>"};

// GLM-4.5 to 4.7 (a vocabulary with [gMASK]): a turn has no end marker, the model ends it by
// opening the next one, the user's or (after a tool call) the tool results'. llama.cpp's
// converter names them EOT and EOM (noting that <|endoftext|> as EOT never stops); a file
// converted without them, or with another EOT, still stops there.
constexpr std::string_view kGlmMarker = "[gMASK]";
constexpr std::string_view kGlmEotTexts[] = {"<|user|>"};
constexpr std::string_view kGlmEomTexts[] = {"<|observation|>"};

using TextIndex = std::unordered_map<std::string_view, TokenId>;

void mark_control(Vocab* vocab, TokenId id) { vocab->types[static_cast<size_t>(id)] = TokenType::Control; }

// Looks a role up by text when the file left it unset, trying the texts in order of
// preference; the token found becomes Control.
void find_by_text(Vocab* vocab, const TextIndex& index, TokenId* id, std::span<const std::string_view> texts) {
  if (*id != kNoToken) return;
  for (std::string_view text : texts) {
    auto it = index.find(text);
    if (it == index.end()) continue;
    *id = it->second;
    mark_control(vocab, *id);
    return;
  }
}

}  // namespace

Status apply_model_defaults(Vocab* v) {
  SpecialTokenIds& s = v->special;
  s = SpecialTokenIds{};
  if (v->model == "llama") {
    v->kind = VocabKind::Spm;
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    v->add_space_prefix = true;
    v->clean_spaces = false;
    v->add_bos = true;
    v->add_eos = false;
    return {};
  }
  if (v->model == "bert") {
    v->kind = VocabKind::WordPiece;
    s.bos = 101;
    s.unk = 100;
    s.sep = 102;
    s.pad = 0;
    s.mask = 103;
    v->add_space_prefix = false;
    v->clean_spaces = true;
    v->add_bos = true;
    v->add_eos = false;
    v->add_sep = true;
    v->lowercase = true;
    v->strip_accents = true;
    return {};
  }
  if (v->model == "gpt2" || v->model == "gemma4") {
    v->kind = VocabKind::Bpe;
    if (v->model == "gemma4") {
      // SPM-style BPE: merges over raw UTF-8 with ▁ for spaces. The file names every special
      // id and no pre-tokenizer; llama.cpp always uses its "gemma4" one.
      v->pre = "gemma4";
    } else {
      s.bos = 11;  // llama.cpp's historical default for BPE files without ids
      s.eos = 11;
    }
    const PreTokenizerFamily* family = find_pre_tokenizer(v->pre);
    if (family == nullptr) {
      return make_error(ErrorCode::Unsupported, "pre-tokenizer '" + v->pre + "' (tokenizer.ggml.pre) is not supported");
    }
    v->add_space_prefix = false;
    v->clean_spaces = family->clean_spaces;
    v->ignore_merges = family->ignore_merges;
    v->add_bos = family->add_bos.value_or(false);
    v->add_eos = false;
    v->add_sep = family->add_sep;
    if (!family->has_bos) s.bos = kNoToken;
    return {};
  }
  if (v->model == "no_vocab" || v->model == "none") {
    return make_error(ErrorCode::Unsupported,
                      "the model has no vocabulary (tokenizer.ggml.model = '" + v->model + "')");
  }
  return make_error(ErrorCode::Unsupported,
                    "tokenizer model '" + v->model +
                        "' (tokenizer.ggml.model) is not supported; supported: llama, gpt2, gemma4, bert");
}

void apply_text_rules(Vocab* v, std::string_view general_name) {
  if (v->types.size() != v->tokens.size()) return;  // validate_vocab reports this
  SpecialTokenIds& s = v->special;
  TextIndex index;
  index.reserve(v->tokens.size());
  for (size_t i = 0; i < v->tokens.size(); ++i) index.emplace(v->tokens[i], static_cast<TokenId>(i));
  const bool is_glm = index.contains(kGlmMarker);
  if (is_glm) {
    find_by_text(v, index, &s.eot, kGlmEotTexts);
    find_by_text(v, index, &s.eom, kGlmEomTexts);
  }
  find_by_text(v, index, &s.eot, kEotTexts);
  find_by_text(v, index, &s.eom, kEomTexts);
  find_by_text(v, index, &s.fim_prefix, kFimPrefixTexts);
  find_by_text(v, index, &s.fim_suffix, kFimSuffixTexts);
  find_by_text(v, index, &s.fim_middle, kFimMiddleTexts);

  std::unordered_set<TokenId> eog;
  for (std::string_view text : kEndOfGenerationTexts) {
    auto it = index.find(text);
    if (it == index.end()) continue;
    eog.insert(it->second);
    mark_control(v, it->second);
  }
  if (const auto it = index.find(kDeepSeekEndOfSentence); it != index.end()) {
    eog.insert(it->second);
    mark_control(v, it->second);
  }
  for (TokenId id : {s.eos, s.eot, s.eom}) {
    if (id != kNoToken) eog.insert(id);
  }
  if (is_glm) {
    for (const std::string_view text : {kGlmEotTexts[0], kGlmEomTexts[0]}) {
      if (const auto it = index.find(text); it != index.end()) {
        eog.insert(it->second);
        mark_control(v, it->second);
      }
    }
  }
  // gpt-oss style vocabularies: with <|return|> and <|call|> present, <|end|> only ends a
  // message inside a turn, so it must not stop generation.
  auto find_text = [&](std::string_view text) -> TokenId {
    auto it = index.find(text);
    return it != index.end() && eog.count(it->second) != 0 ? it->second : kNoToken;
  };
  const TokenId end_id = find_text("<|end|>");
  if (end_id != kNoToken && find_text("<|return|>") != kNoToken && find_text("<|call|>") != kNoToken) {
    eog.erase(end_id);
    v->types[static_cast<size_t>(end_id)] = TokenType::UserDefined;
  }
  v->end_of_generation.assign(eog.begin(), eog.end());
  std::sort(v->end_of_generation.begin(), v->end_of_generation.end());

  // Phi-3's special tokens swallow the whitespace after them (its HF tokenizer's rstrip).
  std::string name(general_name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    v->rstrip_tokens.clear();
    for (size_t i = 0; i < v->tokens.size(); ++i) {
      const TokenType t = v->types[i];
      const std::string& text = v->tokens[i];
      const bool is_special = t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
      if ((is_special || text == "</s>") && !is_one_of(text, {"<unk>", "<s>", "<|endoftext|>"})) {
        v->rstrip_tokens.push_back(static_cast<TokenId>(i));
      }
    }
  }
}

}  // namespace iwb::tokenizer
