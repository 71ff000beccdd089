// dequantize_row_ref on hand-built F32/F16/BF16 rows and Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 blocks
// (bytes written at their documented offsets), plus the requests it must refuse.
#include "block_bytes.h"

#include "iwb/kernels/dequantize.h"

#include <QTest>

#include <cstring>
#include <limits>
#include <vector>

using namespace iwb;
using iwb::test::first_mismatch;
using iwb::test::put_f16;
using iwb::test::put_u16;

namespace {

// Two blocks' worth of chosen quants, spread over the whole range, different per block.
std::vector<int> pattern(int num_values, int range, int multiplier, int offset) {
  std::vector<int> q(static_cast<size_t>(num_values));
  for (int i = 0; i < num_values; ++i) q[static_cast<size_t>(i)] = (i * multiplier + offset) % range;
  return q;
}

std::vector<float> dequantize(GgmlType type, const std::vector<uint8_t>& bytes, int64_t num_elements) {
  std::vector<float> out(static_cast<size_t>(num_elements), -12345.0f);
  if (!dequantize_row_ref(type, bytes.data(), out.data(), num_elements)) return {};
  return out;
}

}  // namespace

class TestDequantizeLegacy : public QObject {
  Q_OBJECT

 private slots:
  void f32_is_copied() {
    const std::vector<float> values = {1.5f, -2.25f, 3.0e7f, -0.0f, 7.0f};
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    const QString m = first_mismatch(dequantize(GgmlType::F32, bytes, 5), values);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void f16_and_bf16_rows() {
    std::vector<uint8_t> half(10);
    const uint16_t half_bits[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00};
    for (size_t i = 0; i < 5; ++i) put_u16(half, 2 * i, half_bits[i]);
    const std::vector<float> expected_half = {1.0f, -2.0f, 65504.0f, 0x1p-24f,
                                              std::numeric_limits<float>::infinity()};
    QString m = first_mismatch(dequantize(GgmlType::F16, half, 5), expected_half);
    QVERIFY2(m.isEmpty(), qPrintable(m));

    std::vector<uint8_t> bf(8);
    const uint16_t bf_bits[] = {0x3F80, 0xC040, 0x4780, 0x0000};
    for (size_t i = 0; i < 4; ++i) put_u16(bf, 2 * i, bf_bits[i]);
    m = first_mismatch(dequantize(GgmlType::BF16, bf, 4), {1.0f, -3.0f, 65536.0f, 0.0f});
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q4_0_nibbles_minus_8_times_d() {
    // Block 0, d = 0.5: byte j holds element j (low nibble) and j + 16 (high nibble).
    std::vector<uint8_t> bytes(2 * 18);
    put_f16(bytes, 0, 0.5f);
    for (int j = 0; j < 16; ++j) bytes[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    // Block 1, d = -1.5, a different pattern.
    const std::vector<int> q1 = pattern(32, 16, 7, 3);
    put_f16(bytes, 18, -1.5f);
    for (int j = 0; j < 16; ++j) bytes[20 + j] = static_cast<uint8_t>(q1[j] | (q1[j + 16] << 4));

    std::vector<float> expected(64);
    for (int j = 0; j < 16; ++j) {
      expected[j] = (j - 8) * 0.5f;        // nibbles 0..15 -> -4 .. 3.5
      expected[j + 16] = (7 - j) * 0.5f;
    }
    for (int e = 0; e < 32; ++e) expected[32 + e] = (q1[e] - 8) * -1.5f;
    const QString m = first_mismatch(dequantize(GgmlType::Q4_0, bytes, 64), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q4_1_scale_and_min() {
    std::vector<uint8_t> bytes(2 * 20);
    const float d[2] = {0.25f, 2.0f}, mins[2] = {-1.0f, 3.5f};
    std::vector<float> expected(64);
    for (int b = 0; b < 2; ++b) {
      const std::vector<int> q = pattern(32, 16, 5 + 2 * b, b);
      put_f16(bytes, 20 * b, d[b]);
      put_f16(bytes, 20 * b + 2, mins[b]);
      for (int j = 0; j < 16; ++j) bytes[20 * b + 4 + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
      for (int e = 0; e < 32; ++e) expected[32 * b + e] = q[e] * d[b] + mins[b];
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q4_1, bytes, 64), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q5_0_high_bits_from_qh() {
    // 5-bit quants 0..31: low nibble in qs like Q4_0, bit 4 of element e in bit e of qh.
    std::vector<uint8_t> bytes(2 * 22);
    const float d[2] = {1.0f, -0.125f};
    std::vector<float> expected(64);
    for (int b = 0; b < 2; ++b) {
      const std::vector<int> q = pattern(32, 32, 11 + 2 * b, 3 + b);
      const size_t base = static_cast<size_t>(22 * b);
      put_f16(bytes, base, d[b]);
      uint32_t qh = 0;
      for (int e = 0; e < 32; ++e) qh |= static_cast<uint32_t>(q[e] >> 4) << e;
      for (int k = 0; k < 4; ++k) bytes[base + 2 + k] = static_cast<uint8_t>(qh >> (8 * k));
      for (int j = 0; j < 16; ++j) {
        bytes[base + 6 + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      }
      for (int e = 0; e < 32; ++e) expected[32 * b + e] = (q[e] - 16) * d[b];
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q5_0, bytes, 64), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q5_1_high_bits_and_min() {
    std::vector<uint8_t> bytes(2 * 24);
    const float d[2] = {0.5f, 0.0625f}, mins[2] = {-8.0f, 0.75f};
    std::vector<float> expected(64);
    for (int b = 0; b < 2; ++b) {
      const std::vector<int> q = pattern(32, 32, 13 - 2 * b, 5 * b);
      const size_t base = static_cast<size_t>(24 * b);
      put_f16(bytes, base, d[b]);
      put_f16(bytes, base + 2, mins[b]);
      uint32_t qh = 0;
      for (int e = 0; e < 32; ++e) qh |= static_cast<uint32_t>(q[e] >> 4) << e;
      for (int k = 0; k < 4; ++k) bytes[base + 4 + k] = static_cast<uint8_t>(qh >> (8 * k));
      for (int j = 0; j < 16; ++j) {
        bytes[base + 8 + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      }
      for (int e = 0; e < 32; ++e) expected[32 * b + e] = q[e] * d[b] + mins[b];
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q5_1, bytes, 64), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q8_0_signed_quants() {
    std::vector<uint8_t> bytes(3 * 34);
    const float d[3] = {0.5f, -0.25f, 4.0f};
    std::vector<float> expected(96);
    for (int b = 0; b < 3; ++b) {
      put_f16(bytes, static_cast<size_t>(34 * b), d[b]);
      for (int j = 0; j < 32; ++j) {
        const int q = (j * 8 + 37 * b) % 256 - 128;  // -128..127, both extremes included
        bytes[static_cast<size_t>(34 * b + 2 + j)] = static_cast<uint8_t>(static_cast<int8_t>(q));
        expected[static_cast<size_t>(32 * b + j)] = q * d[b];
      }
    }
    bytes[2] = 0x80;  // -128
    expected[0] = -128 * 0.5f;
    bytes[3] = 0x7F;  // 127
    expected[1] = 127 * 0.5f;
    const QString m = first_mismatch(dequantize(GgmlType::Q8_0, bytes, 96), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void rejects_partial_blocks_and_writes_nothing() {
    std::vector<uint8_t> bytes(4 * 144, 0);
    std::vector<float> out(1024, 42.0f);
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_0, bytes.data(), out.data(), 31));
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_0, bytes.data(), out.data(), 33));
    QVERIFY(!dequantize_row_ref(GgmlType::Q8_0, bytes.data(), out.data(), -32));
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_K, bytes.data(), out.data(), 255));
    QVERIFY(!dequantize_row_ref(GgmlType::Q6_K, bytes.data(), out.data(), 288));
    for (float v : out) QCOMPARE(v, 42.0f);
    QVERIFY(dequantize_row_ref(GgmlType::Q4_K, bytes.data(), out.data(), 0));  // empty is fine
    QCOMPARE(out[0], 42.0f);
  }

  void rejects_types_it_cannot_dequantize() {
    std::vector<uint8_t> bytes(1024, 0);
    std::vector<float> out(256, 42.0f);
    for (GgmlType type : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::IQ2_XXS, GgmlType::IQ4_NL, GgmlType::I8,
                          GgmlType::I32, GgmlType::F64, GgmlType::TQ1_0, GgmlType::IQ4_XS,
                          static_cast<GgmlType>(4) /* retired Q4_2 */, static_cast<GgmlType>(9999)}) {
      QVERIFY2(!dequantize_row_ref(type, bytes.data(), out.data(), 256),
               qPrintable(QString::number(static_cast<uint32_t>(type))));
    }
    for (float v : out) QCOMPARE(v, 42.0f);
  }

  void rejects_null_and_misaligned_sources() {
    std::vector<uint8_t> bytes(2 * 18 + 1, 0);
    std::vector<float> out(32, 42.0f);
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_0, nullptr, out.data(), 32));
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_0, bytes.data(), nullptr, 32));
    QVERIFY(!dequantize_row_ref(GgmlType::Q4_0, bytes.data() + 1, out.data(), 32));
    QCOMPARE(out[0], 42.0f);
  }
};

QTEST_APPLESS_MAIN(TestDequantizeLegacy)
#include "test_dequantize_legacy.moc"
