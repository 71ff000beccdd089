// PCRE2-backed pre-tokenizer. Compiled patterns are shared and read-only, so one PreTokenizer
// serves many threads; match data is allocated per split call.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include "tokenizer/pretokenizer_table.h"
#include "tokenizer/utf8.h"

#include <pcre2.h>

#include <string>

namespace iwb::tokenizer {

class CompiledRegex {
 public:
  explicit CompiledRegex(pcre2_code* code) : m_code(code) {}
  ~CompiledRegex() { pcre2_code_free(m_code); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;
  const pcre2_code* code() const { return m_code; }

 private:
  pcre2_code* m_code;
};

namespace {

Result<std::shared_ptr<const CompiledRegex>> compile(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // DOLLAR_ENDONLY: "$" means the end of the piece only, as in ECMAScript (llama.cpp's engine).
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Status(ErrorCode::InvalidArgument,
                  "pre-tokenizer regex does not compile at offset " + std::to_string(error_offset) +
                      ": " + reinterpret_cast<const char*>(message) + " (regex: " + std::string(pattern) + ")");
  }
  // JIT is an optimisation: without it (unsupported CPU, no executable memory) the
  // interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::shared_ptr<const CompiledRegex>(std::make_shared<CompiledRegex>(code));
}

class MatchData {
 public:
  explicit MatchData(const pcre2_code* code) : m_data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(m_data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* get() const { return m_data; }

 private:
  pcre2_match_data* m_data;
};

// Splits one piece with one regex, appending the resulting pieces to `out`.
void split_piece(const pcre2_code* code, pcre2_match_data* match, std::string_view piece,
                 std::vector<std::string_view>* out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  const size_t length = piece.size();
  size_t last_end = 0;  // end of the text already emitted
  size_t search_at = 0;
  uint32_t extra_options = 0;
  while (search_at <= length) {
    const int rc = pcre2_match(code, subject, length, search_at, PCRE2_NO_UTF_CHECK | extra_options,
                               match, nullptr);
    if (rc < 0) {
      if (extra_options != 0 && search_at < length) {
        // No non-empty match at an empty match's position: move one character on.
        size_t next = search_at;
        utf8::decode(piece, &next);
        search_at = next;
        extra_options = 0;
        continue;
      }
      break;  // no more matches (or a match error: the rest stays one piece)
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin > last_end) out->push_back(piece.substr(last_end, begin - last_end));
    if (end > begin) {
      out->push_back(piece.substr(begin, end - begin));
      last_end = end;
      search_at = end;
      extra_options = 0;
    } else {
      // An empty match only marks a split point; retry here asking for a non-empty match.
      last_end = begin;
      search_at = begin;
      if (begin >= length) break;
      extra_options = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
    }
  }
  if (last_end < length) out->push_back(piece.substr(last_end));
}

}  // namespace

Result<PreTokenizer> PreTokenizer::create(std::string_view pre_name) {
  const PreTokenizerFamily* family = find_pre_tokenizer(pre_name);
  if (family == nullptr) {
    return Status(ErrorCode::Unsupported, "unknown pre-tokenizer '" + std::string(pre_name) + "'");
  }
  return from_regexes(family->regexes);
}

Result<PreTokenizer> PreTokenizer::from_regexes(const std::vector<std::string_view>& regexes) {
  PreTokenizer pre;
  for (std::string_view pattern : regexes) {
    auto compiled = compile(pattern);
    if (!compiled) return compiled.status();
    pre.m_regexes.push_back(std::move(compiled.value()));
  }
  return pre;
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& regex : m_regexes) {
    MatchData match(regex->code());
    if (match.get() == nullptr) continue;  // out of memory: leave the pieces as they are
    next.clear();
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) split_piece(regex->code(), match.get(), piece, &next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace iwb::tokenizer
