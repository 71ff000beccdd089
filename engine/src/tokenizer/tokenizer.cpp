// Tokenizer: builds the shared tables from a Vocab, partitions special tokens out of the text,
// dispatches each text fragment to the SPM, BPE or WordPiece encoder, and decodes ids to bytes.
#include "iwb/engine/tokenizer/tokenizer.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer_impl.h"

#include <cstdio>

namespace iwb::tokenizer {

void replace_all(std::string* text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text->size());
  size_t at = 0;
  while (true) {
    const size_t found = text->find(from, at);
    if (found == std::string::npos) break;
    out.append(*text, at, found - at);
    out.append(to);
    at = found + from.size();
  }
  out.append(*text, at, std::string::npos);
  text->swap(out);
}

namespace {

// "<0x0A>" -> 0x0A; nullopt for any other text.
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]);
  const int lo = hex(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

// The bytes of one token with special tokens rendered (llama.cpp's token_to_piece).
// `is_byte_level`: a BPE token's text is in GPT-2's byte alphabet (else ▁ stands for a space).
std::string make_piece(const Vocab& v, size_t id, bool is_byte_level) {
  const std::string& text = v.tokens[id];
  switch (v.types[id]) {
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::UserDefined: return text;
    case TokenType::Byte:
      if (auto b = parse_byte_token(text)) return std::string(1, static_cast<char>(*b));
      return text;
    case TokenType::Normal:
      if (v.kind == VocabKind::Bpe && is_byte_level) return unicode_text_to_bytes(text);
      {
        std::string piece = text;
        replace_all(&piece, kSpmSpace, " ");
        return piece;
      }
    case TokenType::Unused:
    case TokenType::Undefined: return {};
  }
  return {};
}

// llama.cpp's detokenizer cleanup: no space before ?!., ; " ' " joined; " 's", " 'm", " 're",
// " 've" attached to the previous word.
std::string clean_up_spaces(const std::string& in) {
  std::string a;
  a.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') && !a.empty()) a.pop_back();
    a.push_back(x);
  }
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      if (!b.empty()) b.pop_back();
      b.push_back(x);
      ++i;  // skip the space after
      continue;
    }
    b.push_back(x);
  }
  std::string c;
  c.reserve(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) {
        if (!c.empty()) c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

}  // namespace

int TokenizerImpl::merge_rank(std::string_view left, std::string_view right, std::string* scratch) const {
  scratch->assign(left);
  scratch->push_back(' ');
  scratch->append(right);
  auto it = m_merge_ranks.find(std::string_view(*scratch));
  return it == m_merge_ranks.end() ? -1 : it->second;
}

Result<std::shared_ptr<const TokenizerImpl>> TokenizerImpl::build(Vocab vocab) {
  IWB_RETURN_IF_ERROR(validate_vocab(vocab));
  auto impl = std::make_shared<TokenizerImpl>();
  const size_t n = vocab.tokens.size();
  if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
  if (vocab.types.empty()) vocab.types.assign(n, TokenType::Normal);
  impl->vocab = std::move(vocab);
  const Vocab& v = impl->vocab;

  impl->m_token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    impl->m_token_to_id.emplace(v.tokens[i], static_cast<TokenId>(i));
    impl->max_token_bytes = std::max(impl->max_token_bytes, v.tokens[i].size());
  }
  impl->m_merge_ranks.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    // A line without a separating space cannot name a pair; it keeps its rank slot only.
    if (v.merges[i].find(' ', 1) == std::string::npos) continue;
    impl->m_merge_ranks.emplace(v.merges[i], static_cast<int>(i));
  }
  if (v.kind == VocabKind::Bpe) {
    impl->bpe_family = find_pre_tokenizer(v.pre);  // validate_vocab made sure there is one
    auto pre = PreTokenizer::create(v.pre);
    if (!pre) return pre.status();
    impl->pre_tokenizer = std::move(pre.value());
  }
  const bool is_byte_level = impl->bpe_family != nullptr && impl->bpe_family->is_byte_level;
  for (int b = 0; b < 256; ++b) {
    TokenId id = kNoToken;
    if (is_byte_level) {
      id = impl->find(byte_to_unicode(static_cast<uint8_t>(b)));
    } else {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      id = impl->find(name);
      // SPM also takes the byte itself as a token; SPM-style BPE knows only <0xNN>.
      if (id == kNoToken && v.kind != VocabKind::Bpe) id = impl->find(std::string(1, static_cast<char>(b)));
    }
    impl->m_byte_tokens[static_cast<size_t>(b)] = id;
  }
  impl->specials = collect_special_tokens(v);
  impl->pieces.resize(n);
  impl->is_hidden_special.resize(n);
  for (size_t i = 0; i < n; ++i) {
    impl->pieces[i] = make_piece(v, i, is_byte_level);
    const TokenType t = v.types[i];
    impl->is_hidden_special[i] = t == TokenType::Control || t == TokenType::Unknown;
  }
  impl->end_of_generation.insert(v.end_of_generation.begin(), v.end_of_generation.end());
  // The vocabulary's rules already hold eos/eot/eom, less gpt-oss's <|end|> (an eot by text that
  // only closes a message): adding them again here would make <|end|> stop generation.
  if (v.end_of_generation.empty()) {
    for (TokenId id : {v.special.eos, v.special.eot, v.special.eom}) {
      if (id != kNoToken) impl->end_of_generation.insert(id);
    }
  }
  return std::shared_ptr<const TokenizerImpl>(std::move(impl));
}

Result<Tokenizer> Tokenizer::create(Vocab vocab) {
  auto impl = TokenizerImpl::build(std::move(vocab));
  if (!impl) return impl.status();
  return Tokenizer(std::move(impl.value()));
}

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto vocab = vocab_from_gguf(file);
  if (!vocab) return vocab.status();
  return create(std::move(vocab.value()));
}

const Vocab& Tokenizer::vocab() const { return m_impl->vocab; }
size_t Tokenizer::num_tokens() const { return m_impl->vocab.tokens.size(); }

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const {
  const TokenId id = m_impl->find(text);
  if (id == kNoToken) return std::nullopt;
  return id;
}

bool Tokenizer::is_end_of_generation(TokenId id) const { return m_impl->end_of_generation.count(id) != 0; }

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const TokenizerImpl& tok = *m_impl;
  const Vocab& v = tok.vocab;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  const std::vector<Fragment> fragments = partition_special(text, tok.specials, options.parse_special);

  const bool is_wordpiece = v.kind == VocabKind::WordPiece;
  // WordPiece always frames the text with [CLS] ... [SEP]; the others follow the vocab's flags.
  if (options.add_bos && (v.add_bos || is_wordpiece) && v.special.bos != kNoToken) out.push_back(v.special.bos);

  bool is_prev_special = true;  // SPM: the first text fragment, and any after a token, gets the prefix
  for (const Fragment& fragment : fragments) {
    if (!fragment.is_text()) {
      out.push_back(fragment.token);
      is_prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(fragment.offset, fragment.length);
    switch (v.kind) {
      case VocabKind::Spm: {
        std::string escaped;
        if (v.add_space_prefix && is_prev_special) escaped.push_back(' ');
        escaped.append(piece);
        replace_all(&escaped, " ", kSpmSpace);
        spm_encode(tok, escaped, &out);
        break;
      }
      case VocabKind::Bpe: bpe_encode(tok, piece, &out); break;
      case VocabKind::WordPiece: wordpiece_encode(tok, piece, &out); break;
    }
    is_prev_special = false;
  }

  if (options.add_bos) {
    if (v.add_eos && v.special.eos != kNoToken) out.push_back(v.special.eos);
    if ((v.add_sep || is_wordpiece) && v.special.sep != kNoToken) out.push_back(v.special.sep);
  }
  return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (!is_valid(id)) return {};
  const auto i = static_cast<size_t>(id);
  if (!render_special && m_impl->is_hidden_special[i]) return {};
  return m_impl->pieces[i];
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  const TokenizerImpl& tok = *m_impl;
  std::string out;
  // The space add_space_prefix put before the text is dropped from the first piece that has
  // text (a leading BOS that renders as nothing does not count).
  bool is_space_pending = options.strip_leading_space && tok.vocab.add_space_prefix;
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, options.render_special);
    if (piece.empty()) continue;
    if (is_space_pending && piece[0] == ' ') piece.erase(0, 1);
    is_space_pending = false;
    out += piece;
  }
  if (options.clean_spaces && tok.vocab.clean_spaces) return clean_up_spaces(out);
  return out;
}

}  // namespace iwb::tokenizer
