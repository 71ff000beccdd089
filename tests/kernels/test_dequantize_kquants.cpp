// dequantize_row_ref on hand-built K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). The
// bytes are packed here the way ggml's quantizers write them (a different code shape from
// the readers), with scales > 15 so the high bits of the 6-bit scale packing matter.
#include "block_bytes.h"

#include "iwb/kernels/dequantize.h"

#include <QTest>

#include <vector>

using namespace iwb;
using iwb::test::first_mismatch;
using iwb::test::put_f16;

namespace {

constexpr int kQK = 256;
constexpr int kNumBlocks = 2;  // multi-block rows catch a wrong block stride

// Chosen quants for element e of block b, in 0..range-1, covering the range.
int quant_of(int b, int e, int range) { return (e * 7 + b * 13 + e / 16) % range; }

std::vector<float> dequantize(GgmlType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> out(kNumBlocks * kQK, -12345.0f);
  if (!dequantize_row_ref(type, bytes.data(), out.data(), kNumBlocks * kQK)) return {};
  return out;
}

// Q2_K/Q3_K low bits: byte l of each 128-element half holds elements l, l+32, l+64, l+96.
void pack_2bit(uint8_t* qs, const int* values /* 256, each 0..3 */) {
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int* v = values + 128 * half + l;
      qs[32 * half + l] = static_cast<uint8_t>(v[0] | (v[32] << 2) | (v[64] << 4) | (v[96] << 6));
    }
  }
}

// Q4_K/Q5_K: 8 six-bit scales and mins into 12 bytes, as ggml's quantize_row_q4_K_ref does.
void pack_scales_k4(uint8_t* out, const int* scales, const int* mins) {
  for (int i = 0; i < 12; ++i) out[i] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = static_cast<uint8_t>(scales[j]);
      out[j + 4] = static_cast<uint8_t>(mins[j]);
    } else {
      out[j + 4] = static_cast<uint8_t>((scales[j] & 0xF) | ((mins[j] & 0xF) << 4));
      out[j - 4] |= static_cast<uint8_t>((scales[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((mins[j] >> 4) << 6);
    }
  }
}

}  // namespace

class TestDequantizeKQuants : public QObject {
  Q_OBJECT

 private slots:
  void q2_k_scales_mins_and_2bit_quants() {
    std::vector<uint8_t> bytes(kNumBlocks * 84);
    std::vector<float> expected(kNumBlocks * kQK);
    const float d[2] = {0.5f, 0.25f}, dmin[2] = {0.125f, 2.0f};
    for (int b = 0; b < kNumBlocks; ++b) {
      uint8_t* block = bytes.data() + 84 * b;
      int q[kQK];
      for (int e = 0; e < kQK; ++e) q[e] = quant_of(b, e, 4);
      int sc[16], mn[16];
      for (int i = 0; i < 16; ++i) {
        sc[i] = (i * 5 + b + 1) % 16;
        mn[i] = (i * 3 + 2 * b) % 16;
        block[i] = static_cast<uint8_t>(sc[i] | (mn[i] << 4));  // scales[16] at offset 0
      }
      pack_2bit(block + 16, q);                                  // qs[64] at offset 16
      put_f16(bytes, 84 * b + 80, d[b]);
      put_f16(bytes, 84 * b + 82, dmin[b]);
      for (int e = 0; e < kQK; ++e) {
        expected[kQK * b + e] = d[b] * sc[e / 16] * q[e] - dmin[b] * mn[e / 16];
      }
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q2_K, bytes), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q3_k_hmask_and_packed_6bit_scales() {
    std::vector<uint8_t> bytes(kNumBlocks * 110, 0);
    std::vector<float> expected(kNumBlocks * kQK);
    const float d[2] = {0.5f, -0.0625f};
    for (int b = 0; b < kNumBlocks; ++b) {
      uint8_t* block = bytes.data() + 110 * b;
      // Signed 3-bit quants -4..3 stored as 0..7; the stored bit 2 goes to hmask byte e % 32,
      // bit e / 32 (ggml walks the hmask byte index first).
      int stored[kQK], low[kQK];
      for (int e = 0; e < kQK; ++e) {
        stored[e] = quant_of(b, e, 8);
        low[e] = stored[e] & 3;
        if (stored[e] & 4) block[e % 32] |= static_cast<uint8_t>(1u << (e / 32));
      }
      pack_2bit(block + 32, low);
      // Scales -32..31 stored biased by 32 in 6 bits: low nibbles two per byte in bytes 0-7,
      // top bit pairs four per byte in bytes 8-11. Values span the full range, 2 to 63.
      int scale[16];
      uint8_t* packed = block + 96;
      for (int i = 0; i < 16; ++i) {
        const int biased = (i * 37 + 7 * b + 5) % 64;  // no symmetry between i and 4 * (i % 4) + i / 4
        scale[i] = biased - 32;
        if (i < 8) packed[i] = static_cast<uint8_t>(biased & 0xF);
        else packed[i - 8] |= static_cast<uint8_t>((biased & 0xF) << 4);
        packed[8 + i % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (i / 4)));
      }
      put_f16(bytes, 110 * b + 108, d[b]);
      for (int e = 0; e < kQK; ++e) {
        expected[kQK * b + e] = d[b] * scale[e / 16] * (stored[e] - 4);
      }
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q3_K, bytes), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q4_k_six_bit_scales_and_mins() {
    std::vector<uint8_t> bytes(kNumBlocks * 144, 0);
    std::vector<float> expected(kNumBlocks * kQK);
    const float d[2] = {0.25f, 0.5f}, dmin[2] = {0.125f, 0.0625f};
    // Sub-blocks 4-7 use scales and mins > 15, which need the top bits stored in bytes 0-7.
    const int scales[2][8] = {{1, 17, 33, 63, 16, 47, 62, 31}, {63, 0, 5, 40, 60, 33, 18, 49}};
    const int mins[2][8] = {{0, 9, 44, 21, 63, 20, 35, 50}, {7, 63, 30, 2, 19, 58, 41, 27}};
    for (int b = 0; b < kNumBlocks; ++b) {
      uint8_t* block = bytes.data() + 144 * b;
      put_f16(bytes, 144 * b, d[b]);
      put_f16(bytes, 144 * b + 2, dmin[b]);
      pack_scales_k4(block + 4, scales[b], mins[b]);
      int q[kQK];
      for (int e = 0; e < kQK; ++e) q[e] = quant_of(b, e, 16);
      // Per 64 elements: 32 bytes, low nibble = element l, high nibble = element l + 32.
      for (int chunk = 0; chunk < 4; ++chunk) {
        for (int l = 0; l < 32; ++l) {
          block[16 + 32 * chunk + l] = static_cast<uint8_t>(q[64 * chunk + l] | (q[64 * chunk + 32 + l] << 4));
        }
      }
      for (int e = 0; e < kQK; ++e) {
        const int sub = e / 32;
        expected[kQK * b + e] = d[b] * scales[b][sub] * q[e] - dmin[b] * mins[b][sub];
      }
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q4_K, bytes), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q5_k_fifth_bit_and_six_bit_scales() {
    std::vector<uint8_t> bytes(kNumBlocks * 176, 0);
    std::vector<float> expected(kNumBlocks * kQK);
    const float d[2] = {0.125f, 1.0f}, dmin[2] = {0.5f, 0.25f};
    const int scales[2][8] = {{3, 63, 18, 9, 48, 16, 33, 59}, {20, 44, 1, 63, 31, 52, 17, 38}};
    const int mins[2][8] = {{62, 4, 27, 39, 17, 55, 63, 8}, {0, 23, 45, 12, 63, 36, 29, 16}};
    for (int b = 0; b < kNumBlocks; ++b) {
      uint8_t* block = bytes.data() + 176 * b;
      put_f16(bytes, 176 * b, d[b]);
      put_f16(bytes, 176 * b + 2, dmin[b]);
      pack_scales_k4(block + 4, scales[b], mins[b]);
      int q[kQK];
      for (int e = 0; e < kQK; ++e) q[e] = quant_of(b, e, 32);
      uint8_t* qh = block + 16;
      uint8_t* qs = block + 48;
      // As ggml's quantizer: per 64 elements, bit masks m1 = 1 << 2c and m2 = 2 << 2c.
      for (int chunk = 0; chunk < 4; ++chunk) {
        for (int l = 0; l < 32; ++l) {
          int l1 = q[64 * chunk + l], l2 = q[64 * chunk + 32 + l];
          if (l1 > 15) { l1 -= 16; qh[l] |= static_cast<uint8_t>(1u << (2 * chunk)); }
          if (l2 > 15) { l2 -= 16; qh[l] |= static_cast<uint8_t>(2u << (2 * chunk)); }
          qs[32 * chunk + l] = static_cast<uint8_t>(l1 | (l2 << 4));
        }
      }
      for (int e = 0; e < kQK; ++e) {
        const int sub = e / 32;
        expected[kQK * b + e] = d[b] * scales[b][sub] * q[e] - dmin[b] * mins[b][sub];
      }
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q5_K, bytes), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }

  void q6_k_split_low_and_high_bits() {
    std::vector<uint8_t> bytes(kNumBlocks * 210, 0);
    std::vector<float> expected(kNumBlocks * kQK);
    const float d[2] = {0.0625f, -0.5f};
    for (int b = 0; b < kNumBlocks; ++b) {
      uint8_t* block = bytes.data() + 210 * b;
      int biased[kQK];  // 0..63, value = biased - 32
      for (int e = 0; e < kQK; ++e) biased[e] = quant_of(b, e, 64);
      int scale[16];
      for (int i = 0; i < 16; ++i) {
        scale[i] = (i * 19 + 11 * b) % 256 - 128;  // int8 scales, negative ones included
        block[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(scale[i]));
      }
      put_f16(bytes, 210 * b + 208, d[b]);
      // As ggml's quantizer: per 128 elements, ql[l] = e[l] | e[l+64] << 4,
      // ql[l+32] = e[l+32] | e[l+96] << 4, qh[l] = top bit pairs of e[l], e[l+32], e[l+64], e[l+96].
      for (int half = 0; half < 2; ++half) {
        uint8_t* ql = block + 64 * half;
        uint8_t* qh = block + 128 + 32 * half;
        const int* v = biased + 128 * half;
        for (int l = 0; l < 32; ++l) {
          ql[l] = static_cast<uint8_t>((v[l] & 0xF) | ((v[l + 64] & 0xF) << 4));
          ql[l + 32] = static_cast<uint8_t>((v[l + 32] & 0xF) | ((v[l + 96] & 0xF) << 4));
          qh[l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                       ((v[l + 96] >> 4) << 6));
        }
      }
      for (int e = 0; e < kQK; ++e) {
        expected[kQK * b + e] = d[b] * scale[e / 16] * (biased[e] - 32);
      }
    }
    const QString m = first_mismatch(dequantize(GgmlType::Q6_K, bytes), expected);
    QVERIFY2(m.isEmpty(), qPrintable(m));
  }
};

QTEST_APPLESS_MAIN(TestDequantizeKQuants)
#include "test_dequantize_kquants.moc"
