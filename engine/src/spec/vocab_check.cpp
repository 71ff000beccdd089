// The draft model must speak the target's vocabulary: the same text for every token id, or
// its guesses would mean other words. The first difference is named.
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <algorithm>

namespace iwb::spec {
namespace {

// Token text for a message: quoted, control bytes escaped, long texts cut.
std::string shown(const std::string& text) {
  std::string out = "'";
  for (const char ch : text.substr(0, 40)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  if (text.size() > 40) out += "...";
  return out + "'";
}

}  // namespace

Status check_vocabulary_match(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  const std::vector<std::string>& a = target.vocab().tokens;
  const std::vector<std::string>& b = draft.vocab().tokens;
  const size_t common = std::min(a.size(), b.size());
  for (size_t id = 0; id < common; ++id) {
    if (a[id] != b[id]) {
      return make_error(ErrorCode::InvalidArgument,
                        "the draft model's vocabulary differs from the target's at token " + std::to_string(id) +
                            ": the target has " + shown(a[id]) + ", the draft " + shown(b[id]));
    }
  }
  if (a.size() != b.size()) {
    const bool is_target_longer = a.size() > b.size();
    return make_error(ErrorCode::InvalidArgument,
                      "the draft model's vocabulary differs from the target's at token " + std::to_string(common) +
                          ": the target has " + (is_target_longer ? shown(a[common]) : std::string("no such token")) +
                          ", the draft " + (is_target_longer ? std::string("no such token") : shown(b[common])) + " (" +
                          std::to_string(a.size()) + " against " + std::to_string(b.size()) + " tokens)");
  }
  return {};
}

}  // namespace iwb::spec
