// The expert ops of the forward plan on the device (routing, the experts' products, their
// weighted sum), as CpuExperts and CpuForward::run_expert_matmuls compute them on the CPU. The
// CPU groups each expert's rows to multiply them together; here every routed row (token t's
// j-th expert: row t * k + j) is its own one-token product, whose thread blocks find their
// expert in the device's choice, so nothing comes back to the host and a decode step with
// experts is captured into a graph like a dense one.
#include "backend/cuda/cuda_forward_backend.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/kernels/cuda/experts_cuda.h"
#include "plan/plan_weights.h"

#include <string>

namespace iwb::cuda {

static_assert(kCudaPlanMaxExperts == kCudaMaxExperts && kCudaPlanMaxExpertsUsed == kCudaMaxExpertsUsed,
              "check_cuda_plan_support admits what the routing kernel takes");

Status CudaForwardBackend::run_expert_routing(const PlanOp& op, int64_t n) {
  const ModelConfig& c = m_config;
  const DeviceLayer& l = m_weights.layers[static_cast<size_t>(op.layer)];
  IWB_RETURN_IF_ERROR(op_begin());
  RouteExpertsCudaArgs r;
  r.logits = buffer(op.input);
  r.selection_bias = l.exp_probs_b;
  r.num_tokens = n;
  r.num_experts = c.num_experts;
  r.num_used = c.num_experts_used;
  r.gating = c.is_expert_softmax_over_top_k ? ExpertGating::SoftmaxOverTopK
             : c.is_expert_gating_sigmoid   ? ExpertGating::Sigmoid
                                            : ExpertGating::Softmax;
  r.is_normalized = c.is_expert_weight_normalized;
  r.weights_scale = c.expert_weights_scale;
  r.choice = m_expert_choice;
  r.weight = m_expert_weight;
  IWB_RETURN_IF_ERROR(launched(route_experts_cuda(r, m_stream.get()), "the expert routing", op.layer));
  return op_end(op, 0, n);
}

Status CudaForwardBackend::run_expert_matmuls(const PlanOp& op, int64_t n) {
  const DeviceLayer& l = m_weights.layers[static_cast<size_t>(op.layer)];
  const int64_t k = m_config.num_experts_used;
  for (int i = 0; i < op.num_products; ++i) {
    const PlanProduct& p = op.products[static_cast<size_t>(i)];
    const DeviceExperts& w = plan::layer_experts(l, p.matrix);
    const float* const no_bias = nullptr;
    IWB_RETURN_IF_ERROR(op_begin());
    ExpertMatvecCudaArgs a;
    a.type = w.type;
    a.weights = w.data;
    a.expert_stride = w.stride;
    a.num_experts = w.num_experts;
    a.in_features = w.in_features;
    a.out_features = w.out_features;
    a.choice = m_expert_choice;
    a.num_routed = n * k;
    a.x = buffer(op.input);
    // gate and up read each token's row once per chosen expert; down reads each routed row.
    a.x_row_divisor = op.input == PlanBuffer::ExpertIn ? k : 1;
    a.y = buffer(p.output);
    a.bias = plan::layer_expert_bias(l, p.matrix, no_bias);
    IWB_RETURN_IF_ERROR(
        launched(expert_matvec_cuda(a, m_stream.get()), (std::string("the ") + p.name + " products").c_str(), op.layer));
    IWB_RETURN_IF_ERROR(op_end(op, i, n));
  }
  return {};
}

Status CudaForwardBackend::run_expert_combine(const PlanOp& op, int64_t n) {
  const DeviceLayer& l = m_weights.layers[static_cast<size_t>(op.layer)];
  IWB_RETURN_IF_ERROR(op_begin());
  CombineExpertsCudaArgs a;
  a.expert_out = buffer(op.input);
  a.choice = m_expert_choice;
  a.weight = m_expert_weight;
  a.expert_scales = l.ffn_down_exps_scale;
  a.num_tokens = n;
  a.num_used = m_config.num_experts_used;
  a.width = m_config.embedding_length;
  a.y = buffer(op.output);
  a.is_accumulating = op.is_accumulating;
  IWB_RETURN_IF_ERROR(launched(combine_experts_cuda(a, m_stream.get()), "the experts' weighted sum", op.layer));
  return op_end(op, 0, n);
}

}  // namespace iwb::cuda
