// The GGUF reader against hostile input: every truncation of a valid file, random corruption,
// and each specific malformation gets a clear error (never a crash, hang or huge allocation).
// Also run under AddressSanitizer by scripts/test.sh (label asan).
#include "gguf_test_bytes.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"

#include <QTemporaryDir>
#include <QtTest>

#include <random>

using namespace iwb;
using namespace iwb::gguf;
using iwb::test::GgufBytes;

namespace {

// A small valid file with metadata of several kinds and two tensors.
std::vector<uint8_t> valid_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("tokenizer.ggml.tokens", Value::string_array({"<unk>", "<s>", "</s>", "hello", "▁world"}));
  w.set("tokenizer.ggml.scores", Value::f32_array({0, 0, 0, -1.5f, -2.5f}));
  Array nested{ValueType::Array, {Value::i32_array({1, 2, 3})}};
  w.set("test.nested", Value::array(nested));
  std::vector<uint8_t> q8(34 * 2, 7);
  std::vector<uint8_t> f32(4 * 8, 1);
  (void)w.add_tensor("blk.0.attn_q.weight", {64}, GgmlType::Q8_0, q8);
  (void)w.add_tensor("output_norm.weight", {8}, GgmlType::F32, f32);
  return w.write_bytes().value();
}

Status parse(std::vector<uint8_t> bytes) {
  auto f = GgufFile::from_bytes(std::move(bytes));
  return f.status();
}

}  // namespace

class TestGgufHostile : public QObject {
  Q_OBJECT

 private:
  // Asserts that parsing fails and the message contains every given fragment.
  static void expect_error(std::vector<uint8_t> bytes, std::initializer_list<const char*> fragments) {
    Status s = parse(std::move(bytes));
    QVERIFY2(!s.is_ok(), "malformed file was accepted");
    for (const char* fragment : fragments) {
      QVERIFY2(s.message().find(fragment) != std::string::npos,
               qPrintable(QString("message '%1' lacks '%2'").arg(QString::fromStdString(s.message()), fragment)));
    }
  }

 private slots:
  void validFileParses() { QVERIFY(parse(valid_file()).is_ok()); }

  void everyTruncationFails() {
    const std::vector<uint8_t> full = valid_file();
    for (size_t n = 0; n < full.size(); ++n) {
      Status s = parse(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(n)));
      QVERIFY2(!s.is_ok(), qPrintable(QString("truncation to %1 of %2 bytes accepted").arg(n).arg(full.size())));
      QVERIFY(!s.message().empty());
    }
  }

  void randomCorruptionNeverCrashes() {
    const std::vector<uint8_t> full = valid_file();
    std::mt19937 rng(12345);
    int num_rejected = 0;
    for (int iter = 0; iter < 4000; ++iter) {
      std::vector<uint8_t> bytes = full;
      const int num_flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < num_flips; ++k) {
        const size_t pos = rng() % bytes.size();
        // Mix of random bytes and the extreme values that make lengths and counts overflow.
        const uint8_t choices[] = {0x00, 0xFF, 0x7F, 0x80, static_cast<uint8_t>(rng())};
        bytes[pos] = choices[rng() % 5];
      }
      auto f = GgufFile::from_bytes(std::move(bytes));
      if (!f) {
        ++num_rejected;
        QVERIFY(!f.error_message().empty());
        continue;
      }
      // Anything accepted must be internally consistent: tensor data inside the file.
      for (const TensorInfo& t : (*f)->tensors()) {
        QVERIFY((*f)->data_offset() + t.offset + t.num_bytes <= (*f)->file_size());
        QCOMPARE((*f)->tensor_data(t).size(), size_t(t.num_bytes));
      }
    }
    QVERIFY(num_rejected > 1000);  // corruption is mostly detected
  }

  void emptyAndTinyFiles() {
    expect_error({}, {"truncated", "magic"});
    expect_error({'G', 'G'}, {"truncated"});
  }

  void badMagic() {
    auto bytes = valid_file();
    bytes[0] = 'X';
    expect_error(bytes, {"not a GGUF file", "magic"});
  }

  void unsupportedVersions() {
    expect_error(GgufBytes().header(1, 0, 0).bytes, {"version 1"});
    expect_error(GgufBytes().header(4, 0, 0).bytes, {"unsupported GGUF version 4"});
    expect_error(GgufBytes().header(0x03000000u, 0, 0).bytes, {"big-endian"});
    QVERIFY(parse(GgufBytes().header(2, 0, 0).bytes).is_ok());
    QVERIFY(parse(GgufBytes().header(3, 0, 0).bytes).is_ok());
  }

  void hugeCounts() {
    expect_error(GgufBytes().header(3, 0, ~0ull).bytes, {"metadata count", "cannot fit"});
    expect_error(GgufBytes().header(3, 1ull << 60, 0).bytes, {"tensor count", "cannot fit"});
  }

  void stringLengthPastEnd() {
    expect_error(GgufBytes().header(3, 0, 1).put<uint64_t>(~0ull).zeros(16).bytes, {"metadata key", "runs past the end", "byte 24"});
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1000).str("x").bytes,
                 {"string value", "runs past the end"});
  }

  void arrayCountOverflow() {
    // Array of 2^62 u64: count * size would overflow 64 bits if multiplied naively.
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1ull << 62).bytes,
                 {"array of", "cannot fit"});
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(~0ull).bytes,
                 {"cannot fit"});
  }

  void deeplyNestedArrays() {
    GgufBytes b;
    b.header(3, 0, 1).str("k").put<uint32_t>(9);
    for (int i = 0; i < 100; ++i) b.put<uint32_t>(9).put<uint64_t>(1);  // array of array of ...
    b.put<uint32_t>(4).put<uint64_t>(0);
    expect_error(b.bytes, {"nested deeper"});
  }

  void unknownValueTypes() {
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0).bytes, {"unknown value type 13", "'k'"});
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).put<uint64_t>(0).bytes,
                 {"unknown array element type 99"});
  }

  void badBool() {
    expect_error(GgufBytes().header(3, 0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).bytes, {"boolean"});
  }

  void duplicateKeys() {
    expect_error(GgufBytes().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes, {"duplicate metadata key 'a'"});
  }

  void badAlignment() {
    expect_error(GgufBytes().header(3, 0, 1).kv_u32("general.alignment", 0).bytes, {"general.alignment"});
    expect_error(GgufBytes().header(3, 0, 1).kv_u32("general.alignment", 48).bytes, {"power-of-two"});
    expect_error(GgufBytes().header(3, 0, 1).kv_str("general.alignment", "32").bytes, {"general.alignment"});
  }

  // Builds a file with one tensor info and a data section of `data_bytes`.
  static std::vector<uint8_t> one_tensor(std::vector<int64_t> shape, uint32_t type, uint64_t offset, size_t data_bytes) {
    GgufBytes b;
    b.header(3, 1, 0).tensor("t", std::move(shape), type, offset).pad(32).zeros(data_bytes);
    return b.bytes;
  }

  void tensorInfoProblems() {
    QVERIFY(parse(one_tensor({32, 2}, 0, 0, 256)).is_ok());
    expect_error(one_tensor({32}, 4, 0, 256), {"unknown type id 4", "'t'"});       // retired Q4_2
    expect_error(one_tensor({32}, 1000, 0, 256), {"unknown type id 1000"});
    expect_error(one_tensor({}, 0, 0, 256), {"0 dimensions"});
    expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 256), {"5 dimensions"});
    expect_error(one_tensor({-4}, 0, 0, 256), {"negative dimension"});
    expect_error(one_tensor({1ll << 40, 1ll << 40}, 0, 0, 256), {"overflows"});
    expect_error(one_tensor({33}, 8, 0, 256), {"not a multiple of the block size 32", "Q8_0"});
    expect_error(one_tensor({8}, 0, 4, 256), {"not aligned"});
    expect_error(one_tensor({64}, 0, 0, 255), {"runs past the end"});              // 256 bytes needed
    expect_error(one_tensor({8}, 0, 1ull << 63, 256), {"runs past the end"});
    expect_error(one_tensor({8}, 0, ~0ull - 31, 256), {"runs past the end"});      // offset + size wraps
  }

  void duplicateTensorNames() {
    GgufBytes b;
    b.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64);
    expect_error(b.bytes, {"duplicate tensor name 'w'"});
  }

  void dataSectionMissing() {
    GgufBytes b;
    b.header(3, 1, 0).tensor("w", {8}, 0, 0);  // no padding, no data
    expect_error(b.bytes, {"truncated"});
  }

  void fileErrorsNameThePath() {
    auto missing = GgufFile::open("/nonexistent/model.gguf");
    QVERIFY(!missing);
    QCOMPARE(missing.status().code(), ErrorCode::NotFound);
    QVERIFY(missing.error_message().find("/nonexistent/model.gguf") != std::string::npos);
    QTemporaryDir dir;
    auto not_file = GgufFile::open(dir.path().toStdString());
    QVERIFY(!not_file);
    QVERIFY(not_file.error_message().find("not a regular file") != std::string::npos);
    QFile empty(dir.filePath("empty.gguf"));
    QVERIFY(empty.open(QIODevice::WriteOnly));
    empty.close();
    auto e = GgufFile::open(empty.fileName().toStdString());
    QVERIFY(!e);
    QVERIFY(e.error_message().find("empty.gguf") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestGgufHostile)
#include "test_gguf_hostile.moc"
