// Microbenchmark of matvec_cuda on the llama-3-8b matrix shapes: time per call from CUDA events,
// weight bytes read per second, and that rate as a share of a peak bandwidth given with
// --peak-gbs. Prints a message and exits 0 on a machine without a usable CUDA device. Rows marked
// "pdl" launch the same products programmatically (launch_cuda.h): each call may start, and
// prefetch its weights, while the call before it finishes.
//   bench_cuda_matvec [--peak-gbs 3350] [--types F16,Q4_0,...] [--min-ms 20]
#include "iwb/kernels/cuda/launch_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

using namespace iwb;

namespace {

struct Shape {
  const char* name;
  int64_t in_features;
  int64_t out_features;
};

// llama-3-8b: attention projections, MLP gate/up, MLP down, output head.
constexpr Shape kShapes[] = {
    {"attn 4096x4096", 4096, 4096},
    {"gate/up 4096x14336", 4096, 14336},
    {"down 14336x4096", 14336, 4096},
    {"head 4096x128256", 4096, 128256},
};

// Enough distinct copies of the weights that the working set is several times the L2 cache
// (50 MiB on an H100): every call then reads its weights from DRAM, as in a real forward pass.
constexpr size_t kMinWorkingSetBytes = size_t{512} << 20;

bool check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "bench_cuda_matvec: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

std::vector<GgmlType> parse_types(std::string_view list) {
  std::vector<GgmlType> types;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    const auto type = ggml_type_from_name(name);
    if (!type || !cuda_matvec_supports(*type)) {
      std::fprintf(stderr, "bench_cuda_matvec: type '%.*s' has no CUDA matvec kernel\n", static_cast<int>(name.size()),
                   name.data());
      std::exit(2);
    }
    types.push_back(*type);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return types;
}

// Mean milliseconds per call of launch(weights) over at least min_ms of calls, rotating through
// the weight copies; negative on a CUDA error (already reported).
template <typename Launch>
double time_calls(Launch&& launch, const std::vector<uint8_t*>& copies, double min_ms, cudaStream_t stream) {
  cudaEvent_t start = nullptr, stop = nullptr;
  if (!check(cudaEventCreate(&start), "cudaEventCreate")) return -1;
  if (!check(cudaEventCreate(&stop), "cudaEventCreate")) {
    cudaEventDestroy(start);
    return -1;
  }
  // Launches num_calls calls (argument errors come back at once, execution errors at the sync).
  auto run = [&](int num_calls) {
    for (int i = 0; i < num_calls; ++i) {
      if (!check(launch(copies[static_cast<size_t>(i) % copies.size()]), "the product")) return false;
    }
    return true;
  };
  double result = -1;
  bool is_ok = run(3) && check(cudaStreamSynchronize(stream), "matvec_cuda warm-up");  // warm-up
  for (int num_calls = 8, attempt = 0; is_ok && attempt < 14; ++attempt, num_calls *= 2) {
    is_ok = check(cudaEventRecord(start, stream), "cudaEventRecord") && run(num_calls) &&
            check(cudaEventRecord(stop, stream), "cudaEventRecord") &&
            check(cudaEventSynchronize(stop), "matvec_cuda run");
    float ms = 0;
    if (is_ok) is_ok = check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (is_ok) result = ms / num_calls;
    if (ms >= min_ms) break;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return is_ok ? result : -1;
}

}  // namespace

int main(int argc, char** argv) {
  double peak_gbs = 0;
  double min_ms = 20;
  std::vector<GgmlType> types = {GgmlType::F16,  GgmlType::BF16, GgmlType::F32,  GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--peak-gbs" && i + 1 < argc) {
      peak_gbs = std::atof(argv[++i]);
    } else if (arg == "--types" && i + 1 < argc) {
      types = parse_types(argv[++i]);
    } else if (arg == "--min-ms" && i + 1 < argc) {
      min_ms = std::max(1.0, std::atof(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_cuda_matvec [--peak-gbs GB/s] [--types F16,Q4_0,...] [--min-ms ms]\n");
      return 2;
    }
  }

  int num_devices = 0;
  const cudaError_t device_error = cudaGetDeviceCount(&num_devices);
  if (device_error != cudaSuccess || num_devices == 0) {
    std::printf("bench_cuda_matvec: no CUDA device (%s); nothing measured\n",
                device_error != cudaSuccess ? cudaGetErrorString(device_error) : "none found");
    return 0;
  }
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, 0);
  std::printf("device 0: %s; weights rotated over >= %zu MiB of copies (DRAM reads, not L2)\n", props.name,
              kMinWorkingSetBytes >> 20);
  std::printf("%-6s %-20s %12s %10s %9s %7s\n", "type", "shape", "tokens", "us/call", "GB/s", "%peak");
  // A stream of its own: programmatic launches need one (not the legacy default stream).
  cudaStream_t stream = nullptr;
  if (!check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;
  // Programmatic launch needs compute capability 9.0 (the engine's rule, cuda_step_plan.h).
  const bool has_pdl = props.major >= 9;

  float* d_x = nullptr;
  float* d_y = nullptr;
  int64_t max_in = 0, max_out = 0;
  for (const Shape& s : kShapes) {
    max_in = std::max(max_in, s.in_features);
    max_out = std::max(max_out, s.out_features);
  }
  int8_t* d_q = nullptr;  // int8 activations (zeros: timing does not depend on the values)
  float* d_scale = nullptr;
  const auto q_bytes = static_cast<size_t>(max_in * kSplitMmaMaxTokens);
  int32_t* d_sums = nullptr;  // the activation blocks' sums (zeros)
  if (!check(cudaMalloc(reinterpret_cast<void**>(&d_sums), sizeof(int32_t) * (q_bytes / 32)), "cudaMalloc sums") ||
      !check(cudaMemset(d_sums, 0, sizeof(int32_t) * (q_bytes / 32)), "cudaMemset sums")) {
    return 1;
  }
  if (!check(cudaMalloc(reinterpret_cast<void**>(&d_q), q_bytes), "cudaMalloc q") ||
      !check(cudaMemset(d_q, 0, q_bytes), "cudaMemset q") ||
      !check(cudaMalloc(reinterpret_cast<void**>(&d_scale), sizeof(float) * (q_bytes / 32)), "cudaMalloc scale") ||
      !check(cudaMemset(d_scale, 0, sizeof(float) * (q_bytes / 32)), "cudaMemset scale")) {
    return 1;
  }
  if (!check(cudaMalloc(reinterpret_cast<void**>(&d_x), sizeof(float) * kCudaMatvecMaxTokens * max_in),
             "cudaMalloc x") ||
      !check(cudaMalloc(reinterpret_cast<void**>(&d_y), sizeof(float) * kSplitMmaMaxTokens * max_out),
             "cudaMalloc y") ||
      !check(cudaMemset(d_x, 0, sizeof(float) * kCudaMatvecMaxTokens * max_in), "cudaMemset x")) {
    return 1;
  }
  int exit_code = 0;
  for (GgmlType type : types) {
    for (const Shape& shape : kShapes) {
      const size_t weight_bytes = *ggml_row_bytes(type, shape.in_features) * static_cast<size_t>(shape.out_features);
      const size_t num_copies = std::clamp<size_t>(kMinWorkingSetBytes / weight_bytes + 1, 1, 64);
      std::vector<uint8_t*> copies;
      bool is_ok = true;
      for (size_t c = 0; c < num_copies && is_ok; ++c) {
        uint8_t* d_weight = nullptr;
        is_ok = check(cudaMalloc(reinterpret_cast<void**>(&d_weight), weight_bytes), "cudaMalloc weights");
        // 0x3C bytes: finite f16/bf16 values and scales; timing does not depend on the values.
        if (is_ok) is_ok = check(cudaMemset(d_weight, 0x3C, weight_bytes), "cudaMemset weights");
        if (d_weight != nullptr) copies.push_back(d_weight);
      }
      // 1 and 8 tokens, then (Q4_0, Q8_0, Q4_K, Q6_K) one token against int8 activations ("1 q8"), then
      // (Q4_0, Q8_0, Q6_K) the split layout the engine uploads, 1 and 8 tokens ("1 split", "8
      // split"), and (Q4_0, Q8_0) its tensor-core product of 16 and 64 tokens ("16 mma", "64 mma").
      // Then (Q4_K) 8 tokens against int8 activations sharing each weight load ("8 q8"). Last,
      // on compute capability 9.0 and up, one token again (GGUF layout, then split) launched
      // programmatically ("1 pdl", "1 split pdl").
      for (int variant = 0; variant < 10 && is_ok; ++variant) {
        const bool is_pdl = variant >= 8;
        const bool is_q8_input = variant == 2 || variant == 7,
                   is_split = (variant >= 3 && variant <= 6) || variant == 9, is_mma = variant == 5 || variant == 6;
        if (is_pdl && !has_pdl) continue;
        if (is_split && !has_split_blocks(type)) continue;
        if (is_mma && type == GgmlType::Q6_K) continue;  // the tensor-core product is Q4_0 / Q8_0 only
        if (variant == 2 && !cuda_matvec_takes_q8_input(type)) continue;
        if (variant == 7 && cuda_matvec_q8_input_max_tokens(type) < kCudaMatvecMaxTokens) continue;
        const int64_t num_tokens = variant == 1 || variant == 7 ? kCudaMatvecMaxTokens
                                   : variant == 4               ? kSplitMaxTokens
                                   : variant == 5               ? 16
                                   : variant == 6               ? kSplitMmaMaxTokens
                                                                : 1;
        MatvecCudaArgs args;
        args.type = type;
        args.in_features = shape.in_features;
        args.out_features = shape.out_features;
        args.x = d_x;
        args.num_tokens = num_tokens;
        args.y = d_y;
        if (is_q8_input) {
          args.x_q8 = d_q;
          args.x_q8_scale = d_scale;
        }
        SplitMatvecArgs split;
        split.type = type;
        split.in_features = shape.in_features;
        split.out_features = shape.out_features;
        split.x_q8 = d_q;
        split.x_q8_scale = d_scale;
        split.x_q8_sum = d_sums;
        split.num_tokens = num_tokens;
        split.y = d_y;
        set_cuda_programmatic_launch(is_pdl);
        const double ms = time_calls(
            [&](uint8_t* w) {
              if (!is_split) {
                args.weight = w;
                return matvec_cuda(args, stream);
              }
              split.weight = w;
              return is_mma ? matmul_split_mma_cuda(split, stream) : matvec_split_cuda(split, stream);
            },
            copies, min_ms, stream);
        set_cuda_programmatic_launch(false);
        if (ms <= 0) {
          is_ok = false;
          break;
        }
        const double gbs = static_cast<double>(weight_bytes) / (ms * 1e-3) / 1e9;
        char percent[16] = "-";
        if (peak_gbs > 0) std::snprintf(percent, sizeof(percent), "%.1f", 100.0 * gbs / peak_gbs);
        const std::string_view name = ggml_type_name(type);
        const std::string tokens = std::to_string(num_tokens) +
                                   (is_mma        ? " mma"
                                    : is_split    ? " split"
                                    : is_q8_input ? " q8"
                                                  : "") +
                                   (is_pdl ? " pdl" : "");
        std::printf("%-6.*s %-20s %12s %10.2f %9.1f %7s\n", static_cast<int>(name.size()), name.data(), shape.name,
                    tokens.c_str(), ms * 1e3, gbs, percent);
      }
      for (uint8_t* d_weight : copies) cudaFree(d_weight);
      if (!is_ok) exit_code = 1;
    }
  }
  cudaStreamDestroy(stream);
  cudaFree(d_q);
  cudaFree(d_sums);
  cudaFree(d_scale);
  cudaFree(d_x);
  cudaFree(d_y);
  return exit_code;
}
