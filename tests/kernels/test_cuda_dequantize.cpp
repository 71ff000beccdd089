// dequantize_row_cuda against dequantize_row_ref for every CUDA type, on random blocks with
// an odd block count. Skips, saying why, when no CUDA device is usable.
#include "iwb/engine/backend/device_info.h"
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quant_blocks.h"

#include <QTest>

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

using namespace iwb;

namespace {

constexpr int64_t kNumBlocks = 37;

// Random bytes for a row of `type`, with every fp16 scale field replaced by a finite,
// moderate value (random bits would give inf/NaN scales that compare as mismatches).
std::vector<uint8_t> random_row(GgmlType type, int64_t num_elements, std::mt19937& rng) {
  const size_t num_bytes = *ggml_row_bytes(type, num_elements);
  std::vector<uint8_t> bytes(num_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto put_scale = [&](size_t offset, float scale) {
    const uint16_t h = f32_to_fp16(normal(rng) * scale);
    bytes[offset] = static_cast<uint8_t>(h & 0xFF);
    bytes[offset + 1] = static_cast<uint8_t>(h >> 8);
  };
  const size_t block_bytes = ggml_type_traits(type).bytes_per_block;
  for (size_t base = 0; base < num_bytes; base += block_bytes) {
    switch (type) {
      case GgmlType::F16: put_scale(base, 100.0f); break;
      case GgmlType::BF16: {
        const uint32_t bits = std::bit_cast<uint32_t>(normal(rng) * 100.0f);
        bytes[base] = static_cast<uint8_t>(bits >> 16);
        bytes[base + 1] = static_cast<uint8_t>(bits >> 24);
        break;
      }
      case GgmlType::Q8_0: put_scale(base + offsetof(BlockQ8_0, d), 0.05f); break;
      case GgmlType::Q4_0: put_scale(base + offsetof(BlockQ4_0, d), 0.1f); break;
      case GgmlType::Q4_K:
        put_scale(base + offsetof(BlockQ4_K, d), 0.01f);
        put_scale(base + offsetof(BlockQ4_K, dmin), 0.01f);
        break;
      case GgmlType::Q6_K: put_scale(base + offsetof(BlockQ6_K, d), 0.001f); break;
      default: break;
    }
  }
  return bytes;
}

#define CUDA_VERIFY(call)                                                         \
  do {                                                                            \
    const cudaError_t error_ = (call);                                            \
    QVERIFY2(error_ == cudaSuccess, qPrintable(QStringLiteral("%1: %2").arg(#call, \
                                                                 cudaGetErrorString(error_)))); \
  } while (0)

}  // namespace

class TestCudaDequantize : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const auto devices = list_cuda_devices();
    if (!devices.is_ok()) {
      QSKIP(qPrintable(QStringLiteral("CUDA dequantization not tested: %1")
                           .arg(QString::fromStdString(devices.error_message()))));
    }
    qInfo("testing on %s (%s)", devices->front().id.c_str(), devices->front().name.c_str());
  }

  void matches_reference_data() {
    QTest::addColumn<int>("type_id");
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                          GgmlType::Q4_K, GgmlType::Q6_K}) {
      QTest::newRow(std::string(ggml_type_name(type)).c_str()) << static_cast<int>(type);
    }
  }

  void matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    QVERIFY(cuda_can_dequantize(type));
    // Block-size-1 types get an odd element count instead.
    const int64_t block_size = ggml_type_traits(type).block_size;
    const int64_t num_elements = block_size == 1 ? 769 * kNumBlocks : kNumBlocks * block_size;
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 7919u + 1u);
    const std::vector<uint8_t> bytes = random_row(type, num_elements, rng);

    std::vector<float> expected(static_cast<size_t>(num_elements));
    QVERIFY(dequantize_row_ref(type, bytes.data(), expected.data(), num_elements));  // reference first

    void* d_src = nullptr;
    float* d_dst = nullptr;
    CUDA_VERIFY(cudaMalloc(&d_src, bytes.size()));
    CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_dst), expected.size() * sizeof(float)));
    CUDA_VERIFY(cudaMemcpy(d_src, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    CUDA_VERIFY(cudaMemset(d_dst, 0xFF, expected.size() * sizeof(float)));  // NaN if unwritten
    CUDA_VERIFY(dequantize_row_cuda(type, d_src, d_dst, num_elements, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    std::vector<float> got(expected.size());
    CUDA_VERIFY(cudaMemcpy(got.data(), d_dst, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d_src);
    cudaFree(d_dst);

    float max_abs = 0.0f;
    for (float v : expected) max_abs = std::max(max_abs, std::fabs(v));
    for (size_t i = 0; i < got.size(); ++i) {
      // Relative error, with a floor for values that cancel (d*sc*q - dmin*m) near zero,
      // where a fused multiply-add on the GPU legitimately differs in the last bits.
      const float tolerance = 1e-5f * std::fabs(expected[i]) + 1e-6f * max_abs;
      if (!(std::fabs(got[i] - expected[i]) <= tolerance)) {
        QFAIL(qPrintable(QStringLiteral("%1 element %2: GPU %3, reference %4")
                             .arg(QString::fromUtf8(ggml_type_name(type).data(),
                                                    static_cast<int>(ggml_type_name(type).size())))
                             .arg(i).arg(got[i], 0, 'g', 9).arg(expected[i], 0, 'g', 9)));
      }
    }
  }

  void rejects_what_it_cannot_do() {
    void* d_src = nullptr;
    float* d_dst = nullptr;
    CUDA_VERIFY(cudaMalloc(&d_src, 1024));
    CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_dst), 1024 * sizeof(float)));
    QCOMPARE(dequantize_row_cuda(GgmlType::Q4_0, d_src, d_dst, 33, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_row_cuda(GgmlType::Q8_K, d_src, d_dst, 256, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_row_cuda(GgmlType::Q4_0, static_cast<char*>(d_src) + 1, d_dst, 32, nullptr),
             cudaErrorInvalidValue);
    QCOMPARE(dequantize_row_cuda(GgmlType::Q4_0, d_src, d_dst, 0, nullptr), cudaSuccess);
    QCOMPARE(cudaGetLastError(), cudaSuccess);  // refusals launch nothing and leave no error
    cudaFree(d_src);
    cudaFree(d_dst);
  }
};

QTEST_APPLESS_MAIN(TestCudaDequantize)
#include "test_cuda_dequantize.moc"
