// fp16 / bf16 <-> f32 conversions on known bit patterns: normals, the largest half,
// subnormals, signed zero, inf, NaN and round-to-nearest-even ties; plus exhaustive round trips.
#include "iwb/kernels/dequantize.h"

#include <QTest>

#include <bit>
#include <cmath>
#include <limits>

using namespace iwb;

class TestHalfConversions : public QObject {
  Q_OBJECT

 private slots:
  void fp16_known_values_decode() {
    QCOMPARE(fp16_to_f32(0x3C00), 1.0f);
    QCOMPARE(fp16_to_f32(0xC000), -2.0f);
    QCOMPARE(fp16_to_f32(0x3800), 0.5f);
    QCOMPARE(fp16_to_f32(0x3555), 0.333251953125f);
    QCOMPARE(fp16_to_f32(0x7BFF), 65504.0f);             // largest finite half
    QCOMPARE(fp16_to_f32(0x0400), 0x1p-14f);             // smallest normal
    QCOMPARE(fp16_to_f32(0x0001), 0x1p-24f);             // smallest subnormal
    QCOMPARE(fp16_to_f32(0x03FF), 1023.0f * 0x1p-24f);   // largest subnormal
    QCOMPARE(fp16_to_f32(0x8001), -0x1p-24f);
    QCOMPARE(std::bit_cast<uint32_t>(fp16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
    QCOMPARE(fp16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
    QCOMPARE(fp16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
    QVERIFY(std::isnan(fp16_to_f32(0x7E00)));
    QVERIFY(std::isnan(fp16_to_f32(0x7C01)));  // signalling NaN stays NaN, not inf
  }

  void fp16_known_values_encode() {
    QCOMPARE(f32_to_fp16(1.0f), uint16_t{0x3C00});
    QCOMPARE(f32_to_fp16(-2.0f), uint16_t{0xC000});
    QCOMPARE(f32_to_fp16(65504.0f), uint16_t{0x7BFF});
    QCOMPARE(f32_to_fp16(0x1p-24f), uint16_t{0x0001});
    QCOMPARE(f32_to_fp16(0x1p-14f), uint16_t{0x0400});
    QCOMPARE(f32_to_fp16(-0.0f), uint16_t{0x8000});
    QCOMPARE(f32_to_fp16(std::numeric_limits<float>::infinity()), uint16_t{0x7C00});
    QCOMPARE(f32_to_fp16(-std::numeric_limits<float>::infinity()), uint16_t{0xFC00});
    const uint16_t nan = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
    QVERIFY((nan & 0x7C00) == 0x7C00 && (nan & 0x03FF) != 0);
    // A NaN whose payload sits only in bits the half drops must still be a NaN.
    const uint16_t low_payload_nan = f32_to_fp16(std::bit_cast<float>(0x7F800001u));
    QVERIFY((low_payload_nan & 0x7C00) == 0x7C00 && (low_payload_nan & 0x03FF) != 0);
  }

  void fp16_overflow_rounds_to_inf_only_past_the_tie() {
    QCOMPARE(f32_to_fp16(65519.0f), uint16_t{0x7BFF});  // below the 65520 tie: max half
    QCOMPARE(f32_to_fp16(65520.0f), uint16_t{0x7C00});  // tie: 65504 is odd, so up to inf
    QCOMPARE(f32_to_fp16(1.0e6f), uint16_t{0x7C00});
    QCOMPARE(f32_to_fp16(-1.0e6f), uint16_t{0xFC00});
    QCOMPARE(f32_to_fp16(std::numeric_limits<float>::max()), uint16_t{0x7C00});
  }

  void fp16_ties_round_to_even() {
    // 1 + 2^-11 is halfway between 0x3C00 (even) and 0x3C01: stays at 1.
    QCOMPARE(f32_to_fp16(1.0f + 0x1p-11f), uint16_t{0x3C00});
    // 1 + 3 * 2^-11 is halfway between 0x3C01 (odd) and 0x3C02: goes to the even one.
    QCOMPARE(f32_to_fp16(1.0f + 3.0f * 0x1p-11f), uint16_t{0x3C02});
    // Just above a tie rounds up, just below rounds down.
    QCOMPARE(f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), uint16_t{0x3C01});
    QCOMPARE(f32_to_fp16(1.0f + 0x1p-11f - 0x1p-20f), uint16_t{0x3C00});
    // A mantissa carry moves to the next binade: 2 - 2^-12 rounds to 2.
    QCOMPARE(f32_to_fp16(2.0f - 0x1p-12f), uint16_t{0x4000});
  }

  void fp16_subnormal_rounding() {
    QCOMPARE(f32_to_fp16(0x1p-25f), uint16_t{0x0000});               // tie between 0 and 1: 0
    QCOMPARE(f32_to_fp16(0x1p-25f * 1.001f), uint16_t{0x0001});      // just above the tie
    QCOMPARE(f32_to_fp16(0x1p-26f), uint16_t{0x0000});
    QCOMPARE(f32_to_fp16(1.5f * 0x1p-24f), uint16_t{0x0002});        // tie 1|2: even 2
    QCOMPARE(f32_to_fp16(2.5f * 0x1p-24f), uint16_t{0x0002});        // tie 2|3: even 2
    QCOMPARE(f32_to_fp16(3.5f * 0x1p-24f), uint16_t{0x0004});        // tie 3|4: even 4
    QCOMPARE(f32_to_fp16(-3.0f * 0x1p-24f), uint16_t{0x8003});
    QCOMPARE(f32_to_fp16(1023.5f * 0x1p-24f), uint16_t{0x0400});     // rounds up into normals
    QCOMPARE(f32_to_fp16(1e-30f), uint16_t{0x0000});
  }

  void fp16_round_trip_is_exact_for_every_half() {
    for (uint32_t h = 0; h <= 0xFFFF; ++h) {
      const auto half = static_cast<uint16_t>(h);
      const float f = fp16_to_f32(half);
      if (std::isnan(f)) {
        const uint16_t back = f32_to_fp16(f);
        QVERIFY2((back & 0x7C00) == 0x7C00 && (back & 0x03FF) != 0, qPrintable(QString::number(h, 16)));
        continue;
      }
      if (f32_to_fp16(f) != half) QFAIL(qPrintable(QStringLiteral("0x%1 did not round-trip").arg(h, 4, 16)));
    }
  }

  void bf16_known_values() {
    QCOMPARE(bf16_to_f32(0x3F80), 1.0f);
    QCOMPARE(bf16_to_f32(0xC040), -3.0f);
    QCOMPARE(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
    QCOMPARE(bf16_to_f32(0x0001), std::bit_cast<float>(0x00010000u));  // subnormal
    QVERIFY(std::isnan(bf16_to_f32(0x7FC0)));
    QCOMPARE(f32_to_bf16(1.0f), uint16_t{0x3F80});
    QCOMPARE(f32_to_bf16(-3.0f), uint16_t{0xC040});
    QCOMPARE(f32_to_bf16(std::numeric_limits<float>::infinity()), uint16_t{0x7F80});
    QCOMPARE(f32_to_bf16(std::numeric_limits<float>::max()), uint16_t{0x7F80});  // past the tie
    QCOMPARE(f32_to_bf16(std::bit_cast<float>(0x00010000u)), uint16_t{0x0001});
  }

  void bf16_ties_round_to_even_and_nan_stays_nan() {
    QCOMPARE(f32_to_bf16(1.0f + 0x1p-8f), uint16_t{0x3F80});            // tie, even stays
    QCOMPARE(f32_to_bf16(1.0f + 3.0f * 0x1p-8f), uint16_t{0x3F82});     // tie, odd goes up
    QCOMPARE(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), uint16_t{0x3F81});
    QCOMPARE(f32_to_bf16(-(1.0f + 0x1p-8f + 0x1p-20f)), uint16_t{0xBF81});
    // Truncating 0x7F800001 would give 0x7F80 (inf); the quiet bit keeps it a NaN.
    QCOMPARE(f32_to_bf16(std::bit_cast<float>(0x7F800001u)), uint16_t{0x7FC0});
    QCOMPARE(f32_to_bf16(std::bit_cast<float>(0xFFC00000u)), uint16_t{0xFFC0});
  }

  void bf16_round_trip_is_exact_for_every_bf16() {
    for (uint32_t b = 0; b <= 0xFFFF; ++b) {
      const auto value = static_cast<uint16_t>(b);
      const float f = bf16_to_f32(value);
      if (std::isnan(f)) {
        QVERIFY(std::isnan(bf16_to_f32(f32_to_bf16(f))));
        continue;
      }
      if (f32_to_bf16(f) != value) QFAIL(qPrintable(QStringLiteral("0x%1 did not round-trip").arg(b, 4, 16)));
    }
  }
};

QTEST_APPLESS_MAIN(TestHalfConversions)
#include "test_half_conversions.moc"
