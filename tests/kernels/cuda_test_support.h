// Helpers of the CUDA kernel tests: why no device is usable (the tests skip with it), device
// buffers that free themselves, a checked-call macro, and comparison against CPU references.
#pragma once

#include <QString>
#include <QTest>

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace iwb::test {

// Empty when a CUDA device answers; otherwise the reason, for QSKIP.
inline QString cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it
    return QStringLiteral("no usable CUDA device (%1)").arg(QString::fromUtf8(cudaGetErrorString(error)));
  }
  if (count == 0) return QStringLiteral("no CUDA device present");
  void* probe = nullptr;
  if (const cudaError_t e = cudaMalloc(&probe, 256); e != cudaSuccess) {
    cudaGetLastError();
    return QStringLiteral("the CUDA device cannot allocate (%1)").arg(QString::fromUtf8(cudaGetErrorString(e)));
  }
  cudaFree(probe);
  return {};
}

// A device copy of a host vector (or uninitialised storage), freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { allocate(count); }
  explicit DeviceBuffer(const std::vector<T>& host) {
    allocate(host.size());
    if (m_ptr != nullptr && !host.empty()) {
      m_error = cudaMemcpy(m_ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (m_ptr != nullptr) cudaFree(m_ptr);
  }

  T* get() const { return m_ptr; }
  size_t size() const { return m_count; }
  cudaError_t error() const { return m_error; }  // of the allocation / upload
  std::vector<T> download() const {
    std::vector<T> host(m_count);
    if (m_count > 0) cudaMemcpy(host.data(), m_ptr, m_count * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  cudaError_t upload(const std::vector<T>& host) {
    return cudaMemcpy(m_ptr, host.data(), std::min(host.size(), m_count) * sizeof(T), cudaMemcpyHostToDevice);
  }
  // Every byte 0xFF: unwritten f32 outputs read back as NaN and fail any comparison.
  cudaError_t poison() { return cudaMemset(m_ptr, 0xFF, m_count * sizeof(T)); }

 private:
  void allocate(size_t count) {
    m_count = count;
    m_error = cudaMalloc(reinterpret_cast<void**>(&m_ptr), std::max<size_t>(count, 1) * sizeof(T));
    if (m_error != cudaSuccess) m_ptr = nullptr;
  }
  T* m_ptr = nullptr;
  size_t m_count = 0;
  cudaError_t m_error = cudaSuccess;
};

// First index where |got - expected| > abs_tol + rel_tol * |expected| (NaN fails), or -1.
inline long long first_mismatch(const std::vector<float>& got, const std::vector<float>& expected, float abs_tol,
                                float rel_tol) {
  if (got.size() != expected.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = abs_tol + rel_tol * std::fabs(expected[i]);
    if (!(std::fabs(got[i] - expected[i]) <= tol)) return static_cast<long long>(i);
  }
  return -1;
}

inline QString mismatch_message(const char* what, const std::vector<float>& got, const std::vector<float>& expected,
                                long long index) {
  return QStringLiteral("%1: element %2 of %3: GPU %4, CPU %5")
      .arg(QString::fromUtf8(what))
      .arg(index)
      .arg(expected.size())
      .arg(index < static_cast<long long>(got.size()) ? got[static_cast<size_t>(index)] : NAN, 0, 'g', 9)
      .arg(index < static_cast<long long>(expected.size()) ? expected[static_cast<size_t>(index)] : NAN, 0, 'g', 9);
}

}  // namespace iwb::test

#define CUDA_VERIFY(call)                                                                                       \
  do {                                                                                                          \
    const cudaError_t error_ = (call);                                                                          \
    QVERIFY2(error_ == cudaSuccess,                                                                             \
             qPrintable(QStringLiteral("%1: %2").arg(QString::fromUtf8(#call), QString::fromUtf8(cudaGetErrorString(error_))))); \
  } while (0)

#define COMPARE_FLOATS(what, got, expected, abs_tol, rel_tol)                                                   \
  do {                                                                                                          \
    const long long index_ = iwb::test::first_mismatch((got), (expected), (abs_tol), (rel_tol));               \
    if (index_ >= 0) QFAIL(qPrintable(iwb::test::mismatch_message((what), (got), (expected), index_)));        \
  } while (0)
