// `iwb tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--no-bos] [--ids] [--parse-special]`: the ids
// and pieces a model's own tokenizer makes of a text.
#include "commands.h"
#include "options/option_groups.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  std::string model;
  PromptOptions text;
  bool is_bos_skipped = false;
  bool parse_special = false;
  bool ids_only = false;
};

// Returns -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  OptionTable t("tokenize", "-m MODEL.gguf (-p TEXT | -f FILE) [options]",
                "The ids and pieces a model's own tokenizer makes of a text.");
  add_model_option(t, &o->model, "GGUF file with tokenizer metadata (a vocab-only file is enough)");
  add_prompt_options(t, &o->text, "text to tokenize");
  t.add({.names = {"--no-bos"}, .help = "do not add the BOS/EOS tokens the model asks for", .destination = &o->is_bos_skipped});
  t.add({.names = {"--parse-special"},
         .help = "turn control-token text such as <|im_start|> into single tokens",
         .destination = &o->parse_special});
  t.add({.names = {"--ids"}, .help = "print only the ids, space separated, on one line", .destination = &o->ids_only});
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (o->text.text.has_value() == !o->text.file.empty()) return report_usage_error(t, "give exactly one of -p TEXT or -f FILE");
  return -1;
}

// A piece shown on one line: control bytes and bytes that are not complete UTF-8 as escapes,
// so a lone <0xE6> byte token or a newline stays visible.
std::string escape_piece(const std::string& piece) {
  std::string out;
  char hex[8];
  for (size_t i = 0; i < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[i]);
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\\') { out += "\\\\"; ++i; continue; }
    if (c < 0x20 || c == 0x7F) {
      std::snprintf(hex, sizeof(hex), "\\x%02X", c);
      out += hex;
      ++i;
      continue;
    }
    if (c < 0x80) { out.push_back(static_cast<char>(c)); ++i; continue; }
    size_t length = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool is_complete = length > 0 && i + length <= piece.size();
    for (size_t k = 1; is_complete && k < length; ++k) {
      is_complete = (static_cast<unsigned char>(piece[i + k]) & 0xC0) == 0x80;
    }
    if (is_complete) {
      out.append(piece, i, length);
      i += length;
    } else {
      std::snprintf(hex, sizeof(hex), "\\x%02X", c);
      out += hex;
      ++i;
    }
  }
  return out;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;

  std::string text = o.text.text.value_or("");
  if (!o.text.file.empty() && !read_file(o.text.file, &text)) {
    std::fprintf(stderr, "iwb tokenize: cannot read '%s'\n", o.text.file.c_str());
    return 1;
  }
  auto file = gguf::GgufFile::open(o.model);
  if (!file) {
    std::fprintf(stderr, "iwb tokenize: %s: %s\n", o.model.c_str(), file.error_message().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) {
    std::fprintf(stderr, "iwb tokenize: %s: %s\n", o.model.c_str(), tok.error_message().c_str());
    return 1;
  }

  const std::vector<tokenizer::TokenId> ids =
      tok->encode(text, {.add_bos = !o.is_bos_skipped, .parse_special = o.parse_special});
  if (o.ids_only) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line.push_back(' ');
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
    return 0;
  }
  std::printf("%8s  %s\n", "id", "piece");
  for (tokenizer::TokenId id : ids) {
    std::printf("%8d  '%s'\n", id, escape_piece(tok->token_to_piece(id, true)).c_str());
  }
  std::printf("%zu tokens (%s, %zu in vocabulary)\n", ids.size(),
              std::string(tokenizer::vocab_kind_name(tok->vocab().kind)).c_str(), tok->num_tokens());
  return 0;
}

}  // namespace iwb::cli
