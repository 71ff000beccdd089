// llama2.c → GGUF conversion: the real aidreams model converts with the right metadata,
// tokenizer and tensor bytes; a synthetic GQA model with a separate classifier lands where
// it should; broken checkpoints and tokenizers give clear errors.
#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/kernels/dequantize.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::convert;

namespace {

QString llama2c_dir() { return QString::fromStdString(iwb::test::shared_models_dir()) + "/llama2c/"; }

QByteArray read_all(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

bool write_all(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

QByteArray header_bytes(std::initializer_list<int32_t> values) {
  QByteArray out;
  for (int32_t v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(v));
  return out;
}

void append_floats(QByteArray* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), static_cast<qsizetype>(v.size() * sizeof(float)));
}

// A llama2.c tokenizer file from (score, text) pairs.
QByteArray tokenizer_bytes(int32_t max_len, const std::vector<std::pair<float, std::string>>& tokens) {
  QByteArray out = header_bytes({max_len});
  for (const auto& [score, text] : tokens) {
    out.append(reinterpret_cast<const char*>(&score), sizeof(float));
    const auto len = static_cast<int32_t>(text.size());
    out.append(reinterpret_cast<const char*>(&len), sizeof(len));
    out.append(text.data(), static_cast<qsizetype>(text.size()));
  }
  return out;
}

std::span<const uint8_t> as_span(const QByteArray& b) {
  return {reinterpret_cast<const uint8_t*>(b.constData()), static_cast<size_t>(b.size())};
}

// Bytes of `count` floats starting `float_offset` floats after a checkpoint's header.
QByteArray checkpoint_slice(const QByteArray& ckpt, qsizetype float_offset, qsizetype count) {
  return ckpt.mid(28 + float_offset * 4, count * 4);
}

QByteArray tensor_bytes(const gguf::GgufFile& f, const char* name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return {};
  auto data = f.tensor_data(*t);
  return QByteArray(reinterpret_cast<const char*>(data.data()), static_cast<qsizetype>(data.size()));
}

std::vector<int64_t> shape_of(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  return t ? t->shape : std::vector<int64_t>{};
}

}  // namespace

class TestLlama2cConvert : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  // The shared test models are data outside the repository; tests using them skip without.
  bool have_aidreams() const { return QFile::exists(llama2c_dir() + "aidreams260K.bin"); }

 private slots:
  void aidreamsConverts() {
    if (!have_aidreams()) QSKIP(qPrintable("shared models folder absent (" + llama2c_dir() + "): nothing to convert"));
    const QString out = m_tmp.filePath("aidreams.gguf");
    auto summary =
        convert_llama2c_to_gguf((llama2c_dir() + "aidreams260K.bin").toStdString(),
                                (llama2c_dir() + "aidreams260K-tok512.bin").toStdString(), out.toStdString(), {});
    QVERIFY2(summary.is_ok(), summary.error_message().c_str());
    QCOMPARE(summary->num_tensors, 1 + 4 * 9 + 1);
    QCOMPARE(summary->file_bytes, static_cast<uint64_t>(QFileInfo(out).size()));

    auto file = gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    const gguf::GgufFile& f = **file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("llama"));
    QCOMPARE(f.get_int("general.file_type").value_or(-1), 0);  // LLAMA_FTYPE_ALL_F32
    QCOMPARE(f.get_int("llama.embedding_length").value_or(0), 64);
    QCOMPARE(f.get_int("llama.feed_forward_length").value_or(0), 172);
    QCOMPARE(f.get_int("llama.block_count").value_or(0), 4);
    QCOMPARE(f.get_int("llama.attention.head_count").value_or(0), 4);
    QCOMPARE(f.get_int("llama.attention.head_count_kv").value_or(0), 4);
    QCOMPARE(f.get_int("llama.context_length").value_or(0), 128);
    QCOMPARE(f.get_int("llama.rope.dimension_count").value_or(0), 16);
    QCOMPARE(f.get_float("llama.attention.layer_norm_rms_epsilon").value_or(0), double(1e-5f));
    QCOMPARE(f.get_float("llama.rope.freq_base").value_or(0), 10000.0);

    // The lead's summary reads the same figures back.
    auto model = summarize_model(f);
    QVERIFY2(model.is_ok(), model.error_message().c_str());
    QCOMPARE(model->hparams.vocab_size, 512);
    QCOMPARE(model->hparams.key_length, 16);

    // Tokenizer: special pieces renamed, byte pieces typed, spaces back to U+2581.
    QCOMPARE(f.get_string("tokenizer.ggml.model").value_or(""), std::string("llama"));
    const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens");
    const gguf::Array* types = f.get_array("tokenizer.ggml.token_type");
    const gguf::Array* scores = f.get_array("tokenizer.ggml.scores");
    QVERIFY(tokens && types && scores);
    QCOMPARE(tokens->items.size(), size_t(512));
    QCOMPARE(types->items.size(), size_t(512));
    QCOMPARE(scores->items.size(), size_t(512));
    QCOMPARE(*tokens->items[0].as_string(), std::string("<unk>"));
    QCOMPARE(*tokens->items[1].as_string(), std::string("<s>"));
    QCOMPARE(*tokens->items[2].as_string(), std::string("</s>"));
    QCOMPARE(*tokens->items[3].as_string(), std::string("<0x00>"));
    QCOMPARE(*tokens->items[262].as_string(), std::string("\xE2\x96\x81"
                                                          "a"));  // stored as " a"
    QCOMPARE(*tokens->items[259].as_string(), std::string("in"));
    QCOMPARE(types->items[0].as_int().value_or(0), 2);
    QCOMPARE(types->items[1].as_int().value_or(0), 3);
    QCOMPARE(types->items[2].as_int().value_or(0), 3);
    QCOMPARE(types->items[3].as_int().value_or(0), 6);
    QCOMPARE(types->items[258].as_int().value_or(0), 6);  // <0xFF>
    QCOMPARE(types->items[259].as_int().value_or(0), 1);
    QCOMPARE(scores->items[261].as_float().value_or(0), -2.0);
    for (const gguf::Value& piece : tokens->items) QVERIFY(piece.as_string()->find(' ') == std::string::npos);
    QCOMPARE(f.get_int("tokenizer.ggml.bos_token_id").value_or(-1), 1);
    QCOMPARE(f.get_int("tokenizer.ggml.eos_token_id").value_or(-1), 2);
    QCOMPARE(f.get_int("tokenizer.ggml.unknown_token_id").value_or(-1), 0);
    QCOMPARE(f.get_bool("tokenizer.ggml.add_bos_token").value_or(false), true);
    QCOMPARE(f.get_bool("tokenizer.ggml.add_eos_token").value_or(true), false);

    // Tensors: names, ggml shapes ({row length, rows}), no output.weight for a shared classifier.
    QCOMPARE(f.tensors().size(), size_t(38));
    QVERIFY(f.find_tensor("output.weight") == nullptr);
    QCOMPARE(shape_of(f, "token_embd.weight"), (std::vector<int64_t>{64, 512}));
    QCOMPARE(shape_of(f, "output_norm.weight"), (std::vector<int64_t>{64}));
    for (int l = 0; l < 4; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      QCOMPARE(shape_of(f, b + "attn_norm.weight"), (std::vector<int64_t>{64}));
      QCOMPARE(shape_of(f, b + "ffn_norm.weight"), (std::vector<int64_t>{64}));
      QCOMPARE(shape_of(f, b + "attn_q.weight"), (std::vector<int64_t>{64, 64}));
      QCOMPARE(shape_of(f, b + "attn_k.weight"), (std::vector<int64_t>{64, 64}));
      QCOMPARE(shape_of(f, b + "attn_v.weight"), (std::vector<int64_t>{64, 64}));
      QCOMPARE(shape_of(f, b + "attn_output.weight"), (std::vector<int64_t>{64, 64}));
      QCOMPARE(shape_of(f, b + "ffn_gate.weight"), (std::vector<int64_t>{64, 172}));
      QCOMPARE(shape_of(f, b + "ffn_down.weight"), (std::vector<int64_t>{172, 64}));
      QCOMPARE(shape_of(f, b + "ffn_up.weight"), (std::vector<int64_t>{64, 172}));
    }
    for (const gguf::TensorInfo& t : f.tensors()) QCOMPARE(t.type, GgmlType::F32);

    // Bytes: offsets computed here independently from the llama2.c layout.
    const QByteArray ckpt = read_all(llama2c_dir() + "aidreams260K.bin");
    const qsizetype emb = 512 * 64, norms = 4 * 64, sq = 4 * 64 * 64, ffn = 4 * 172 * 64;
    QCOMPARE(tensor_bytes(f, "token_embd.weight"), checkpoint_slice(ckpt, 0, emb));
    QCOMPARE(tensor_bytes(f, "blk.2.attn_norm.weight"), checkpoint_slice(ckpt, emb + 2 * 64, 64));
    QCOMPARE(tensor_bytes(f, "blk.1.attn_k.weight"), checkpoint_slice(ckpt, emb + norms + sq + 64 * 64, 64 * 64));
    const qsizetype w1 = emb + norms + 4 * sq + norms;
    QCOMPARE(tensor_bytes(f, "blk.3.ffn_gate.weight"), checkpoint_slice(ckpt, w1 + 3 * 172 * 64, 172 * 64));
    QCOMPARE(tensor_bytes(f, "blk.0.ffn_down.weight"), checkpoint_slice(ckpt, w1 + ffn, 172 * 64));
    QCOMPARE(tensor_bytes(f, "blk.3.ffn_up.weight"), checkpoint_slice(ckpt, w1 + 2 * ffn + 3 * 172 * 64, 172 * 64));
    QCOMPARE(tensor_bytes(f, "output_norm.weight"), checkpoint_slice(ckpt, w1 + 3 * ffn, 64));
  }

  void aidreamsConvertsToF16() {
    if (!have_aidreams()) QSKIP(qPrintable("shared models folder absent (" + llama2c_dir() + "): nothing to convert"));
    const QString out = m_tmp.filePath("aidreams-f16.gguf");
    Llama2cConvertOptions options;
    options.weight_type = GgmlType::F16;
    options.name = "aidreams260K";
    auto summary =
        convert_llama2c_to_gguf((llama2c_dir() + "aidreams260K.bin").toStdString(),
                                (llama2c_dir() + "aidreams260K-tok512.bin").toStdString(), out.toStdString(), options);
    QVERIFY2(summary.is_ok(), summary.error_message().c_str());
    auto file = gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    const gguf::GgufFile& f = **file;
    QCOMPARE(f.get_int("general.file_type").value_or(-1), 1);  // LLAMA_FTYPE_MOSTLY_F16
    QCOMPARE(f.get_string("general.name").value_or(""), std::string("aidreams260K"));
    for (const gguf::TensorInfo& t : f.tensors()) {
      QCOMPARE(t.type, t.shape.size() == 1 ? GgmlType::F32 : GgmlType::F16);
    }
    // The F16 embedding decodes back to the checkpoint's floats within half precision.
    const QByteArray ckpt = read_all(llama2c_dir() + "aidreams260K.bin");
    const gguf::TensorInfo* t = f.find_tensor("token_embd.weight");
    QVERIFY(t);
    std::vector<float> decoded(512 * 64);
    QVERIFY(dequantize_row_ref(GgmlType::F16, f.tensor_data(*t).data(), decoded.data(), 512 * 64));
    for (size_t i = 0; i < decoded.size(); ++i) {
      float expected;
      std::memcpy(&expected, ckpt.constData() + 28 + 4 * i, sizeof(float));
      QVERIFY(std::fabs(decoded[i] - expected) <= 1e-3f * std::fabs(expected) + 1e-7f);
    }
  }

  // GQA and a separate classifier, which the real model has neither of.
  void syntheticGqaWithClassifier() {
    const int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv_heads = 1, vocab = 6, seq = 4;
    const int kv_dim = dim * kv_heads / heads, head = dim / heads;
    QByteArray ckpt = header_bytes({dim, hidden, layers, heads, kv_heads, -vocab, seq});
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto block = [&](size_t n) {
      std::vector<float> v(n);
      for (float& x : v) x = u(rng);
      return v;
    };
    const std::vector<float> embedding = block(vocab * dim);
    append_floats(&ckpt, embedding);
    append_floats(&ckpt, block(layers * dim));        // rms_att
    append_floats(&ckpt, block(layers * dim * dim));  // wq
    const std::vector<float> wk = block(layers * kv_dim * dim);
    append_floats(&ckpt, wk);
    append_floats(&ckpt, block(layers * kv_dim * dim));      // wv
    append_floats(&ckpt, block(layers * dim * dim));         // wo
    append_floats(&ckpt, block(layers * dim));               // rms_ffn
    append_floats(&ckpt, block(3 * layers * hidden * dim));  // w1, w2, w3
    append_floats(&ckpt, block(dim));                        // rms_final
    append_floats(&ckpt, block(2 * seq * head / 2));         // freq_cis real and imag
    const std::vector<float> classifier = block(vocab * dim);
    append_floats(&ckpt, classifier);
    const QString ckpt_path = m_tmp.filePath("gqa.bin");
    const QString tok_path = m_tmp.filePath("gqa-tok.bin");
    QVERIFY(write_all(ckpt_path, ckpt));
    QVERIFY(write_all(
        tok_path,
        tokenizer_bytes(8, {{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}, {-1, " the"}, {-2, "<0x41>"}, {-3, ""}})));

    const QString out = m_tmp.filePath("gqa.gguf");
    auto summary = convert_llama2c_to_gguf(ckpt_path.toStdString(), tok_path.toStdString(), out.toStdString(), {});
    QVERIFY2(summary.is_ok(), summary.error_message().c_str());
    QCOMPARE(summary->config.is_classifier_shared, false);
    auto file = gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    const gguf::GgufFile& f = **file;
    QCOMPARE(f.get_int("llama.attention.head_count_kv").value_or(0), 1);
    QCOMPARE(shape_of(f, "blk.0.attn_k.weight"), (std::vector<int64_t>{dim, kv_dim}));
    QCOMPARE(shape_of(f, "blk.1.attn_v.weight"), (std::vector<int64_t>{dim, kv_dim}));
    QCOMPARE(shape_of(f, "output.weight"), (std::vector<int64_t>{dim, vocab}));
    QCOMPARE(f.tensors().size(), size_t(1 + 2 * 9 + 2));
    auto floats_of = [](const std::vector<float>& v, size_t from, size_t n) {
      return QByteArray(reinterpret_cast<const char*>(v.data() + from), static_cast<qsizetype>(n * 4));
    };
    QCOMPARE(tensor_bytes(f, "output.weight"), floats_of(classifier, 0, classifier.size()));
    QCOMPARE(tensor_bytes(f, "token_embd.weight"), floats_of(embedding, 0, embedding.size()));
    QCOMPARE(tensor_bytes(f, "blk.1.attn_k.weight"), floats_of(wk, kv_dim * dim, kv_dim * dim));
    const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens");
    const gguf::Array* types = f.get_array("tokenizer.ggml.token_type");
    QVERIFY(tokens && types);
    QCOMPARE(*tokens->items[3].as_string(), std::string("\xE2\x96\x81the"));
    QCOMPARE(types->items[4].as_int().value_or(0), 6);  // <0x41>
    QCOMPARE(types->items[5].as_int().value_or(0), 3);  // empty piece: control, as llama.cpp marks it
  }

  // llama2.c's copy of the Llama 2 tokenizer, converted, must equal llama.cpp's own Llama 2
  // vocab file piece for piece: this is what proves the space → U+2581 mapping and the types.
  void llama2TokenizerMatchesLlamaCppVocab() {
    const QString vocab_path =
        QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf/ggml-vocab-llama-spm.gguf";
    if (!QFile::exists(llama2c_dir() + "llama2c-tokenizer.bin") || !QFile::exists(vocab_path)) {
      QSKIP("shared models folder absent: no Llama 2 tokenizer to compare");
    }
    // A tiny random model around the 32000-token vocabulary.
    const int32_t dim = 8, hidden = 8, vocab = 32000, seq = 2;
    QByteArray ckpt = header_bytes({dim, hidden, 1, 1, 1, vocab, seq});
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> weights(vocab * dim + dim + 4 * dim * dim + dim + 3 * hidden * dim + dim + 2 * seq * dim / 2);
    for (float& x : weights) x = u(rng);
    append_floats(&ckpt, weights);
    const QString ckpt_path = m_tmp.filePath("llama2-vocab.bin");
    QVERIFY(write_all(ckpt_path, ckpt));
    const QString out = m_tmp.filePath("llama2-vocab.gguf");
    auto summary = convert_llama2c_to_gguf(
        ckpt_path.toStdString(), (llama2c_dir() + "llama2c-tokenizer.bin").toStdString(), out.toStdString(), {});
    QVERIFY2(summary.is_ok(), summary.error_message().c_str());

    auto ours = gguf::GgufFile::open(out.toStdString());
    auto theirs = gguf::GgufFile::open(vocab_path.toStdString());
    QVERIFY2(ours.is_ok(), ours.error_message().c_str());
    QVERIFY2(theirs.is_ok(), theirs.error_message().c_str());
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      const gguf::Array* a = (*ours)->get_array(key);
      const gguf::Array* b = (*theirs)->get_array(key);
      QVERIFY(a && b);
      QCOMPARE(a->items.size(), b->items.size());
      for (size_t i = 0; i < a->items.size(); ++i) {
        const gguf::Value& x = a->items[i];
        const gguf::Value& y = b->items[i];
        const bool same = x.as_string() ? *x.as_string() == *y.as_string() : x.as_float() == y.as_float();
        QVERIFY2(same, qPrintable(QString("%1[%2]: ours %3, llama.cpp %4")
                                      .arg(key)
                                      .arg(i)
                                      .arg(QString::fromStdString(x.to_display_string()),
                                           QString::fromStdString(y.to_display_string()))));
      }
    }
    for (const char* key :
         {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"}) {
      QCOMPARE((*ours)->get_int(key), (*theirs)->get_int(key));
    }
  }

  void truncatedOrPaddedCheckpoint() {
    if (!have_aidreams()) QSKIP(qPrintable("shared models folder absent (" + llama2c_dir() + "): nothing to convert"));
    const QByteArray ckpt = read_all(llama2c_dir() + "aidreams260K.bin");
    QCOMPARE(ckpt.size(), 932124);
    const std::string tok = (llama2c_dir() + "aidreams260K-tok512.bin").toStdString();

    const QString short_path = m_tmp.filePath("short.bin");
    QVERIFY(write_all(short_path, ckpt.left(ckpt.size() - 4)));
    auto r = convert_llama2c_to_gguf(short_path.toStdString(), tok, m_tmp.filePath("x.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::CorruptFile);
    QVERIFY2(r.error_message().find("truncated") != std::string::npos, r.error_message().c_str());
    QVERIFY2(r.error_message().find("932124") != std::string::npos, r.error_message().c_str());
    QVERIFY2(r.error_message().find("932120") != std::string::npos, r.error_message().c_str());
    QVERIFY(!QFile::exists(m_tmp.filePath("x.gguf")));

    const QString long_path = m_tmp.filePath("long.bin");
    QVERIFY(write_all(long_path, ckpt + QByteArray(8, '\0')));
    r = convert_llama2c_to_gguf(long_path.toStdString(), tok, m_tmp.filePath("x.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QVERIFY2(r.error_message().find("932132 bytes, 8 more than the 932124") != std::string::npos,
             r.error_message().c_str());

    // Header only: the size check, not a read past the end, must catch it.
    const QString header_path = m_tmp.filePath("header.bin");
    QVERIFY(write_all(header_path, ckpt.left(28)));
    auto c = Llama2cCheckpoint::open(header_path.toStdString());
    QVERIFY(!c.is_ok());
    QVERIFY2(c.error_message().find("truncated") != std::string::npos, c.error_message().c_str());
  }

  void wrongTokenizer() {
    if (!have_aidreams()) QSKIP(qPrintable("shared models folder absent (" + llama2c_dir() + "): nothing to convert"));
    const std::string ckpt = (llama2c_dir() + "aidreams260K.bin").toStdString();
    // The 32000-token Llama 2 tokenizer does not belong to a 512-token model.
    auto r = convert_llama2c_to_gguf(ckpt, (llama2c_dir() + "llama2c-tokenizer.bin").toStdString(),
                                     m_tmp.filePath("y.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QVERIFY2(r.error_message().find("more than the checkpoint's 512 tokens") != std::string::npos,
             r.error_message().c_str());

    const QByteArray tok = read_all(llama2c_dir() + "aidreams260K-tok512.bin");
    const QString cut = m_tmp.filePath("cut-tok.bin");
    QVERIFY(write_all(cut, tok.left(tok.size() - 3)));
    r = convert_llama2c_to_gguf(ckpt, cut.toStdString(), m_tmp.filePath("y.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QVERIFY2(r.error_message().find("token 511") != std::string::npos, r.error_message().c_str());

    // The Llama 2 tokenizer itself parses: 32000 tokens, spaces restored.
    auto llama = load_llama2c_tokenizer((llama2c_dir() + "llama2c-tokenizer.bin").toStdString(), 32000);
    QVERIFY2(llama.is_ok(), llama.error_message().c_str());
    QCOMPARE(llama->tokens[13].type, TokenType::Byte);  // <0x0A>
    QCOMPARE(llama->tokens[260].piece, std::string("\xE2\x96\x81t"));
    QVERIFY(!QFile::exists(m_tmp.filePath("y.gguf")));
  }

  void garbageHeaders_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<QString>("expected");
    QTest::newRow("text") << QByteArray("Once upon a time there was a") << "dim is 1701015119, more than the plausible";
    QTest::newRow("zero dim") << header_bytes({0, 172, 4, 4, 4, 512, 128}) << "dim is 0, must be positive";
    QTest::newRow("negative layers") << header_bytes({64, 172, -4, 4, 4, 512, 128}) << "n_layers is -4";
    QTest::newRow("huge dim") << header_bytes({1 << 30, 172, 4, 4, 4, 512, 128}) << "more than the plausible";
    QTest::newRow("heads not dividing") << header_bytes({64, 172, 4, 6, 6, 512, 128})
                                        << "n_heads 6 does not divide dim 64";
    QTest::newRow("kv heads not dividing")
        << header_bytes({64, 172, 4, 4, 3, 512, 128}) << "n_kv_heads 3 does not divide n_heads 4";
    QTest::newRow("more kv heads") << header_bytes({64, 172, 4, 4, 8, 512, 128}) << "n_kv_heads 8 does not divide";
    QTest::newRow("odd head size") << header_bytes({6, 172, 4, 2, 2, 512, 128}) << "head size 3 is odd";
    QTest::newRow("int min vocab") << header_bytes({64, 172, 4, 4, 4, INT32_MIN, 128}) << "|vocab_size| is 2147483648";
    QTest::newRow("versioned export") << header_bytes({0x616b3432, 1, 64, 172, 4, 4, 4}) << "export.py --version 0";
    QTest::newRow("short") << QByteArray("abc") << "llama2.c header needs 28 bytes, got 3";
  }
  void garbageHeaders() {
    QFETCH(QByteArray, header);
    QFETCH(QString, expected);
    auto c = parse_llama2c_header(as_span(header));
    QVERIFY(!c.is_ok());
    QVERIFY2(c.error_message().find(expected.toStdString()) != std::string::npos, c.error_message().c_str());

    // The same through a file: still an error, and nothing written.
    const QString path = m_tmp.filePath("garbage.bin");
    QVERIFY(write_all(path, header + QByteArray(4096, '\x7f')));
    auto r = convert_llama2c_to_gguf(path.toStdString(), "/nonexistent-tokenizer.bin",
                                     m_tmp.filePath("z.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QVERIFY(!QFile::exists(m_tmp.filePath("z.gguf")));
  }

  void validHeaderSize() {
    auto c = parse_llama2c_header(as_span(header_bytes({64, 172, 4, 4, 4, 512, 128})));
    QVERIFY2(c.is_ok(), c.error_message().c_str());
    QCOMPARE(llama2c_checkpoint_bytes(*c), uint64_t(932124));
    QVERIFY(c->is_classifier_shared);
    auto separate = parse_llama2c_header(as_span(header_bytes({64, 172, 4, 4, 4, -512, 128})));
    QVERIFY(separate.is_ok());
    QCOMPARE(separate->vocab_size, 512);
    QCOMPARE(llama2c_checkpoint_bytes(*separate), uint64_t(932124 + 512 * 64 * 4));
  }

  void badTokenizerRecords_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expected");
    const std::vector<std::pair<float, std::string>> ok = {{0, "<unk>"}, {0, "<s>"}, {0, "</s>"}, {0, "ab"}};
    QTest::newRow("empty") << QByteArray() << "too short";
    QTest::newRow("zero max length") << tokenizer_bytes(0, ok) << "max_token_length is 0";
    QTest::newRow("too few tokens") << tokenizer_bytes(8, {{0, "<unk>"}, {0, "<s>"}, {0, "</s>"}})
                                    << "holds 3 tokens, the checkpoint's vocab_size is 4";
    QTest::newRow("token longer than max") << tokenizer_bytes(2, ok) << "length 5 outside 0..2";
    QByteArray negative = tokenizer_bytes(8, {{0, "<unk>"}});
    negative += header_bytes({0, -1});
    QTest::newRow("negative length") << negative << "token 1 at byte 17: length -1";
    QTest::newRow("nan score") << tokenizer_bytes(8, {{0, "<unk>"}, {NAN, "<s>"}, {0, "</s>"}, {0, "x"}})
                               << "token 1 at byte 17: score is not finite";
    QTest::newRow("cut record") << tokenizer_bytes(8, ok) + QByteArray("\0\0", 2) << "holds more than";
  }
  void badTokenizerRecords() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    auto t = parse_llama2c_tokenizer(as_span(bytes), 4);
    QVERIFY(!t.is_ok());
    QVERIFY2(t.error_message().find(expected.toStdString()) != std::string::npos, t.error_message().c_str());
  }

  void missingFilesAndBadOutput() {
    auto r = convert_llama2c_to_gguf("/nonexistent/model.bin", "/nonexistent/tok.bin", "/tmp/never.gguf", {});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::NotFound);
    QVERIFY2(r.error_message().find("/nonexistent/model.bin") != std::string::npos, r.error_message().c_str());
    if (!have_aidreams()) return;
    r = convert_llama2c_to_gguf((llama2c_dir() + "aidreams260K.bin").toStdString(),
                                (llama2c_dir() + "aidreams260K-tok512.bin").toStdString(),
                                m_tmp.filePath("no-such-dir/out.gguf").toStdString(), {});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::IoError);
    Llama2cConvertOptions q8;
    q8.weight_type = GgmlType::Q8_0;
    r = convert_llama2c_to_gguf((llama2c_dir() + "aidreams260K.bin").toStdString(),
                                (llama2c_dir() + "aidreams260K-tok512.bin").toStdString(),
                                m_tmp.filePath("q8.gguf").toStdString(), q8);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.error_message().find("F32 or F16") != std::string::npos, r.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestLlama2cConvert)
#include "test_llama2c_convert.moc"
