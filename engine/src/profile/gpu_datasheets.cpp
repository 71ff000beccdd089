// The GPU datasheet table. Dense figures only: the datasheets' headline tensor numbers assume
// 2:4 structured sparsity (twice the dense rate), which no served dense model uses.
#include "iwb/engine/profile/gpu_datasheets.h"

namespace iwb {
namespace {

constexpr double kTB = 1e12;  // bytes/s per TB/s (vendors' decimal units)
constexpr double kGB = 1e9;
constexpr double kTflop = 1e12;

}  // namespace

const std::vector<GpuDatasheet>& gpu_datasheets() {
  static const std::vector<GpuDatasheet> table = {
      // NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100): SXM 3.35 TB/s
      // HBM3, BF16 tensor 1,979 TFLOP/s with sparsity = 989 dense; PCIe 2.0 TB/s HBM2e, 1,513
      // sparse = 756 dense.
      {"H100 SXM", 3.35 * kTB, 989 * kTflop, "datasheet: 1979 TFLOP/s BF16 with sparsity, halved"},
      {"H100 PCIe", 2.0 * kTB, 756 * kTflop, "datasheet: 1513 TFLOP/s BF16 with sparsity, halved"},
      // NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): 4.8 TB/s HBM3e; the same
      // Hopper tensor cores as the H100 SXM (1,979 sparse).
      {"H200 SXM", 4.8 * kTB, 989 * kTflop, "datasheet: 1979 TFLOP/s BF16 with sparsity, halved"},
      // NVIDIA A100 datasheet: 80GB SXM 2,039 GB/s HBM2e; BF16 tensor 312 dense (624 sparse).
      {"A100 80GB SXM", 2.039 * kTB, 312 * kTflop, "datasheet: 312 TFLOP/s BF16 dense"},
      // NVIDIA L40S datasheet: 864 GB/s GDDR6; BF16 tensor 733 with sparsity = 362 dense.
      {"L40S", 864 * kGB, 362 * kTflop, "datasheet: 733 TFLOP/s BF16 with sparsity, halved"},
      // NVIDIA Ada Lovelace architecture whitepaper, RTX 4090: 1,008 GB/s GDDR6X; FP16 tensor
      // with FP32 accumulate 165.2 dense (330.4 sparse; 330 dense only with FP16 accumulate,
      // which inference kernels do not use for their sums).
      {"RTX 4090", 1008 * kGB, 165 * kTflop, "Ada whitepaper: FP16 tensor, FP32 accumulate, dense"},
      // AWS's A10G (G5 instances): 600 GB/s GDDR6 like the A10. NVIDIA publishes no A10G
      // datasheet; the A10's 125 TFLOP/s dense BF16 does not carry over (the A10G trades tensor
      // rate for CUDA-core rate); third-party comparisons (baseten.co, "NVIDIA A10 vs A10G for ML
      // model inference") list 70. Decode is bandwidth-bound, so this figure barely matters.
      {"A10G", 600 * kGB, 70 * kTflop, "no vendor datasheet; 70 TFLOP/s BF16 from third-party comparisons"},
      // AMD Instinct MI300X data sheet: 5.3 TB/s HBM3; 1,307.4 TFLOP/s FP16/BF16 dense (2,614.9
      // with sparsity).
      {"MI300X", 5.3 * kTB, 1307.4 * kTflop, "datasheet: 1307.4 TFLOP/s BF16 dense"},
  };
  return table;
}

const GpuDatasheet* find_gpu_datasheet(std::string_view name) {
  for (const GpuDatasheet& g : gpu_datasheets()) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

}  // namespace iwb
