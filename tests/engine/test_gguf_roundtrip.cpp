// GGUF writer → reader round trips: every value type, nested arrays, tensors of several types
// and alignments; and the real vocab files from ../shared/models open with the right figures.
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/model_info.h"

#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <random>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::gguf;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

GgufWriter make_writer_with_all_types(uint64_t alignment) {
  GgufWriter w(alignment);
  w.set("t.u8", Value::u8(250));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(65000));
  w.set("t.i16", Value::i16(-32000));
  w.set("t.u32", Value::u32(4000000000u));
  w.set("t.i32", Value::i32(-2000000000));
  w.set("t.u64", Value::u64(18000000000000000000ull));
  w.set("t.i64", Value::i64(-9000000000000000000ll));
  w.set("t.f32", Value::f32(3.25f));
  w.set("t.f64", Value::f64(-1e300));
  w.set("t.bool", Value::boolean(true));
  w.set("t.str", Value::string("héllo ▁wörld\n\t\"quoted\""));
  w.set("t.empty_str", Value::string(""));
  w.set("t.strs", Value::string_array({"a", "", "ü", std::string("\0x", 2)}));
  w.set("t.f32s", Value::f32_array({1.5f, -2.0f}));
  Array inner1{ValueType::Int32, {Value::i32(1), Value::i32(2)}};
  Array inner2{ValueType::Int32, {}};
  Array nested{ValueType::Array, {Value::array(inner1), Value::array(inner2)}};
  w.set("t.nested", Value::array(nested));
  w.set("t.empty_arr", Value::array(Array{ValueType::Float64, {}}));
  return w;
}

}  // namespace

class TestGgufRoundTrip : public QObject {
  Q_OBJECT

 private slots:
  void metadataRoundTrip_data() {
    QTest::addColumn<quint64>("alignment");
    QTest::newRow("align 32") << quint64(32);
    QTest::newRow("align 64") << quint64(64);
    QTest::newRow("align 256") << quint64(256);
  }

  void metadataRoundTrip() {
    QFETCH(quint64, alignment);
    GgufWriter w = make_writer_with_all_types(alignment);
    const auto f32_data = random_bytes(7 * 3 * 4, 1);
    const auto f16_data = random_bytes(5 * 2, 2);
    const auto q8_data = random_bytes(3 * 34 * 2, 3);
    const auto q4k_data = random_bytes(144, 4);
    QVERIFY(w.add_tensor("a.f32", {7, 3}, GgmlType::F32, f32_data).is_ok());
    QVERIFY(w.add_tensor("b.f16", {5}, GgmlType::F16, f16_data).is_ok());
    QVERIFY(w.add_tensor("c.q8", {96, 2}, GgmlType::Q8_0, q8_data).is_ok());
    QVERIFY(w.add_tensor("d.q4k", {256, 1, 1, 1}, GgmlType::Q4_K, q4k_data).is_ok());

    auto bytes = w.write_bytes();
    QVERIFY2(bytes.is_ok(), bytes.error_message().c_str());
    auto file = GgufFile::from_bytes(std::move(bytes.value()));
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    const GgufFile& f = **file;

    QCOMPARE(f.version(), 3u);
    QCOMPARE(f.alignment(), alignment);
    QCOMPARE(f.data_offset() % alignment, quint64(0));
    QCOMPARE(f.find("t.u8")->as_uint().value(), 250u);
    QCOMPARE(f.find("t.u8")->type(), ValueType::Uint8);
    QCOMPARE(f.get_int("t.i8").value(), -100);
    QCOMPARE(f.get_int("t.u16").value(), 65000);
    QCOMPARE(f.get_int("t.i16").value(), -32000);
    QCOMPARE(f.get_int("t.u32").value(), 4000000000ll);
    QCOMPARE(f.get_int("t.i32").value(), -2000000000);
    QCOMPARE(f.find("t.u64")->as_uint().value(), 18000000000000000000ull);
    QVERIFY(!f.get_int("t.u64").has_value());  // does not fit int64
    QCOMPARE(f.get_int("t.i64").value(), -9000000000000000000ll);
    QCOMPARE(f.get_float("t.f32").value(), 3.25);
    QCOMPARE(f.get_float("t.f64").value(), -1e300);
    QCOMPARE(f.get_bool("t.bool").value(), true);
    QCOMPARE(f.get_string("t.str").value(), std::string("héllo ▁wörld\n\t\"quoted\""));
    QCOMPARE(f.get_string("t.empty_str").value(), std::string());
    const Array* strs = f.get_array("t.strs");
    QVERIFY(strs);
    QCOMPARE(strs->element_type, ValueType::String);
    QCOMPARE(strs->items.size(), size_t(4));
    QCOMPARE(*strs->items[2].as_string(), std::string("ü"));
    QCOMPARE(*strs->items[3].as_string(), std::string("\0x", 2));
    QCOMPARE(f.get_array("t.f32s")->items[1].as_float().value(), -2.0);
    const Array* nested = f.get_array("t.nested");
    QVERIFY(nested);
    QCOMPARE(nested->element_type, ValueType::Array);
    QCOMPARE(nested->items[0].as_array()->items[1].as_int().value(), 2);
    QCOMPARE(nested->items[1].as_array()->items.size(), size_t(0));
    QCOMPARE(f.get_array("t.empty_arr")->element_type, ValueType::Float64);
    QVERIFY(!f.find("t.missing"));
    QVERIFY(!f.get_string("t.u8").has_value());  // wrong kind gives nullopt, not garbage

    QCOMPARE(f.tensors().size(), size_t(4));
    const TensorInfo* q8 = f.find_tensor("c.q8");
    QVERIFY(q8);
    QCOMPARE(q8->type, GgmlType::Q8_0);
    QCOMPARE(q8->num_bytes, quint64(q8_data.size()));
    QCOMPARE(q8->num_elements(), 192);
    for (const TensorInfo& t : f.tensors()) QCOMPARE(t.offset % alignment, quint64(0));
    auto span = f.tensor_data(*q8);
    QVERIFY(std::equal(span.begin(), span.end(), q8_data.begin(), q8_data.end()));
    auto f32_span = f.tensor_data(*f.find_tensor("a.f32"));
    QVERIFY(std::equal(f32_span.begin(), f32_span.end(), f32_data.begin(), f32_data.end()));
    QCOMPARE(f.find_tensor("d.q4k")->shape, (std::vector<int64_t>{256, 1, 1, 1}));
  }

  void fileRoundTripAndMmap() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("model.gguf").toStdString();
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    // A tensor produced while writing, as large conversions do.
    QVERIFY(w.add_tensor("gen", {64, 4}, GgmlType::F32, [](std::span<uint8_t> dst) {
               for (size_t i = 0; i < dst.size() / 4; ++i) {
                 const float v = static_cast<float>(i);
                 std::memcpy(dst.data() + 4 * i, &v, 4);
               }
               return Status{};
             }).is_ok());
    QVERIFY(w.write_file(path).is_ok());
    QVERIFY(!QFile::exists(QString::fromStdString(path + ".partial")));
    auto file = GgufFile::open(path);
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    auto data = (*file)->tensor_data(*(*file)->find_tensor("gen"));
    float last = 0;
    std::memcpy(&last, data.data() + data.size() - 4, 4);
    QCOMPARE(last, 255.0f);
    QCOMPARE((*file)->get_int("llama.block_count").value(), 2);
  }

  void failedFillerLeavesNoFile() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("broken.gguf").toStdString();
    GgufWriter w;
    QVERIFY(w.add_tensor("bad", {32}, GgmlType::F32, [](std::span<uint8_t>) {
               return make_error(ErrorCode::IoError, "source vanished");
             }).is_ok());
    Status s = w.write_file(path);
    QVERIFY(!s.is_ok());
    QCOMPARE(s.message(), std::string("source vanished"));
    QVERIFY(!QFile::exists(QString::fromStdString(path)));
    QVERIFY(!QFile::exists(QString::fromStdString(path + ".partial")));
  }

  void writerRejectsBadTensors() {
    GgufWriter w;
    std::vector<uint8_t> data(34);
    QVERIFY(!w.add_tensor("x", {33}, GgmlType::Q8_0, data).is_ok());  // not a block multiple
    QVERIFY(!w.add_tensor("x", {32}, GgmlType::Q8_0, std::span<const uint8_t>(data.data(), 30)).is_ok());
    QVERIFY(w.add_tensor("x", {32}, GgmlType::Q8_0, data).is_ok());
    QVERIFY(!w.add_tensor("x", {32}, GgmlType::Q8_0, data).is_ok());  // duplicate
    QVERIFY(!w.add_tensor("y", {}, GgmlType::F32, data).is_ok());     // no dims
    QVERIFY(!w.add_tensor("z", {1, 1, 1, 1, 1}, GgmlType::F32, data).is_ok());
    w.set("mixed", Value::array(Array{ValueType::Int32, {Value::i32(1), Value::string("x")}}));
    QVERIFY(!w.write_bytes().is_ok());
  }

  void replacingKeyKeepsOrder() {
    GgufWriter w;
    w.set_u32("a", 1);
    w.set_u32("b", 2);
    w.set_u32("a", 3);
    auto f = GgufFile::from_bytes(w.write_bytes().value());
    QVERIFY(f.is_ok());
    QCOMPARE((*f)->metadata().size(), size_t(2));
    QCOMPARE((*f)->metadata()[0].key, std::string("a"));
    QCOMPARE((*f)->get_int("a").value(), 3);
  }

  void sharedVocabFilesOpen_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("numTokens");
    // clang-format off
    QTest::newRow("llama-spm") << "ggml-vocab-llama-spm.gguf" << "llama" << 32000;
    QTest::newRow("llama (codellama)") << "ggml-vocab-llama.gguf" << "llama" << 32016;
    QTest::newRow("phi-3") << "ggml-vocab-phi-3.gguf" << "llama" << 32064;
    QTest::newRow("baichuan") << "ggml-vocab-baichuan.gguf" << "llama" << 64000;
    QTest::newRow("bert-bge") << "ggml-vocab-bert-bge.gguf" << "bert" << 30522;
    QTest::newRow("gpt-2") << "ggml-vocab-gpt-2.gguf" << "gpt2" << 50257;
    QTest::newRow("gpt-neox") << "ggml-vocab-gpt-neox.gguf" << "gpt2" << 50432;
    QTest::newRow("falcon") << "ggml-vocab-falcon.gguf" << "gpt2" << 65024;
    QTest::newRow("deepseek-llm") << "ggml-vocab-deepseek-llm.gguf" << "gpt2" << 102400;
    // clang-format on
  }

  void sharedVocabFilesOpen() {
    QFETCH(QString, file);
    QFETCH(QString, model);
    QFETCH(int, numTokens);
    const QString path = QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf/" + file;
    if (!QFile::exists(path)) QSKIP(qPrintable("shared model file absent: " + path));
    auto f = GgufFile::open(path.toStdString());
    QVERIFY2(f.is_ok(), f.error_message().c_str());
    QCOMPARE(QString::fromStdString((*f)->get_string("tokenizer.ggml.model").value_or("")), model);
    auto summary = summarize_model(**f);
    QVERIFY(summary.is_ok());
    QVERIFY(summary->is_vocab_only);
    QCOMPARE(summary->num_params, quint64(0));
    QCOMPARE(summary->tokenizer_vocab_size, int64_t(numTokens));
  }
};

QTEST_GUILESS_MAIN(TestGgufRoundTrip)
#include "test_gguf_roundtrip.moc"
