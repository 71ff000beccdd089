// MXFP4 against llama.cpp's own C code, bit for bit: tests/kernels/data/mxfp4_ggml.dat holds
// blocks of every E8M0 exponent (0..255) and every code in both nibbles, plus random blocks,
// with the floats ggml's dequantize_row_mxfp4 made of them, and random floats (magnitudes
// 2^-120..2^120, ties between codes, maxima just below powers of two, zeros, FLT_MAX) with the
// blocks ggml's quantize_row_mxfp4_ref made of them. It was written by
//   python3 scripts/mxfp4_fixture.py --ggml /work/llama-build/bin/libggml-base.so -o tests/kernels/data/mxfp4_ggml.dat
// (llama.cpp of October 2026, libggml-base from llama-cpp-python 0.3.36's vendor/llama.cpp),
// which calls ggml through ctypes. Also: the quantize -> dequantize error bound, the requests
// the quantizer refuses, and blocks at odd addresses (MXFP4 rows need no alignment).
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/dequantize_fast.h"
#include "iwb/kernels/quantize.h"

#include <QFile>
#include <QTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>
#include "test_paths.h"

using namespace iwb;

namespace {

struct Fixture {
  std::vector<uint8_t> blocks;       // dequantization input, 17 bytes a block
  std::vector<float> ggml_floats;    // ggml's dequantization of them
  std::vector<float> inputs;         // quantization input
  std::vector<uint8_t> ggml_blocks;  // ggml's quantization of them
};

// Reads the fixture; an empty string on success, else what is wrong with the file.
QString read_fixture(Fixture* f) {
  QFile file(QString::fromStdString(iwb::test::from_build_dir(IWB_MXFP4_FIXTURE_FROM_BUILD)));
  if (!file.open(QIODevice::ReadOnly)) return "cannot open " + file.fileName();
  const QByteArray all = file.readAll();
  if (all.size() < 16 || std::memcmp(all.constData(), "IWBMXFP4", 8) != 0)
    return file.fileName() + " is no MXFP4 fixture";
  uint32_t counts[2];
  std::memcpy(counts, all.constData() + 8, sizeof counts);
  const size_t d = counts[0], q = counts[1];
  if (static_cast<size_t>(all.size()) != 16 + d * 17 + d * 128 + q * 128 + q * 17)
    return "wrong size of " + file.fileName();
  const char* p = all.constData() + 16;
  f->blocks.assign(p, p + d * 17);
  p += d * 17;
  f->ggml_floats.resize(d * 32);
  std::memcpy(f->ggml_floats.data(), p, d * 128);
  p += d * 128;
  f->inputs.resize(q * 32);
  std::memcpy(f->inputs.data(), p, q * 128);
  p += q * 128;
  f->ggml_blocks.assign(p, p + q * 17);
  return {};
}

// The first element whose bits differ, as text; empty when all are equal.
QString first_bit_difference(const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<uint8_t>& blocks) {
  if (got.size() != want.size()) return QString("%1 values, expected %2").arg(got.size()).arg(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b) {
      return QString("element %1 (block %2, e = %3): %4 (0x%5), ggml %6 (0x%7)")
          .arg(i)
          .arg(i / 32)
          .arg(blocks[(i / 32) * 17])
          .arg(got[i])
          .arg(a, 8, 16, QChar('0'))
          .arg(want[i])
          .arg(b, 8, 16, QChar('0'));
    }
  }
  return {};
}

// The E2M1 grid at half-scale d: the error of the nearest point, which quantization must reach.
double nearest_grid_error(float x, double d) {
  double best = INFINITY;
  for (int8_t v : kMxfp4Values) best = std::min(best, std::fabs(v * d - x));
  return best;
}

}  // namespace

class TestMxfp4 : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString error = read_fixture(&m_fixture);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY(m_fixture.blocks.size() >= 256 * 17);
  }

  void typeTraits() {
    const GgmlTypeTraits& t = ggml_type_traits(GgmlType::MXFP4);
    QVERIFY(t.name == "MXFP4");
    QCOMPARE(t.block_size, int64_t{32});
    QCOMPARE(t.bytes_per_block, sizeof(BlockMxfp4));
    QVERIFY(ggml_can_dequantize(GgmlType::MXFP4));
    QVERIFY(can_quantize_row_ref(GgmlType::MXFP4));
    QVERIFY(ggml_type_from_name("mxfp4") == GgmlType::MXFP4);
    QCOMPARE(ggml_data_alignment(GgmlType::MXFP4), size_t{1});
  }

  // Every exponent (0 and 1 are the f32 subnormals 2^-128 and 2^-127, 254 and 255 overflow to
  // inf for the larger codes) and every code: the same bits as ggml.
  void dequantizeMatchesGgml() {
    const std::vector<uint8_t>& blocks = m_fixture.blocks;
    const int64_t n = static_cast<int64_t>(m_fixture.ggml_floats.size());
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    QVERIFY(dequantize_row_ref(GgmlType::MXFP4, blocks.data(), out.data(), n));
    QString diff = first_bit_difference(out, m_fixture.ggml_floats, blocks);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    // The same through the fast entry point and from an odd address.
    std::vector<uint8_t> shifted(blocks.size() + 1);
    std::memcpy(shifted.data() + 1, blocks.data(), blocks.size());
    std::fill(out.begin(), out.end(), -1.0f);
    QVERIFY(dequantize_row(GgmlType::MXFP4, shifted.data() + 1, out.data(), n));
    diff = first_bit_difference(out, m_fixture.ggml_floats, blocks);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    // The fixture does reach the extremes: a subnormal, an infinity and both signs.
    bool has_subnormal = false, has_inf = false, has_negative = false;
    for (float x : m_fixture.ggml_floats) {
      has_subnormal |= std::fpclassify(x) == FP_SUBNORMAL;
      has_inf |= std::isinf(x);
      has_negative |= x < 0;
    }
    QVERIFY(has_subnormal && has_inf && has_negative);
  }

  void quantizeMatchesGgml() {
    const std::vector<float>& x = m_fixture.inputs;
    std::vector<uint8_t> bytes(m_fixture.ggml_blocks.size(), 0xEE);
    QVERIFY(
        quantize_row_mxfp4_ref(x.data(), reinterpret_cast<BlockMxfp4*>(bytes.data()), static_cast<int64_t>(x.size())));
    for (size_t b = 0; b < bytes.size() / 17; ++b) {
      QVERIFY2(
          std::memcmp(&bytes[b * 17], &m_fixture.ggml_blocks[b * 17], 17) == 0,
          qPrintable(
              QString("block %1: e = %2, ggml's e = %3").arg(b).arg(bytes[b * 17]).arg(m_fixture.ggml_blocks[b * 17])));
    }
    // Through the type dispatch too, into an odd address.
    std::vector<uint8_t> shifted(bytes.size() + 1);
    QVERIFY(quantize_row_ref(GgmlType::MXFP4, x.data(), shifted.data() + 1, static_cast<int64_t>(x.size())));
    QVERIFY(std::memcmp(shifted.data() + 1, m_fixture.ggml_blocks.data(), bytes.size()) == 0);
  }

  // Quantize -> dequantize on Gaussian rows of 37 blocks: each value lands on the nearest point
  // of its block's grid when the grid reaches it (|x| <= 12 d, the largest E2M1 magnitude 6
  // times the scale) and on +-12 d beyond; the scale is 2^(floor(log2 amax) - 3).
  void roundTripWithinBound() {
    std::mt19937 rng(39);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t n = 37 * 32;
    for (float sigma : {1.0f, 1e-20f, 3e15f}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = sigma * normal(rng);
      std::vector<BlockMxfp4> blocks(static_cast<size_t>(n / 32));
      QVERIFY(quantize_row_mxfp4_ref(x.data(), blocks.data(), n));
      std::vector<float> y(static_cast<size_t>(n));
      QVERIFY(dequantize_row_ref(GgmlType::MXFP4, blocks.data(), y.data(), n));
      double error = 0, signal = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const double d = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax))) - 3);
        QCOMPARE(static_cast<double>(e8m0_to_f32_half(blocks[b].e)), d);
        for (int j = 0; j < 32; ++j) {
          const float xi = x[b * 32 + j], yi = y[b * 32 + j];
          const double allowed = std::fabs(xi) <= 12 * d ? nearest_grid_error(xi, d) : std::fabs(xi) - 12 * d;
          QVERIFY2(std::fabs(static_cast<double>(yi) - xi) <= allowed * (1 + 1e-12),
                   qPrintable(QString("sigma %1, element %2: %3 -> %4 (scale %5)")
                                  .arg(sigma)
                                  .arg(b * 32 + j)
                                  .arg(xi)
                                  .arg(yi)
                                  .arg(d)));
          error += (static_cast<double>(yi) - xi) * (static_cast<double>(yi) - xi);
          signal += static_cast<double>(xi) * xi;
        }
      }
      // 4 bits with a power-of-two scale: about 12% RMS error on Gaussian data, never 15%.
      const double rms = std::sqrt(error / signal);
      qInfo("sigma %g: relative RMS error %.4f", static_cast<double>(sigma), rms);
      QVERIFY(rms < 0.15);
    }
  }

  void edgeCases() {
    // An all-zero block is e = 0 and zero codes (as ggml); a tiny block clamps at e = 0.
    std::vector<float> x(64, 0.0f);
    x[40] = 1e-39f;  // below 2^-125: ggml's exponent would wrap
    std::vector<BlockMxfp4> b(2);
    QVERIFY(quantize_row_mxfp4_ref(x.data(), b.data(), 64));
    QCOMPARE(int(b[0].e), 0);
    for (uint8_t q : b[0].qs) QCOMPARE(int(q), 0);
    QCOMPARE(int(b[1].e), 0);
    // Refusals write nothing: NaN, inf, a partial block, null pointers.
    const BlockMxfp4 untouched{0xAB, {}};
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      x[3] = bad;
      b[0] = untouched;
      QVERIFY(!quantize_row_mxfp4_ref(x.data(), b.data(), 64));
      QCOMPARE(int(b[0].e), 0xAB);
    }
    x[3] = 0.0f;
    QVERIFY(!quantize_row_mxfp4_ref(x.data(), b.data(), 48));
    QVERIFY(!quantize_row_mxfp4_ref(nullptr, b.data(), 64));
    QVERIFY(!quantize_row_mxfp4_ref(x.data(), nullptr, 64));
    std::vector<float> out(64);
    QVERIFY(!dequantize_row_ref(GgmlType::MXFP4, b.data(), out.data(), 48));
    QVERIFY(quantize_uses_imatrix(GgmlType::MXFP4) == false);
    QCOMPARE(quantize_max_abs_input(GgmlType::MXFP4), std::numeric_limits<float>::max());
  }

 private:
  Fixture m_fixture;
};

QTEST_APPLESS_MAIN(TestMxfp4)
#include "test_mxfp4.moc"
