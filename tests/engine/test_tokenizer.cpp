// Tokenizer behaviour on small vocabularies built in code (and, where present, the shared
// vocab files): BOS/EOS, special-token parsing, byte fallback, decoding, streaming of split
// UTF-8, and the errors a broken vocabulary or GGUF must produce.
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/tokenizer/streaming_detokenizer.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <QFile>
#include <QTest>

#include <cstdio>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::tokenizer;

namespace {

const std::string kSpace = "\xE2\x96\x81";  // ▁

void add(Vocab* v, const std::string& text, TokenType type = TokenType::Normal, float score = -10.0f) {
  v->tokens.push_back(text);
  v->types.push_back(type);
  v->scores.push_back(score);
}

TokenId id_of(const Vocab& v, const std::string& text) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == text) return static_cast<TokenId>(i);
  }
  return kNoToken;
}

// A small SentencePiece vocabulary: "hello" is reachable only through scored merges.
Vocab toy_spm(bool with_bytes = true) {
  Vocab v;
  v.kind = VocabKind::Spm;
  v.model = "llama";
  add(&v, "<unk>", TokenType::Unknown, 0);
  add(&v, "<s>", TokenType::Control, 0);
  add(&v, "</s>", TokenType::Control, 0);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      add(&v, name, TokenType::Byte, 0);
    }
  }
  for (const char* c : {"h", "e", "l", "o", "w", "r", "d", "a", "b"}) add(&v, c);
  add(&v, kSpace);
  add(&v, "ll", TokenType::Normal, -1.0f);
  add(&v, "he", TokenType::Normal, -2.0f);
  add(&v, "hell", TokenType::Normal, -0.5f);
  add(&v, "hello", TokenType::Normal, -0.4f);
  add(&v, kSpace + "hello", TokenType::Normal, -0.1f);
  add(&v, kSpace + "h", TokenType::Normal, -3.0f);  // loses to "he" + "ll" by score
  add(&v, "<|im_start|>", TokenType::Control, 0);
  add(&v, "<tool>", TokenType::UserDefined, 0);
  v.special.bos = 1;
  v.special.eos = 2;
  v.special.unk = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

Tokenizer make(Vocab v) {
  auto t = Tokenizer::create(std::move(v));
  if (!t) qFatal("toy vocabulary rejected: %s", t.error_message().c_str());
  return std::move(t.value());
}

std::vector<uint8_t> gguf_bytes(const gguf::GgufWriter& writer) {
  auto bytes = writer.write_bytes();
  if (!bytes) qFatal("GgufWriter failed: %s", bytes.error_message().c_str());
  return std::move(bytes.value());
}

// A minimal llama-style GGUF vocabulary; callers break one thing in it.
gguf::GgufWriter small_gguf() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array({"<unk>", "<s>", "</s>", kSpace, "a"}));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array({0, 0, 0, -1, -2}));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array({2, 3, 3, 1, 1}));
  return w;
}

Result<Vocab> vocab_of(const gguf::GgufWriter& writer) {
  auto file = gguf::GgufFile::from_bytes(gguf_bytes(writer));
  if (!file) qFatal("test GGUF does not parse: %s", file.error_message().c_str());
  return vocab_from_gguf(**file);
}

QString shared_vocab(const char* name) {
  return QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf/" + QString::fromLatin1(name);
}

std::optional<Tokenizer> load_shared(const char* name) {
  auto file = gguf::GgufFile::open(shared_vocab(name).toStdString());
  if (!file) return std::nullopt;
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok) return std::nullopt;
  return std::move(tok.value());
}

// A small Gemma 4 vocabulary (tokenizer.ggml.model "gemma4"): SPM-style BPE over raw UTF-8,
// spaces as ▁, <0xNN> byte tokens, "\n\n\n" a token that no merge reaches.
gguf::GgufWriter gemma4_gguf() {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  std::vector<int32_t> types = {3, 3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(6);
  }
  for (const std::string& text : {kSpace,
                                  std::string("h"),
                                  std::string("e"),
                                  std::string("l"),
                                  std::string("o"),
                                  std::string("w"),
                                  std::string("r"),
                                  std::string("d"),
                                  std::string("\n"),
                                  std::string("\n\n"),
                                  std::string("\n\n\n"),
                                  std::string("\t"),
                                  kSpace + kSpace,
                                  std::string("he"),
                                  std::string("ll"),
                                  std::string("hell"),
                                  std::string("hello"),
                                  kSpace + "hello",
                                  kSpace + "w",
                                  kSpace + "wo"}) {
    tokens.push_back(text);
    types.push_back(1);
  }
  tokens.push_back("</s>");  // ordinary text in Gemma 4
  types.push_back(1);
  for (const char* text : {"<|turn>", "<turn|>"}) {
    tokens.push_back(text);
    types.push_back(3);
  }
  for (const char* text : {"<|tool_response>", "<|\"|>"}) {
    tokens.push_back(text);
    types.push_back(4);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  gguf::GgufWriter w;
  w.set_string("general.architecture", "gemma4");
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  w.set("tokenizer.ggml.merges",
        gguf::Value::string_array({"h e", "l l", "he ll", "hell o", kSpace + " hello", kSpace + " w", kSpace + "w o",
                                   kSpace + " " + kSpace, "\n \n"}));
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_u32("tokenizer.ggml.unknown_token_id", 3);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);  // llama.cpp adds Gemma 4's BOS anyway
  return w;
}

bool is_valid_utf8(const std::string& s) { return QString::fromUtf8(s).toUtf8() == QByteArray::fromStdString(s); }

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private slots:
  void spm_merges_by_score_and_adds_bos();
  void spm_byte_fallback_and_unknown();
  void special_tokens_parsed_only_on_request();
  void user_defined_tokens_always_split();
  void decode_strips_prefix_space_and_hides_control();
  void end_of_generation();
  void glm_turn_openers_end_generation();
  void deepseek_and_kimi_turn_ends_end_generation();
  void bpe_byte_level_merges();
  void streaming_holds_back_partial_utf8();
  void streaming_emoji_as_byte_tokens();
  void streaming_chinese_in_bpe();
  void gemma4_merges_raw_utf8_with_spaces_as_spm();
  void gemma4_byte_fallback_and_newline_runs();
  void gemma4_special_tokens_and_end_of_generation();
  void vocab_struct_errors();
  void gguf_vocab_errors();
  void gguf_defaults_and_keys();
};

void TestTokenizer::spm_merges_by_score_and_adds_bos() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  const TokenId hello = id_of(v, kSpace + "hello");
  QCOMPARE(tok.encode("hello"), (std::vector<TokenId>{1, hello}));
  QCOMPARE(tok.encode("hello", {.add_bos = false}), (std::vector<TokenId>{hello}));
  QCOMPARE(tok.encode("", {.add_bos = true}), (std::vector<TokenId>{1}));
  QVERIFY(tok.encode("", {.add_bos = false}).empty());

  Vocab no_bos = toy_spm();
  no_bos.add_bos = false;
  no_bos.add_eos = true;
  QCOMPARE(make(no_bos).encode("hello"), (std::vector<TokenId>{hello, 2}));
}

void TestTokenizer::spm_byte_fallback_and_unknown() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  // "é" is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xA9>.
  const std::vector<TokenId> ids = tok.encode("\xC3\xA9", {.add_bos = false});
  QCOMPARE(ids, (std::vector<TokenId>{id_of(v, kSpace), id_of(v, "<0xC3>"), id_of(v, "<0xA9>")}));
  QCOMPARE(tok.decode(ids), std::string("\xC3\xA9"));
  QCOMPARE(tok.token_to_piece(id_of(v, "<0x0A>")), std::string("\n"));

  const Vocab bare = toy_spm(false);
  const std::vector<TokenId> unk = make(bare).encode("\xC3\xA9", {.add_bos = false});
  QCOMPARE(unk, (std::vector<TokenId>{id_of(bare, kSpace), 0}));
}

void TestTokenizer::special_tokens_parsed_only_on_request() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  const TokenId im_start = id_of(v, "<|im_start|>");
  const TokenId hello = id_of(v, kSpace + "hello");
  // Text after a special token gets the space prefix again, as in llama.cpp.
  QCOMPARE(tok.encode("<|im_start|>hello", {.add_bos = false, .parse_special = true}),
           (std::vector<TokenId>{im_start, hello}));
  const std::vector<TokenId> plain = tok.encode("<|im_start|>hello", {.add_bos = false, .parse_special = false});
  QVERIFY(std::find(plain.begin(), plain.end(), im_start) == plain.end());
  QCOMPARE(tok.decode(plain), std::string("<|im_start|>hello"));
  // "</s>" typed as text is the EOS only when parsing specials.
  QCOMPARE(tok.encode("</s>", {.add_bos = false, .parse_special = true}), (std::vector<TokenId>{2}));
  QVERIFY(tok.encode("</s>", {.add_bos = false}).size() > 1);
}

void TestTokenizer::user_defined_tokens_always_split() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  const TokenId tool = id_of(v, "<tool>");
  for (bool parse : {false, true}) {
    const std::vector<TokenId> ids = tok.encode("a<tool>b", {.add_bos = false, .parse_special = parse});
    QCOMPARE(ids, (std::vector<TokenId>{id_of(v, kSpace), id_of(v, "a"), tool, id_of(v, kSpace), id_of(v, "b")}));
  }
}

void TestTokenizer::decode_strips_prefix_space_and_hides_control() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  const std::vector<TokenId> ids = tok.encode("hello");  // <s> ▁hello
  QCOMPARE(tok.decode(ids), std::string("hello"));
  QCOMPARE(tok.decode(ids, {.strip_leading_space = false}), std::string(" hello"));
  QCOMPARE(tok.decode(ids, {.render_special = true}), std::string("<s> hello"));
  QCOMPARE(tok.token_to_piece(1), std::string());
  QCOMPARE(tok.token_to_piece(1, true), std::string("<s>"));
  QCOMPARE(tok.token_to_piece(-5), std::string());
  QCOMPARE(tok.token_to_piece(static_cast<TokenId>(v.tokens.size())), std::string());
}

void TestTokenizer::end_of_generation() {
  const Tokenizer tok = make(toy_spm());
  QVERIFY(tok.is_end_of_generation(2));
  QVERIFY(!tok.is_end_of_generation(1));
  QVERIFY(!tok.is_end_of_generation(kNoToken));

  if (auto phi3 = load_shared("ggml-vocab-phi-3.gguf")) {
    const std::optional<TokenId> end = phi3->find_token("<|end|>");
    QVERIFY(end.has_value());
    QVERIFY(phi3->is_end_of_generation(*end));
    QVERIFY(phi3->is_end_of_generation(phi3->eos()));
  }
}

// GLM's replies end by opening the next turn: <|user|>, or <|observation|> after a tool call. A
// file that names <|endoftext|> as its EOT still stops at both; without [gMASK] (a Zephyr-style
// vocabulary) <|user|> is left alone.
void TestTokenizer::glm_turn_openers_end_generation() {
  const auto vocab_with = [](bool is_glm) {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.tokens",
          gguf::Value::string_array({"<unk>", "<s>", "</s>", kSpace, "a", is_glm ? "[gMASK]" : "b", "<|user|>",
                                     "<|observation|>", "<|assistant|>", "<|endoftext|>"}));
    w.set("tokenizer.ggml.scores", gguf::Value::f32_array({0, 0, 0, -1, -2, 0, 0, 0, 0, 0}));
    w.set("tokenizer.ggml.token_type", gguf::Value::i32_array({2, 3, 3, 1, 1, 3, 3, 3, 3, 3}));
    w.set_u32("tokenizer.ggml.eot_token_id", 9);
    return vocab_of(w);
  };
  auto glm = vocab_with(true);
  QVERIFY2(glm, glm.error_message().c_str());
  QCOMPARE(glm->special.eom, 7);
  auto tok = Tokenizer::create(glm.value());
  QVERIFY(tok);
  QVERIFY(tok->is_end_of_generation(6));   // <|user|>
  QVERIFY(tok->is_end_of_generation(7));   // <|observation|>
  QVERIFY(tok->is_end_of_generation(9));   // the file's EOT
  QVERIFY(!tok->is_end_of_generation(8));  // <|assistant|>

  auto other = vocab_with(false);
  QVERIFY2(other, other.error_message().c_str());
  auto other_tok = Tokenizer::create(other.value());
  QVERIFY(other_tok);
  QVERIFY(!other_tok->is_end_of_generation(6));
  QVERIFY(!other_tok->is_end_of_generation(7));
}

// DeepSeek's <｜end▁of▁sentence｜> ends a turn even in a file that names another EOS (llama.cpp's
// end-of-generation list has it); Kimi K2's <|im_end|> and [EOS] end one, its call markers and
// <|im_middle|> do not.
void TestTokenizer::deepseek_and_kimi_turn_ends_end_generation() {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "deepseek2");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens",
        gguf::Value::string_array({"<unk>", "<s>", "</s>", kSpace, "a",
                                   "<\xEF\xBD\x9C"
                                   "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                   "<|im_end|>", "[EOS]", "<|im_middle|>", "<|tool_calls_section_end|>",
                                   "<\xEF\xBD\x9C"
                                   "tool\xE2\x96\x81"
                                   "calls\xE2\x96\x81"
                                   "end\xEF\xBD\x9C>"}));
  w.set("tokenizer.ggml.scores", gguf::Value::f32_array({0, 0, 0, -1, -2, 0, 0, 0, 0, 0, 0}));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32_array({2, 3, 3, 1, 1, 3, 3, 3, 3, 3, 3}));
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.eot_token_id", 6);  // named: <｜end▁of▁sentence｜> is not taken as the EOT
  auto vocab = vocab_of(w);
  QVERIFY2(vocab, vocab.error_message().c_str());
  auto tok = Tokenizer::create(vocab.value());
  QVERIFY(tok);
  QVERIFY(tok->is_end_of_generation(2));    // the file's EOS
  QVERIFY(tok->is_end_of_generation(5));    // <｜end▁of▁sentence｜>
  QVERIFY(tok->is_end_of_generation(6));    // <|im_end|>
  QVERIFY(tok->is_end_of_generation(7));    // [EOS]
  QVERIFY(!tok->is_end_of_generation(8));   // <|im_middle|>
  QVERIFY(!tok->is_end_of_generation(9));   // a calls section's end: the turn's end follows it
  QVERIFY(!tok->is_end_of_generation(10));  // DeepSeek's
}

void TestTokenizer::bpe_byte_level_merges() {
  Vocab v;
  v.kind = VocabKind::Bpe;
  v.model = "gpt2";
  v.pre = "gpt-2";
  // The 256 single-byte symbols of GPT-2's alphabet in byte order: printable ASCII stands
  // for itself, ' ' is U+0120 'Ġ'.
  int extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = printable ? b : extra++;
    std::string s = QString(QChar(cp)).toStdString();
    add(&v, s, TokenType::Normal, 0);
  }
  v.merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "\xC4\xA0w o"};
  add(&v, "he");
  add(&v, "ll");
  add(&v, "hell");
  add(&v, "hello");
  add(&v, "\xC4\xA0w");
  add(&v, "\xC4\xA0wo");
  const Tokenizer tok = make(v);
  const std::vector<TokenId> ids = tok.encode("hello wor", {.add_bos = false});
  QCOMPARE(ids, (std::vector<TokenId>{id_of(v, "hello"), id_of(v, "\xC4\xA0wo"), id_of(v, "r")}));
  QCOMPARE(tok.decode(ids), std::string("hello wor"));
  QCOMPARE(tok.token_to_piece(id_of(v, "\xC4\xA0w")), std::string(" w"));
  // llama.cpp's optional cleanup of detokenized text, only where the vocab allows it.
  const std::vector<TokenId> spaced = tok.encode("he 's here , ok ?", {.add_bos = false});
  QCOMPARE(tok.decode(spaced, {.clean_spaces = true}), std::string("he 's here , ok ?"));  // vocab says no
  Vocab clean = v;
  clean.clean_spaces = true;
  QCOMPARE(make(clean).decode(spaced, {.clean_spaces = true}), std::string("he's here, ok?"));
  QCOMPARE(make(clean).decode(spaced), std::string("he 's here , ok ?"));
  // Invalid UTF-8 is read as U+FFFD (three bytes), as llama.cpp does, and still encodes.
  const std::vector<TokenId> bad = tok.encode(
      "a\xFF"
      "b",
      {.add_bos = false});
  QCOMPARE(tok.decode(bad), std::string("a\xEF\xBF\xBD"
                                        "b"));
}

void TestTokenizer::streaming_holds_back_partial_utf8() {
  const Vocab v = toy_spm();
  const Tokenizer tok = make(v);
  StreamingDetokenizer stream(tok);
  QCOMPARE(stream.push(id_of(v, kSpace)), std::string(" "));
  QCOMPARE(stream.push(id_of(v, "<0xC3>")), std::string());
  QCOMPARE(stream.num_pending_bytes(), size_t(1));
  QCOMPARE(stream.push(id_of(v, "<0xA9>")), std::string("\xC3\xA9"));
  QCOMPARE(stream.flush(), std::string());
  // A character that never completes comes out as U+FFFD at the end.
  QCOMPARE(stream.push(id_of(v, "<0xE6>")), std::string());
  QCOMPARE(stream.push(id_of(v, "<0x88>")), std::string());
  QCOMPARE(stream.flush(), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
  QCOMPARE(stream.num_pending_bytes(), size_t(0));
  // A character cut off by a following token is replaced, so every chunk is valid UTF-8.
  QCOMPARE(stream.push(id_of(v, "<0xE6>")), std::string());
  QCOMPARE(stream.push(id_of(v, kSpace + "hello")), std::string("\xEF\xBF\xBD hello"));
  // The leading SPM space can be dropped for a stream that is the whole text.
  StreamingDetokenizer whole(tok, false, true);
  QCOMPARE(whole.push(id_of(v, kSpace + "hello")), std::string("hello"));
  QCOMPARE(whole.push(id_of(v, kSpace + "hello")), std::string(" hello"));
}

void TestTokenizer::streaming_emoji_as_byte_tokens() {
  auto tok = load_shared("ggml-vocab-llama-spm.gguf");
  if (!tok) QSKIP("ggml-vocab-llama-spm.gguf not available");
  const std::string llama = "\xF0\x9F\xA6\x99";  // 🦙, not in the vocabulary
  std::vector<TokenId> ids = tok->encode(llama, {.add_bos = false});
  QCOMPARE(ids, (std::vector<TokenId>{29871, 243, 162, 169, 156}));  // ▁ and four <0xNN>
  StreamingDetokenizer stream(*tok);
  QCOMPARE(stream.push(ids[0]), std::string(" "));
  QCOMPARE(stream.push(ids[1]), std::string());
  QCOMPARE(stream.push(ids[2]), std::string());
  QCOMPARE(stream.push(ids[3]), std::string());
  QCOMPARE(stream.push(ids[4]), llama);
  QCOMPARE(stream.flush(), std::string());
}

void TestTokenizer::streaming_chinese_in_bpe() {
  auto tok = load_shared("ggml-vocab-gpt-2.gguf");
  if (!tok) QSKIP("ggml-vocab-gpt-2.gguf not available");
  const std::string text = "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8 apple";  // 我想在 apple
  const std::vector<TokenId> ids = tok->encode(text);
  // Precondition: GPT-2 splits these characters across tokens.
  bool is_split = false;
  for (TokenId id : ids) is_split |= !is_valid_utf8(tok->token_to_piece(id));
  QVERIFY(is_split);
  StreamingDetokenizer stream(*tok);
  std::string joined;
  int num_held = 0;
  for (TokenId id : ids) {
    const std::string part = stream.push(id);
    QVERIFY2(is_valid_utf8(part), "a pushed chunk is not valid UTF-8");
    num_held += part.empty() ? 1 : 0;
    joined += part;
  }
  joined += stream.flush();
  QVERIFY(num_held > 0);
  QCOMPARE(joined, text);
}

void TestTokenizer::gemma4_merges_raw_utf8_with_spaces_as_spm() {
  auto v = vocab_of(gemma4_gguf());
  QVERIFY2(v, v.error_message().c_str());
  QCOMPARE(v->kind, VocabKind::Bpe);
  QCOMPARE(v->pre, std::string("gemma4"));
  QVERIFY(v->add_bos);  // forced, although the file says false
  QVERIFY(!v->add_space_prefix);
  const Tokenizer tok = make(v.value());
  const auto id = [&](const std::string& text) { return id_of(*v, text); };
  QCOMPARE(tok.encode("hello"), (std::vector<TokenId>{2, id("hello")}));
  const std::vector<TokenId> ids = tok.encode("hello world", {.add_bos = false});
  QCOMPARE(ids, (std::vector<TokenId>{id("hello"), id(kSpace + "wo"), id("r"), id("l"), id("d")}));
  QCOMPARE(tok.decode(ids), std::string("hello world"));
  // Leading spaces are ▁ like any other: no prefix space is added, none is stripped.
  const std::vector<TokenId> spaced = tok.encode("  hello", {.add_bos = false});
  QCOMPARE(spaced, (std::vector<TokenId>{id(kSpace), id(kSpace + "hello")}));
  QCOMPARE(tok.decode(spaced), std::string("  hello"));
  QCOMPARE(tok.decode(tok.encode("  hello")), std::string("  hello"));
  QCOMPARE(tok.token_to_piece(id(kSpace + kSpace)), std::string("  "));
}

void TestTokenizer::gemma4_byte_fallback_and_newline_runs() {
  auto v = vocab_of(gemma4_gguf());
  QVERIFY2(v, v.error_message().c_str());
  const Tokenizer tok = make(v.value());
  const auto id = [&](const std::string& text) { return id_of(*v, text); };
  // "é" and "a" are not in the vocabulary: their UTF-8 bytes become <0xNN> tokens.
  const std::vector<TokenId> ids = tok.encode("h\xC3\xA9 a", {.add_bos = false});
  QCOMPARE(ids, (std::vector<TokenId>{id("h"), id("<0xC3>"), id("<0xA9>"), id(kSpace), id("<0x61>")}));
  QCOMPARE(tok.decode(ids), std::string("h\xC3\xA9 a"));
  QCOMPARE(tok.token_to_piece(id("<0x0A>")), std::string("\n"));
  // A run of newlines that is a token stays whole although no merge builds it; longer runs merge.
  QCOMPARE(tok.encode("hello\n\n\nhello", {.add_bos = false}),
           (std::vector<TokenId>{id("hello"), id("\n\n\n"), id("hello")}));
  QCOMPARE(tok.encode("\n\n\n\n", {.add_bos = false}), (std::vector<TokenId>{id("\n\n"), id("\n\n")}));
  QCOMPARE(tok.encode("\t\n", {.add_bos = false}), (std::vector<TokenId>{id("\t"), id("\n")}));
  // Streaming gives whole characters back.
  StreamingDetokenizer stream(tok);
  std::string joined;
  for (TokenId t : tok.encode("h\xC3\xA9\n\n\n hello")) {
    const std::string part = stream.push(t);
    QVERIFY(is_valid_utf8(part));
    joined += part;
  }
  joined += stream.flush();
  QCOMPARE(joined, std::string("h\xC3\xA9\n\n\n hello"));
}

void TestTokenizer::gemma4_special_tokens_and_end_of_generation() {
  auto v = vocab_of(gemma4_gguf());
  QVERIFY2(v, v.error_message().c_str());
  const Tokenizer tok = make(v.value());
  const auto id = [&](const std::string& text) { return id_of(*v, text); };
  const TokenId turn_open = id("<|turn>");
  const TokenId turn_close = id("<turn|>");
  QCOMPARE(tok.encode("<|turn>hello<turn|>", {.add_bos = false, .parse_special = true}),
           (std::vector<TokenId>{turn_open, id("hello"), turn_close}));
  const std::vector<TokenId> plain = tok.encode("<|turn>hello<turn|>", {.add_bos = false});
  QVERIFY(std::find(plain.begin(), plain.end(), turn_open) == plain.end());
  QCOMPARE(tok.decode(plain), std::string("<|turn>hello<turn|>"));
  // User-defined tokens split out whole either way.
  QCOMPARE(tok.encode("<|\"|>hello", {.add_bos = false}), (std::vector<TokenId>{id("<|\"|>"), id("hello")}));
  // The end of a turn, of a tool call (<|tool_response>, now a control token) and <eos>.
  QVERIFY(tok.is_end_of_generation(1));
  QVERIFY(tok.is_end_of_generation(turn_close));
  QVERIFY(tok.is_end_of_generation(id("<|tool_response>")));
  QVERIFY(!tok.is_end_of_generation(turn_open));
  QVERIFY(!tok.is_end_of_generation(id("</s>")));
  QCOMPARE(tok.vocab().types[static_cast<size_t>(id("</s>"))], TokenType::Normal);
  QCOMPARE(tok.vocab().types[static_cast<size_t>(id("<|tool_response>"))], TokenType::Control);
  const std::vector<TokenId> turn = {2, turn_open, id("hello"), turn_close};
  QCOMPARE(tok.decode(turn), std::string("hello"));
  QCOMPARE(tok.decode(turn, {.render_special = true}), std::string("<bos><|turn>hello<turn|>"));
}

void TestTokenizer::vocab_struct_errors() {
  {
    Vocab v = toy_spm();
    v.scores.pop_back();
    auto t = Tokenizer::create(v);
    QVERIFY(!t);
    QVERIFY2(t.error_message().find("scores") != std::string::npos, t.error_message().c_str());
  }
  {
    Vocab v = toy_spm();
    v.types.resize(3);
    QVERIFY(!Tokenizer::create(v));
  }
  {
    Vocab v = toy_spm();
    add(&v, "hello");  // already present
    auto t = Tokenizer::create(v);
    QVERIFY(!t);
    QVERIFY2(t.error_message().find("duplicate token 'hello'") != std::string::npos, t.error_message().c_str());
  }
  {
    Vocab v = toy_spm();
    v.special.eos = 100000;
    auto t = Tokenizer::create(v);
    QVERIFY(!t);
    QVERIFY2(t.error_message().find("out of range") != std::string::npos, t.error_message().c_str());
  }
  {
    Vocab v = toy_spm();
    v.special.bos = kNoToken;  // add_bos stays true
    QVERIFY(!Tokenizer::create(v));
  }
  {
    Vocab v;
    v.kind = VocabKind::Bpe;
    v.model = "gpt2";
    v.pre = "no-such-pre";
    add(&v, "a");
    auto t = Tokenizer::create(v);
    QVERIFY(!t);
    QCOMPARE(t.status().code(), ErrorCode::Unsupported);
    QVERIFY2(t.error_message().find("no-such-pre") != std::string::npos, t.error_message().c_str());
  }
  QVERIFY(!Tokenizer::create(Vocab{}));
}

void TestTokenizer::gguf_vocab_errors() {
  {
    gguf::GgufWriter w = small_gguf();
    w.set("tokenizer.ggml.scores", gguf::Value::f32_array({0, 0}));
    auto v = vocab_of(w);
    QVERIFY(!v);
    QCOMPARE(v.status().code(), ErrorCode::CorruptFile);
    QVERIFY2(v.error_message().find("tokenizer.ggml.scores has 2 entries") != std::string::npos,
             v.error_message().c_str());
  }
  {
    gguf::GgufWriter w = small_gguf();
    w.set("tokenizer.ggml.token_type", gguf::Value::f32_array({1, 1, 1, 1, 1}));
    auto v = vocab_of(w);
    QVERIFY(!v);
    QVERIFY2(v.error_message().find("tokenizer.ggml.token_type") != std::string::npos, v.error_message().c_str());
  }
  {
    gguf::GgufWriter w = small_gguf();
    w.set_string("tokenizer.ggml.model", "sentencepiece-unigram-xyz");
    auto v = vocab_of(w);
    QVERIFY(!v);
    QCOMPARE(v.status().code(), ErrorCode::Unsupported);
    QVERIFY2(v.error_message().find("sentencepiece-unigram-xyz") != std::string::npos, v.error_message().c_str());
  }
  {
    gguf::GgufWriter w = small_gguf();
    w.set_u32("tokenizer.ggml.bos_token_id", 99);
    auto v = vocab_of(w);
    QVERIFY(!v);
    QVERIFY2(v.error_message().find("tokenizer.ggml.bos_token_id = 99 is out of range") != std::string::npos,
             v.error_message().c_str());
  }
  {
    gguf::GgufWriter w = small_gguf();
    w.set("tokenizer.ggml.tokens", gguf::Value::i32_array({1, 2, 3}));
    QVERIFY(!vocab_of(w));
  }
  {
    gguf::GgufWriter w = small_gguf();
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "llama3");
    auto v = vocab_of(w);  // BPE without merges
    QVERIFY(!v);
    QVERIFY2(v.error_message().find("tokenizer.ggml.merges") != std::string::npos, v.error_message().c_str());
  }
  {
    gguf::GgufWriter w;
    w.set_string("general.architecture", "llama");
    auto v = vocab_of(w);
    QVERIFY(!v);
    QCOMPARE(v.status().code(), ErrorCode::NotFound);
  }
}

void TestTokenizer::gguf_defaults_and_keys() {
  gguf::GgufWriter w = small_gguf();
  auto v = vocab_of(w);
  QVERIFY2(v, v.error_message().c_str());
  QCOMPARE(v->kind, VocabKind::Spm);
  QVERIFY(v->add_bos);  // llama.cpp's SPM default when the key is absent
  QVERIFY(v->add_space_prefix);
  QCOMPARE(v->special.bos, 1);
  QCOMPARE(v->special.eos, 2);

  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_u32("tokenizer.ggml.eos_token_id", 3);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  auto v2 = vocab_of(w);
  QVERIFY2(v2, v2.error_message().c_str());
  QVERIFY(!v2->add_bos);
  QVERIFY(v2->add_eos);
  QVERIFY(!v2->add_space_prefix);
  QCOMPARE(v2->special.eos, 3);
  auto tok = Tokenizer::create(v2.value());
  QVERIFY(tok);
  QCOMPARE(tok->encode("a"), (std::vector<TokenId>{4, 3}));  // no BOS, no prefix, then EOS
  QCOMPARE(tok->encode("a", {.add_bos = false}), (std::vector<TokenId>{4}));
  QVERIFY(tok->is_end_of_generation(3));
  QVERIFY(!tok->is_end_of_generation(2));  // the default EOS was replaced
}

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
