// The expert ops of the forward plan on the device (routing, the experts' products, their
// weighted sum), as CpuExperts and CpuForward::run_expert_matmuls compute them on the CPU.
// Nothing comes back to the host: the products' thread blocks find their expert in the
// device's choice, so a decode step with experts is captured into a graph like a dense one.
// One token's k routed rows (token t's j-th expert: row t * k + j) are k one-row products; a
// step of several tokens groups the rows by expert first (the CPU's order), so that up to 8
// rows of an expert share each read of its matrix.
#include "backend/cuda/cuda_forward_backend.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/experts_cuda.h"
#include "plan/plan_weights.h"

#include <string>
#include <vector>

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
  r.counts = m_expert_counts.as<int32_t>() + op.layer * c.num_experts;
  IWB_RETURN_IF_ERROR(launched(route_experts_cuda(r, m_stream.get()), "the expert routing", op.layer));
  // Several tokens: their rows grouped by expert, so the products read an expert's matrix once
  // for up to 8 of its rows (one token's k rows all go to different experts: nothing to share).
  m_experts_grouped = n > 1;
  if (m_experts_grouped) {
    const int64_t routed = n * c.num_experts_used;
    ExpertGroupsCudaArgs g;
    g.choice = m_expert_choice;
    g.num_routed = routed;
    g.num_experts = c.num_experts;
    g.x_row_divisor = c.num_experts_used;
    g.position = m_expert_position;
    g.source_row = m_expert_source;
    g.groups = m_expert_groups;
    g.num_groups = m_expert_group_count;
    g.max_groups = cuda_expert_max_groups(routed, c.num_experts);
    IWB_RETURN_IF_ERROR(
        launched(group_expert_rows_cuda(g, m_stream.get()), "grouping the routed rows by expert", op.layer));
    IWB_RETURN_IF_ERROR(
        launched(gather_rows_cuda(m_xn, c.embedding_length, m_expert_source, routed, m_expert_in, m_stream.get()),
                 "copying the routed rows into expert order", op.layer));
  }
  return op_end(op, 0, n);
}

// imatrix collection: each expert's input rows, in the CPU's order (experts ascending, tokens in
// order), on the host. A copy and a wait per product, only while an observer is set (such steps
// never run as graphs).
Status CudaForwardBackend::observe_expert_inputs(const PlanOp& op, const PlanProduct& p, const DeviceExperts& w,
                                                 int64_t n) {
  const int64_t k = m_config.num_experts_used, routed = n * k, width = w.in_features;
  const bool reads_tokens = op.input == PlanBuffer::ExpertIn;  // gate and up: the tokens' rows
  const int64_t rows = reads_tokens ? n : routed;
  cudaStream_t stream = m_stream.get();
  std::vector<int32_t> choice(static_cast<size_t>(routed)), position;
  m_observed.resize(static_cast<size_t>(rows * width));
  const float* x = reads_tokens ? m_xn : buffer(op.input);
  const std::string what = std::string("copying the ") + p.name + " inputs for the activation observer";
  IWB_RETURN_IF_ERROR(fail(
      cudaMemcpyAsync(choice.data(), m_expert_choice, choice.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream),
      what));
  IWB_RETURN_IF_ERROR(fail(
      cudaMemcpyAsync(m_observed.data(), x, m_observed.size() * sizeof(float), cudaMemcpyDeviceToHost, stream), what));
  if (!reads_tokens && m_experts_grouped) {  // the down inputs sit in expert order
    position.resize(static_cast<size_t>(routed));
    IWB_RETURN_IF_ERROR(fail(cudaMemcpyAsync(position.data(), m_expert_position, position.size() * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream),
                             what));
  }
  IWB_RETURN_IF_ERROR(fail(cudaStreamSynchronize(stream), what));
  std::vector<float> expert_rows;
  for (int64_t e = 0; e < w.num_experts; ++e) {
    expert_rows.clear();
    for (int64_t r = 0; r < routed; ++r) {
      if (choice[static_cast<size_t>(r)] != e) continue;
      const int64_t row = reads_tokens ? r / k : (position.empty() ? r : position[static_cast<size_t>(r)]);
      const float* from = m_observed.data() + row * width;
      expert_rows.insert(expert_rows.end(), from, from + width);
    }
    if (expert_rows.empty()) continue;
    m_observer->observe_expert_matmul_input(p.name, op.layer, e, w.num_experts, expert_rows.data(),
                                            static_cast<int64_t>(expert_rows.size()) / width, width);
  }
  return {};
}

Status CudaForwardBackend::run_expert_matmuls(const PlanOp& op, int64_t n) {
  const DeviceLayer& l = m_weights.layers[static_cast<size_t>(op.layer)];
  const int64_t k = m_config.num_experts_used;
  for (int i = 0; i < op.num_products; ++i) {
    const PlanProduct& p = op.products[static_cast<size_t>(i)];
    const DeviceExperts& w = plan::layer_experts(l, p.matrix);
    const float* const no_bias = nullptr;
    if (m_observer != nullptr) IWB_RETURN_IF_ERROR(observe_expert_inputs(op, p, w, n));
    IWB_RETURN_IF_ERROR(op_begin());
    ExpertMatvecCudaArgs a;
    a.type = w.type;
    a.weights = w.data;
    a.expert_stride = w.stride;
    a.num_experts = w.num_experts;
    a.in_features = w.in_features;
    a.out_features = w.out_features;
    a.num_routed = n * k;
    a.y = buffer(p.output);
    a.bias = plan::layer_expert_bias(l, p.matrix, no_bias);
    if (m_experts_grouped) {  // every row in expert order (gate and up: the copies of the tokens' rows)
      a.x = op.input == PlanBuffer::ExpertIn ? m_expert_in : buffer(op.input);
      a.groups = m_expert_groups;
      a.num_groups = m_expert_group_count;
      a.max_groups = cuda_expert_max_groups(a.num_routed, w.num_experts);
    } else {
      a.choice = m_expert_choice;
      a.x = buffer(op.input);
      // gate and up read each token's row once per chosen expert; down reads each routed row.
      a.x_row_divisor = op.input == PlanBuffer::ExpertIn ? k : 1;
    }
    IWB_RETURN_IF_ERROR(launched(expert_matvec_cuda(a, m_stream.get()),
                                 (std::string("the ") + p.name + " products").c_str(), op.layer));
    IWB_RETURN_IF_ERROR(op_end(op, i, n));
  }
  return {};
}

Status CudaForwardBackend::run_expert_combine(const PlanOp& op, int64_t n) {
  const DeviceLayer& l = m_weights.layers[static_cast<size_t>(op.layer)];
  IWB_RETURN_IF_ERROR(op_begin());
  CombineExpertsCudaArgs a;
  a.expert_out = buffer(op.input);
  a.expert_rows = m_experts_grouped ? m_expert_position : nullptr;
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
