// upload_weights: plan every tensor's place in one device buffer (stored type, or F16 where no
// GPU kernel reads the stored one), allocate once, copy.
#include "backend/cuda/cuda_weights.h"

#include "backend/cuda/cuda_status.h"
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/experts_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/split_blocks.h"

#include <algorithm>
#include <map>

namespace iwb::cuda {
namespace {

constexpr uint64_t kAlign = 256;
uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One tensor to copy: where it goes and what to copy (host bytes, or f32 values to store).
struct Piece {
  uint64_t offset = 0;
  const void* host = nullptr;  // a matrix as stored
  uint64_t bytes = 0;
  GgmlType source_type = GgmlType::F32;
  bool is_converted = false;  // dequantize to f32, store as f16
  bool is_split = false;      // repack Q4_0 / Q8_0 / Q6_K to the split layout
  int64_t rows = 0, in_features = 0;
  int64_t num_elements = 0;
  const std::vector<float>* floats = nullptr;  // a norm, bias or factor vector
};

class Planner {
 public:
  Planner(std::vector<std::string>* conversions, bool use_split) : m_conversions(conversions), m_use_split(use_split) {}

  // `needs_embedding`: the matrix is (also) the token table, read by the gather kernel.
  DeviceMatrix matrix(const std::string& name, const WeightMatrix& w, bool needs_embedding, bool needs_matmul) {
    const bool is_usable =
        (!needs_matmul || is_stored_type_usable(w.type)) && (!needs_embedding || cuda_embedding_supports(w.type));
    Piece p;
    p.host = w.data;
    p.source_type = w.type;
    p.num_elements = w.in_features * w.out_features;
    p.is_converted = !is_usable;
    p.is_split = is_usable && m_use_split && has_split_blocks(w.type);
    p.rows = w.out_features;
    p.in_features = w.in_features;
    p.bytes = is_usable ? w.num_bytes : static_cast<uint64_t>(p.num_elements) * 2;
    p.offset = take(p.bytes);
    DeviceMatrix m{is_usable ? w.type : GgmlType::F16, reinterpret_cast<const void*>(p.offset), w.in_features,
                   w.out_features, p.bytes};
    m.is_split = p.is_split;
    if (!is_usable) note_conversion(name, w.type);
    m_pieces.push_back(p);
    largest = std::max(largest, p.num_elements);
    widest = std::max(widest, w.in_features);
    return m;
  }
  // An expert tensor: stored where expert_matvec_cuda reads the type, else converted to F16;
  // experts that sit apart in the file (a stride past their size) are packed together.
  DeviceExperts experts(const std::string& name, const ExpertMatrices& w) {
    const bool is_usable = cuda_expert_matvec_supports(w.type);
    const int64_t elements = w.in_features * w.out_features;
    const uint64_t stride = is_usable ? w.expert_bytes : static_cast<uint64_t>(elements) * 2;
    const bool is_packed = w.expert_stride == 0 || w.expert_stride == w.expert_bytes;
    const uint64_t at = take(stride * static_cast<uint64_t>(w.num_experts));
    for (int64_t e = 0; e < (is_packed ? 1 : w.num_experts); ++e) {
      Piece p;
      p.host = w.expert(e).data;
      p.source_type = w.type;
      p.num_elements = elements * (is_packed ? w.num_experts : 1);
      p.is_converted = !is_usable;
      p.rows = w.out_features * (is_packed ? w.num_experts : 1);
      p.in_features = w.in_features;
      p.bytes = stride * (is_packed ? static_cast<uint64_t>(w.num_experts) : 1);
      p.offset = at + static_cast<uint64_t>(e) * stride;
      m_pieces.push_back(p);
    }
    if (!is_usable) note_conversion(name, w.type);
    largest = std::max(largest, elements);
    widest = std::max(widest, w.in_features);
    return {is_usable ? w.type : GgmlType::F16,
            reinterpret_cast<const void*>(at),
            w.in_features,
            w.out_features,
            w.num_experts,
            stride};
  }
  const float* floats(const std::vector<float>& v) {
    if (v.empty()) return nullptr;
    Piece p;
    p.floats = &v;
    p.bytes = v.size() * sizeof(float);
    p.offset = take(p.bytes);
    m_pieces.push_back(p);
    return reinterpret_cast<const float*>(p.offset);
  }
  uint64_t total() const { return m_total; }
  const std::vector<Piece>& pieces() const { return m_pieces; }
  int64_t largest = 0, widest = 0;

 private:
  void note_conversion(const std::string& name, GgmlType stored) {
    const std::string type(ggml_type_name(stored));
    if (m_converted_types.insert({type, name}).second) {
      m_conversions->push_back(name + " and every other " + type + " matrix: converted to F16 on upload (no " + type +
                               " GPU kernel)");
    }
  }
  uint64_t take(uint64_t bytes) {
    const uint64_t at = m_total;
    m_total += align_up(bytes);
    return at;
  }
  std::vector<std::string>* m_conversions;
  bool m_use_split = true;
  std::map<std::string, std::string> m_converted_types;
  std::vector<Piece> m_pieces;
  uint64_t m_total = 0;
};

// Offsets planned as pointers become addresses inside the buffer.
template <typename T>
T* relocate(T* offset, uintptr_t base) {
  return offset == nullptr && base == 0 ? nullptr : reinterpret_cast<T*>(base + reinterpret_cast<uintptr_t>(offset));
}

}  // namespace

bool is_stored_type_usable(GgmlType type) { return cuda_matvec_supports(type) && cuda_can_dequantize_f16(type); }

Result<DeviceWeights> upload_weights(const ModelConfig& config, const ModelWeights& weights, int device, bool use_split,
                                     const std::function<void(double)>& progress) {
  DeviceWeights d;
  Planner plan(&d.conversions, use_split);
  // Norm pointers planned as offsets; a null vector stays null (kept apart from offset 0 below).
  std::vector<const float**> float_slots;
  std::vector<DeviceMatrix*> matrix_slots;
  std::vector<DeviceExperts*> expert_slots;
  auto floats = [&](const float** slot, const std::vector<float>& v) {
    *slot = plan.floats(v);
    if (!v.empty()) float_slots.push_back(slot);
  };
  // A layer's matrix; one the layer lacks (an expert layer's dense FFN) stays null.
  auto matrix = [&](DeviceMatrix* slot, const std::string& name, const WeightMatrix& w) {
    if (w.data == nullptr) return;
    *slot = plan.matrix(name, w, false, true);
    matrix_slots.push_back(slot);
  };
  d.token_embd = plan.matrix("token_embd", weights.token_embd, true, weights.is_output_tied);
  matrix_slots.push_back(&d.token_embd);
  floats(&d.output_norm, weights.output_norm);
  if (weights.is_output_tied) {
    d.output = d.token_embd;  // relocated below with the rest
  } else {
    d.output = plan.matrix("output", weights.output, false, true);
  }
  matrix_slots.push_back(&d.output);
  floats(&d.rope_freqs, weights.rope_freqs);
  d.layers.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& w = weights.layers[i];
    DeviceLayer& l = d.layers[i];
    const std::string blk = "blk." + std::to_string(i) + ".";
    floats(&l.attn_norm, w.attn_norm);
    matrix(&l.wq, blk + "attn_q", w.wq);
    matrix(&l.wk, blk + "attn_k", w.wk);
    matrix(&l.wv, blk + "attn_v", w.wv);
    matrix(&l.wo, blk + "attn_output", w.wo);
    floats(&l.bq, w.bq);
    floats(&l.bk, w.bk);
    floats(&l.bv, w.bv);
    floats(&l.bo, w.bo);
    floats(&l.q_norm, w.q_norm);
    floats(&l.k_norm, w.k_norm);
    floats(&l.post_attention_norm, w.post_attention_norm);
    floats(&l.attn_sinks, w.attn_sinks);
    floats(&l.ffn_norm, w.ffn_norm);
    matrix(&l.ffn_gate, blk + "ffn_gate", w.ffn_gate);
    matrix(&l.ffn_up, blk + "ffn_up", w.ffn_up);
    matrix(&l.ffn_down, blk + "ffn_down", w.ffn_down);
    floats(&l.post_ffw_norm, w.post_ffw_norm);
    if (w.ffn_gate_exps.data != nullptr) {
      matrix(&l.ffn_gate_inp, blk + "ffn_gate_inp", w.ffn_gate_inp);
      floats(&l.ffn_gate_inp_b, w.ffn_gate_inp_b);
      floats(&l.exp_probs_b, w.exp_probs_b);
      l.ffn_gate_exps = plan.experts(blk + "ffn_gate_exps", w.ffn_gate_exps);
      l.ffn_up_exps = plan.experts(blk + "ffn_up_exps", w.ffn_up_exps);
      l.ffn_down_exps = plan.experts(blk + "ffn_down_exps", w.ffn_down_exps);
      for (DeviceExperts* e : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps}) expert_slots.push_back(e);
      floats(&l.ffn_gate_exps_b, w.ffn_gate_exps_b);
      floats(&l.ffn_up_exps_b, w.ffn_up_exps_b);
      floats(&l.ffn_down_exps_b, w.ffn_down_exps_b);
      floats(&l.ffn_down_exps_scale, w.ffn_down_exps_scale);
    }
    matrix(&l.ffn_gate_shexp, blk + "ffn_gate_shexp", w.ffn_gate_shexp);
    matrix(&l.ffn_up_shexp, blk + "ffn_up_shexp", w.ffn_up_shexp);
    matrix(&l.ffn_down_shexp, blk + "ffn_down_shexp", w.ffn_down_shexp);
  }
  (void)config;

  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(plan.total(), "the model weights", device);
  if (!buffer) return buffer.status();
  d.buffer = std::move(*buffer);
  d.num_bytes = plan.total();
  d.largest_matrix_elements = plan.largest;
  d.widest_input = plan.widest;
  const auto base = reinterpret_cast<uintptr_t>(d.buffer.data());
  for (const float** slot : float_slots) *slot = relocate(*slot, base);
  for (DeviceMatrix* m : matrix_slots) m->data = relocate(m->data, base);
  for (DeviceExperts* e : expert_slots) e->data = relocate(e->data, base);

  // Copies: stored bytes straight from the file mapping; conversions through f32 on the host.
  std::vector<float> f32;
  std::vector<uint16_t> f16;
  std::vector<uint8_t> repacked;
  const std::vector<Piece>& pieces = plan.pieces();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    void* dst = reinterpret_cast<void*>(base + p.offset);
    const void* src = p.floats != nullptr ? static_cast<const void*>(p.floats->data()) : p.host;
    if (p.is_converted) {
      f32.resize(static_cast<size_t>(p.num_elements));
      f16.resize(static_cast<size_t>(p.num_elements));
      if (!dequantize_row_ref(p.source_type, p.host, f32.data(), p.num_elements)) {
        return make_error(ErrorCode::Unsupported, "cannot convert a " + std::string(ggml_type_name(p.source_type)) +
                                                      " matrix for the GPU: the type has no dequantizer");
      }
      for (size_t j = 0; j < f32.size(); ++j) f16[j] = f32_to_fp16(f32[j]);
      src = f16.data();
    } else if (p.is_split) {
      repacked.resize(p.bytes);
      if (!repack_split_blocks(p.source_type, p.host, p.rows, p.in_features, repacked.data())) {
        return make_error(ErrorCode::Unsupported, "cannot repack a " + std::string(ggml_type_name(p.source_type)) +
                                                      " matrix of " + std::to_string(p.in_features) +
                                                      " columns for the GPU");
      }
      src = repacked.data();
    }
    IWB_CUDA_TRY(cudaMemcpy(dst, src, p.bytes, cudaMemcpyHostToDevice),
                 "copying the weights to cuda:" + std::to_string(device));
    if (progress && i % 8 == 0) progress(static_cast<double>(i) / static_cast<double>(pieces.size()));
  }
  if (progress) progress(1.0);
  return d;
}

}  // namespace iwb::cuda
