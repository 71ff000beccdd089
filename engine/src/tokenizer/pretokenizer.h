// Splits text into pre-tokens with a family's regex list, using PCRE2 (UTF + UCP). Each regex
// splits every piece the previous one produced; matches and the text between them both become
// pieces, as in llama.cpp's unicode_regex_split.
#pragma once

#include "iwb/engine/status.h"

#include <memory>
#include <string_view>
#include <vector>

namespace iwb::tokenizer {

class CompiledRegex;

class PreTokenizer {
 public:
  // Compiles the regexes of the family named by tokenizer.ggml.pre.
  static Result<PreTokenizer> create(std::string_view pre_name);
  // Compiles an explicit regex list (tests, families not in the table).
  static Result<PreTokenizer> from_regexes(const std::vector<std::string_view>& regexes);

  // `text` must be valid UTF-8 (see utf8::sanitize). Pieces point into `text`.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  std::vector<std::shared_ptr<const CompiledRegex>> m_regexes;
};

}  // namespace iwb::tokenizer
