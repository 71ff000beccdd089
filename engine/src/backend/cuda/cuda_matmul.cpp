// Weight products on the device: Q4_0 / Q8_0 / Q6_K in the split layout on int8 activations, the matvec
// kernels (weights dequantized in registers) for up to kCudaMatvecMaxTokens tokens, cuBLAS for more (f32 weights as
// they are; others through an f16 copy of the weight and f16 activations, accumulating in f32). Batch-invariant mode
// runs every token through its own one-token matvec, so a token's result never depends on its batch.
#include "backend/cuda/cuda_forward_backend.h"

#include "backend/cuda/cuda_status.h"
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "plan/plan_weights.h"

#include <algorithm>
#include <array>
#include <string>

namespace iwb::cuda {

// The int8 buffer holds kSplitMaxTokens tokens: every int8 product of the matvec path fits.
static_assert(kCudaMatvecMaxTokens <= kSplitMaxTokens, "a matvec step's tokens fit the int8 activations");

int64_t CudaForwardBackend::int8_launch_tokens(const DeviceMatrix& w, int64_t n) const {
  const bool is_below_cublas = n <= kCudaMatvecMaxTokens || m_is_batch_invariant || m_x16.data() == nullptr;
  // The split layout: int8 activations, up to kSplitMaxTokens tokens a launch.
  if (w.is_split) return n <= kSplitMaxTokens || is_below_cublas ? kSplitMaxTokens : 0;
  // The matvec path below cuBLAS: one token a launch, Q4_K up to 8; batch-invariant mode one.
  if (!is_below_cublas || !m_use_q8_input || w.in_features > m_q8_capacity) return 0;
  const int64_t q8_tokens = m_is_batch_invariant ? 1 : cuda_matvec_q8_input_max_tokens(w.type);
  return q8_tokens >= 1 && (n <= q8_tokens || m_is_batch_invariant) ? q8_tokens : 0;
}

Status CudaForwardBackend::matmul(const PlanOp& op, int part, const float* x, int64_t n, float* y) {
  const PlanProduct& p = op.products[static_cast<size_t>(part)];
  const int64_t layer = op.layer;
  const char* name = p.name;
  const float* bias = nullptr;
  const DeviceMatrix& w = product_matrix(op, part, &bias);
  cudaStream_t stream = m_stream.get();
  if (m_observer != nullptr) {
    // imatrix collection wants the input on the host: a copy and a wait per matmul (slow, and
    // only while an observer is set; such steps never run as graphs).
    m_observed.resize(static_cast<size_t>(n * w.in_features));
    IWB_RETURN_IF_ERROR(
        fail(cudaMemcpyAsync(m_observed.data(), x, m_observed.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
             std::string("copying the ") + name + " input for the activation observer"));
    IWB_RETURN_IF_ERROR(fail(cudaStreamSynchronize(stream), std::string("running up to the ") + name + " matmul"));
    m_observer->observe_matmul_input(name, layer, m_observed.data(), n, w.in_features);
  }
  IWB_RETURN_IF_ERROR(op_begin());
  // Messages are built only on failure: this runs for every matmul of an eager step.
  auto what = [&](const char* part) { return std::string("the ") + name + " matmul" + part; };
  const int64_t q8_tokens = int8_launch_tokens(w, n);
  if (w.is_split && q8_tokens > 0) {
    // Q4_0 / Q8_0 / Q6_K in the split layout: int8 activations, up to 8 tokens a launch. A token's result does
    // not depend on the others in the launch, so batch-invariant mode needs no special case.
    for (int64_t first = 0; first < n; first += kSplitMaxTokens) {
      const int64_t count = std::min(kSplitMaxTokens, n - first);
      const float* xt = x + first * w.in_features;
      IWB_RETURN_IF_ERROR(quantize_input_q8(xt, count, w.in_features, name, layer));
      SplitMatvecArgs a;
      a.type = w.type;
      a.weight = w.data;
      a.in_features = w.in_features;
      a.out_features = w.out_features;
      a.x_q8 = m_x_q8.as<int8_t>();
      a.x_q8_scale = m_x_q8_scale;
      a.num_tokens = count;
      a.y = y + first * w.out_features;
      a.bias = bias;
      if (const cudaError_t e = matvec_split_cuda(a, stream); e != cudaSuccess) {
        return launched(e, what("").c_str(), layer);
      }
    }
    return op_end(op, part, n);
  }
  if (n <= kCudaMatvecMaxTokens || m_is_batch_invariant || m_x16.data() == nullptr) {
    MatvecCudaArgs a;
    a.type = w.type;
    a.weight = w.data;
    a.in_features = w.in_features;
    a.out_features = w.out_features;
    a.bias = bias;
    // Q4_0 / Q8_0 / Q6_K in GGUF layout (IWB_CUDA_SPLIT=0), Q4_K: int8 activations and integer dot products, the
    // input quantized once for all of this op's products (q, k and v; gate and up). One token a
    // launch, Q4_K up to 8 sharing each weight load; batch-invariant mode launches a token alone.
    if (q8_tokens > 0) {
      for (int64_t first = 0; first < n; first += q8_tokens) {
        const int64_t count = std::min(q8_tokens, n - first);
        const float* xt = x + first * w.in_features;
        IWB_RETURN_IF_ERROR(quantize_input_q8(xt, count, w.in_features, name, layer));
        a.num_tokens = count;
        a.x = xt;
        a.y = y + first * w.out_features;
        a.x_q8 = m_x_q8.as<int8_t>();
        a.x_q8_scale = m_x_q8_scale;
        if (const cudaError_t e = matvec_cuda(a, stream); e != cudaSuccess) return launched(e, what("").c_str(), layer);
      }
      return op_end(op, part, n);
    }
    const int64_t step = m_is_batch_invariant ? 1 : kCudaMatvecMaxTokens;
    for (int64_t first = 0; first < n; first += step) {
      a.num_tokens = std::min(step, n - first);
      a.x = x + first * w.in_features;
      a.y = y + first * w.out_features;
      if (const cudaError_t e = matvec_cuda(a, stream); e != cudaSuccess) return launched(e, what("").c_str(), layer);
    }
  } else {
    IWB_RETURN_IF_ERROR(gemm(w, x, n, y));
    if (bias != nullptr) {
      if (const cudaError_t e = add_bias_rows_cuda(y, bias, n, w.out_features, stream); e != cudaSuccess) {
        return launched(e, what("'s bias").c_str(), layer);
      }
    }
  }
  return op_end(op, part, n);
}

const DeviceMatrix& CudaForwardBackend::product_matrix(const PlanOp& op, int part, const float** bias) const {
  const PlanProduct& p = op.products[static_cast<size_t>(part)];
  if (p.matrix == PlanMatrix::Output) {
    *bias = nullptr;
    return m_weights.output;
  }
  const auto& layer = m_weights.layers[static_cast<size_t>(op.layer)];
  const float* const no_bias = nullptr;
  *bias = plan::layer_bias(layer, p.matrix, no_bias);
  // The router is no layer_matrix (whose host twin sits apart), as on the CPU.
  return p.matrix == PlanMatrix::FfnGateInp ? layer.ffn_gate_inp : plan::layer_matrix(layer, p.matrix);
}

bool CudaForwardBackend::can_group_products(const PlanOp& op, int64_t n) const {
  if (!m_group_products || op.num_products < 2 || op.num_products > std::min(kSplitMaxParts, kMatvecMaxParts) ||
      is_recording() || m_observer != nullptr) {
    return false;
  }
  const float* bias = nullptr;
  const DeviceMatrix& first = product_matrix(op, 0, &bias);
  const bool is_float = first.type == GgmlType::F16 || first.type == GgmlType::BF16 || first.type == GgmlType::F32;
  const bool is_q4_k = first.type == GgmlType::Q4_K && m_use_q8_input;  // Q4_K's int8 kernel
  if (!first.is_split && !is_float && !is_q4_k) return false;
  // matmul()'s choice of path: the split or matvec kernels, in chunks where cuBLAS is not taken.
  const int64_t most = first.is_split ? kSplitMaxTokens : kCudaMatvecMaxTokens;
  if (!(n <= most || m_is_batch_invariant || m_x16.data() == nullptr)) return false;
  for (int part = 1; part < op.num_products; ++part) {
    const DeviceMatrix& w = product_matrix(op, part, &bias);
    if (w.is_split != first.is_split || w.type != first.type || w.in_features != first.in_features) return false;
  }
  return true;
}

bool CudaForwardBackend::products_take_q8(const PlanOp& op, int64_t n) const {
  if (!m_fuse_q8 || m_observer != nullptr || n < 1) return false;
  for (int part = 0; part < op.num_products; ++part) {
    const float* bias = nullptr;
    // A product that quantizes all n tokens in its first launch reads exactly what was prepared.
    if (int8_launch_tokens(product_matrix(op, part, &bias), n) >= n) return true;
  }
  return false;
}

Status CudaForwardBackend::matmul_group(const PlanOp& op, const float* x, int64_t n) {
  const int count = op.num_products;
  std::array<const DeviceMatrix*, kSplitMaxParts> weights{};
  std::array<const float*, kSplitMaxParts> biases{};
  std::array<float*, kSplitMaxParts> outputs{};
  for (int part = 0; part < count; ++part) {
    const auto i = static_cast<size_t>(part);
    weights[i] = &product_matrix(op, part, &biases[i]);
    outputs[i] = buffer(op.products[i].output);
  }
  const int64_t in_features = weights[0]->in_features;
  const bool is_split = weights[0]->is_split;
  // Batch-invariant mode runs the matvec kernels a token at a time, as matmul() does.
  const int64_t step = is_split ? kSplitMaxTokens : (m_is_batch_invariant ? 1 : kCudaMatvecMaxTokens);
  auto failed = [&](cudaError_t e) {
    return launched(e, (std::string("the ") + op.products[0].name + " matmul group").c_str(), op.layer);
  };
  for (int64_t first = 0; first < n; first += step) {
    const int64_t tokens = std::min(step, n - first);
    const float* xt = x + first * in_features;
    if (is_split) {
      IWB_RETURN_IF_ERROR(quantize_input_q8(xt, tokens, in_features, op.products[0].name, op.layer));
      std::array<SplitMatvecArgs, kSplitMaxParts> parts{};
      for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
        SplitMatvecArgs& a = parts[i];
        a.type = weights[i]->type;
        a.weight = weights[i]->data;
        a.in_features = in_features;
        a.out_features = weights[i]->out_features;
        a.bias = biases[i];
        a.x_q8 = m_x_q8.as<int8_t>();
        a.x_q8_scale = m_x_q8_scale;
        a.num_tokens = tokens;
        a.y = outputs[i] + first * a.out_features;
      }
      if (const cudaError_t e = matvec_split_group_cuda(parts.data(), count, m_stream.get()); e != cudaSuccess) {
        return failed(e);
      }
    } else {
      const bool is_q8 = weights[0]->type == GgmlType::Q4_K;  // can_group_products: int8 activations on
      if (is_q8) IWB_RETURN_IF_ERROR(quantize_input_q8(xt, tokens, in_features, op.products[0].name, op.layer));
      std::array<MatvecCudaArgs, kMatvecMaxParts> parts{};
      for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
        MatvecCudaArgs& a = parts[i];
        a.type = weights[i]->type;
        a.weight = weights[i]->data;
        a.in_features = in_features;
        a.out_features = weights[i]->out_features;
        a.bias = biases[i];
        a.x = xt;
        a.num_tokens = tokens;
        a.y = outputs[i] + first * a.out_features;
        if (is_q8) {
          a.x_q8 = m_x_q8.as<int8_t>();
          a.x_q8_scale = m_x_q8_scale;
        }
      }
      // matvec_group_cuda checks the parts itself and launches nothing when it refuses them (a
      // part off the vectorised or int8 kernel: a row not a multiple of 16 bytes); then each goes
      // alone.
      cudaError_t e = matvec_group_cuda(parts.data(), count, m_stream.get());
      if (e == cudaErrorInvalidValue) {
        e = cudaSuccess;
        for (size_t i = 0; e == cudaSuccess && i < static_cast<size_t>(count); ++i)
          e = matvec_cuda(parts[i], m_stream.get());
      }
      if (e != cudaSuccess) return failed(e);
    }
  }
  return {};
}

Status CudaForwardBackend::quantize_input_q8(const float* x, int64_t n, int64_t in_features, const char* name,
                                             int64_t layer) {
  if (x == m_q8_source && n == m_q8_tokens) return {};
  if (in_features > m_q8_capacity || n > kSplitMaxTokens) {
    return make_error(ErrorCode::InvalidArgument,
                      std::string("the ") + name + " matmul's input is wider than the int8 buffer");
  }
  if (const cudaError_t e = quantize_x_q8_cuda(x, n * in_features, m_x_q8.as<int8_t>(), m_x_q8_scale, m_stream.get());
      e != cudaSuccess) {
    return launched(e, (std::string("the ") + name + " matmul's input quantization").c_str(), layer);
  }
  m_q8_source = x;
  m_q8_tokens = n;
  return {};
}

Status CudaForwardBackend::gemm(const DeviceMatrix& w, const float* x, int64_t n, float* y) {
  cudaStream_t stream = m_stream.get();
  const float one = 1.0f, zero = 0.0f;
  const auto m = static_cast<int>(w.out_features);
  const auto k = static_cast<int>(w.in_features);
  const auto cols = static_cast<int>(n);
  // Row-major W [out x in] is column-major [in x out]: y^T (out x n) = W (out x in) . x^T (in x n).
  auto failed = [&](cublasStatus_t status, const char* kind) {
    return status_from(status, "cuda:" + std::to_string(m_device) + ": the " + kind + " GEMM (" + std::to_string(m) +
                                   " x " + std::to_string(k) + ", " + std::to_string(cols) + " tokens)");
  };
  if (w.type == GgmlType::F32) {
    const cublasStatus_t status =
        cublasGemmEx(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, cols, k, &one, w.data, CUDA_R_32F, k, x, CUDA_R_32F, k,
                     &zero, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return status == CUBLAS_STATUS_SUCCESS ? Status{} : failed(status, "f32");
  }
  const void* a = w.data;
  if (w.is_split) {
    IWB_RETURN_IF_ERROR(
        launched(dequantize_split_f16_cuda(w.type, w.data, m_w16.as<uint16_t>(), w.out_features, w.in_features, stream),
                 "dequantizing a weight to f16 for cuBLAS", -1));
    a = m_w16.data();
  } else if (w.type != GgmlType::F16) {
    IWB_RETURN_IF_ERROR(
        launched(dequantize_rows_f16_cuda(w.type, w.data, m_w16.as<uint16_t>(), w.out_features, w.in_features, stream),
                 "dequantizing a weight to f16 for cuBLAS", -1));
    a = m_w16.data();
  }
  auto* x16 = m_x16.as<uint16_t>();
  if (x != m_x16_source || n * w.in_features != m_x16_values) {  // else this op's earlier product converted it
    m_x16_source = nullptr;
    IWB_RETURN_IF_ERROR(
        launched(f32_to_f16_cuda(x, x16, n * w.in_features, stream), "converting activations to f16", -1));
    m_x16_source = x;
    m_x16_values = n * w.in_features;
  }
  const cublasStatus_t status =
      cublasGemmEx(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, cols, k, &one, a, CUDA_R_16F, k, x16, CUDA_R_16F, k, &zero, y,
                   CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return status == CUBLAS_STATUS_SUCCESS ? Status{} : failed(status, "f16");
}

}  // namespace iwb::cuda
