// Names and shape text of kernel records.
#include "iwb/engine/profile/kernel_record.h"

#include <cstdio>

namespace iwb {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Embedding: return "embedding";
    case OpKind::RmsNorm: return "rmsnorm";
    case OpKind::Matmul: return "matmul";
    case OpKind::Rope: return "rope";
    case OpKind::KvWrite: return "kv_write";
    case OpKind::Attention: return "attention";
    case OpKind::Activation: return "activation";
    case OpKind::Add: return "add";
    case OpKind::Logits: return "logits";
    case OpKind::Softcap: return "softcap";
    case OpKind::Softmax: return "softmax";
    case OpKind::ExpertMatmul: return "expert_matmul";
    case OpKind::Recurrent: return "recurrent";
  }
  return "unknown";
}

const char* phase_name(Phase phase) { return phase == Phase::Prefill ? "prefill" : "decode"; }

std::string DeviceRef::id() const {
  return kind == ComputeDeviceKind::Cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::string KernelRecord::shape_text() const {
  const OpShape& s = shape;
  const auto n = static_cast<long long>(s.num_tokens);
  const auto rows = static_cast<long long>(s.rows);
  const auto cols = static_cast<long long>(s.cols);
  const std::string type(ggml_type_name(data_type));
  char buf[160];
  switch (kind) {
    case OpKind::Matmul:
    case OpKind::Logits: std::snprintf(buf, sizeof buf, "%lldx%lld %s, %lld tok", cols, rows, type.c_str(), n); break;
    case OpKind::ExpertMatmul:
      std::snprintf(buf, sizeof buf, "%lldx%lld %s, %d experts x %lld tok (top %d)", cols, rows, type.c_str(),
                    s.num_experts, n, s.num_experts_used);
      break;
    case OpKind::RmsNorm:
    case OpKind::Softmax: std::snprintf(buf, sizeof buf, "%lldx%lld, %lld tok", rows, cols, n); break;
    case OpKind::Rope: std::snprintf(buf, sizeof buf, "%dx%d, %lld tok", s.num_heads, s.head_dim, n); break;
    case OpKind::KvWrite:
      std::snprintf(buf, sizeof buf, "%dx(%d+%d) %s, %lld tok", s.num_kv_heads, s.head_dim, s.head_dim_v, type.c_str(),
                    n);
      break;
    case OpKind::Attention:
      if (s.window > 0) {
        std::snprintf(buf, sizeof buf, "%d/%d heads x %d, ctx %lld, window %d, %lld tok", s.num_heads, s.num_kv_heads,
                      s.head_dim, static_cast<long long>(s.num_kv), s.window, n);
      } else {
        std::snprintf(buf, sizeof buf, "%d/%d heads x %d, ctx %lld, %lld tok", s.num_heads, s.num_kv_heads, s.head_dim,
                      static_cast<long long>(s.num_kv), n);
      }
      break;
    case OpKind::Embedding: std::snprintf(buf, sizeof buf, "%lld %s, %lld tok", cols, type.c_str(), n); break;
    case OpKind::Activation:
    case OpKind::Add: std::snprintf(buf, sizeof buf, "%lld, %lld tok", cols, n); break;
    case OpKind::Softcap: std::snprintf(buf, sizeof buf, "%lld", cols); break;
    case OpKind::Recurrent:  // the convolution: channels x taps; the delta rule: heads x head size
      std::snprintf(buf, sizeof buf, "%lldx%lld, %lld tok", rows, cols, n);
      break;
  }
  return buf;
}

double ProfileBatch::kernel_seconds() const {
  double total = 0;
  for (const KernelRecord& r : kernels) total += r.seconds;
  return total;
}

}  // namespace iwb
