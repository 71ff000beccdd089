// llama2.c tokenizer file reader: int32 max_token_length, then per token f32 score, int32
// length and the bytes; pieces are turned into the SentencePiece form GGUF expects.
#include "iwb/engine/convert/llama2c.h"

#include "gguf/mapped_file.h"

#include <cmath>
#include <cstring>
#include <string>

namespace iwb::convert {
namespace {

// A token longer than this is a corrupt length field, not a real piece.
constexpr int32_t kMaxTokenLength = 1 << 16;

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
}

// "<0x0A>": SentencePiece's byte-fallback pieces, kept verbatim.
bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && is_hex_digit(s[3]) && is_hex_digit(s[4]) && s[5] == '>';
}

// llama2.c's export (tokenizer.py) replaced SentencePiece's U+2581 with a plain space; GGUF
// and every SentencePiece tokenizer (ours and llama.cpp's) expect U+2581 back. llama.cpp's
// examples/convert-llama2c-to-ggml does the same in llama_escape_whitespaces().
std::string restore_sentencepiece_spaces(const std::string& raw) {
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) {
    if (c == ' ') out += "\xE2\x96\x81";
    else out += c;
  }
  return out;
}

// Token type and GGUF piece of token `id`. The special ids are fixed by llama2.c's tokenizer
// training (unk 0, bos 1, eos 2); their stored text ("\n<s>\n") is an export artefact, so
// they get SentencePiece's names, as llama.cpp's converter gives them.
void classify(int64_t id, Llama2cToken* t) {
  if (id == kLlama2cUnkId) {
    t->piece = "<unk>";
    t->type = TokenType::Unknown;
  } else if (id == kLlama2cBosId) {
    t->piece = "<s>";
    t->type = TokenType::Control;
  } else if (id == kLlama2cEosId) {
    t->piece = "</s>";
    t->type = TokenType::Control;
  } else if (t->raw.empty()) {
    // An empty NORMAL piece would match everywhere; llama.cpp marks these CONTROL too.
    t->piece.clear();
    t->type = TokenType::Control;
  } else if (is_byte_piece(t->raw)) {
    t->piece = t->raw;
    t->type = TokenType::Byte;
  } else {
    t->piece = restore_sentencepiece_spaces(t->raw);
    t->type = TokenType::Normal;
  }
}

}  // namespace

Result<Llama2cTokenizer> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, int64_t expected_vocab_size) {
  if (expected_vocab_size <= kLlama2cEosId) {
    return make_error(ErrorCode::InvalidArgument, "a llama2.c vocabulary needs at least 3 tokens (unk, bos, eos), "
                                                  "the checkpoint says " + std::to_string(expected_vocab_size));
  }
  if (bytes.size() < sizeof(int32_t)) {
    return make_error(ErrorCode::CorruptFile, "tokenizer has " + std::to_string(bytes.size()) +
                                                  " bytes, too short for its max_token_length field");
  }
  Llama2cTokenizer tok;
  std::memcpy(&tok.max_token_length, bytes.data(), sizeof(int32_t));
  if (tok.max_token_length <= 0 || tok.max_token_length > kMaxTokenLength) {
    return make_error(ErrorCode::CorruptFile, "tokenizer max_token_length is " + std::to_string(tok.max_token_length) +
                                                  ", expected 1.." + std::to_string(kMaxTokenLength) +
                                                  " (not a llama2.c tokenizer file?)");
  }

  // Read every record to the end, so a count mismatch can say how many tokens the file has.
  size_t pos = sizeof(int32_t);
  while (pos < bytes.size()) {
    const int64_t id = static_cast<int64_t>(tok.tokens.size());
    const std::string where = "tokenizer token " + std::to_string(id) + " at byte " + std::to_string(pos);
    if (id >= expected_vocab_size) {
      return make_error(ErrorCode::CorruptFile,
                        "tokenizer holds more than the checkpoint's " + std::to_string(expected_vocab_size) +
                            " tokens: " + std::to_string(bytes.size() - pos) + " bytes remain after token " +
                            std::to_string(expected_vocab_size - 1) + " (tokenizer of another model?)");
    }
    if (bytes.size() - pos < 8) {
      return make_error(ErrorCode::CorruptFile, where + ": record is cut short (needs 8 bytes for score and length, " +
                                                    std::to_string(bytes.size() - pos) + " remain)");
    }
    Llama2cToken t;
    int32_t length = 0;
    std::memcpy(&t.score, bytes.data() + pos, sizeof(float));
    std::memcpy(&length, bytes.data() + pos + 4, sizeof(int32_t));
    pos += 8;
    if (!std::isfinite(t.score)) return make_error(ErrorCode::CorruptFile, where + ": score is not finite");
    if (length < 0 || length > tok.max_token_length) {
      return make_error(ErrorCode::CorruptFile, where + ": length " + std::to_string(length) + " outside 0.." +
                                                    std::to_string(tok.max_token_length) + " (max_token_length)");
    }
    if (bytes.size() - pos < static_cast<size_t>(length)) {
      return make_error(ErrorCode::CorruptFile, where + ": needs " + std::to_string(length) + " bytes of text, " +
                                                    std::to_string(bytes.size() - pos) + " remain (file truncated?)");
    }
    t.raw.assign(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<size_t>(length));
    pos += static_cast<size_t>(length);
    classify(id, &t);
    tok.tokens.push_back(std::move(t));
  }
  if (static_cast<int64_t>(tok.tokens.size()) != expected_vocab_size) {
    return make_error(ErrorCode::CorruptFile, "tokenizer holds " + std::to_string(tok.tokens.size()) +
                                                  " tokens, the checkpoint's vocab_size is " +
                                                  std::to_string(expected_vocab_size) + " (tokenizer of another model?)");
  }
  return tok;
}

Result<Llama2cTokenizer> load_llama2c_tokenizer(const std::string& path, int64_t expected_vocab_size) {
  auto mapping = gguf::MappedFile::open(path);
  if (!mapping) return mapping.status();
  auto tok = parse_llama2c_tokenizer((*mapping)->bytes(), expected_vocab_size);
  if (!tok) return make_error(tok.status().code(), "'" + path + "': " + tok.error_message());
  return tok;
}

}  // namespace iwb::convert
