// upload_weights: plan every tensor's place in one device buffer (stored type, or F16 where no
// GPU kernel reads the stored one), allocate once, copy.
#include "backend/cuda/cuda_weights.h"

#include "backend/cuda/cuda_status.h"
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
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
    if (!is_usable) {
      const std::string type(ggml_type_name(w.type));
      if (m_converted_types.insert({type, name}).second) {
        m_conversions->push_back(name + " and every other " + type + " matrix: converted to F16 on upload (no " + type +
                                 " GPU kernel)");
      }
    }
    m_pieces.push_back(p);
    largest = std::max(largest, p.num_elements);
    widest = std::max(widest, w.in_features);
    return m;
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
  auto floats = [&](const float** slot, const std::vector<float>& v) {
    *slot = plan.floats(v);
    if (!v.empty()) float_slots.push_back(slot);
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
    l.wq = plan.matrix(blk + "attn_q", w.wq, false, true);
    l.wk = plan.matrix(blk + "attn_k", w.wk, false, true);
    l.wv = plan.matrix(blk + "attn_v", w.wv, false, true);
    l.wo = plan.matrix(blk + "attn_output", w.wo, false, true);
    for (DeviceMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo}) matrix_slots.push_back(m);
    floats(&l.bq, w.bq);
    floats(&l.bk, w.bk);
    floats(&l.bv, w.bv);
    floats(&l.bo, w.bo);
    floats(&l.q_norm, w.q_norm);
    floats(&l.k_norm, w.k_norm);
    floats(&l.post_attention_norm, w.post_attention_norm);
    floats(&l.ffn_norm, w.ffn_norm);
    l.ffn_gate = plan.matrix(blk + "ffn_gate", w.ffn_gate, false, true);
    l.ffn_up = plan.matrix(blk + "ffn_up", w.ffn_up, false, true);
    l.ffn_down = plan.matrix(blk + "ffn_down", w.ffn_down, false, true);
    for (DeviceMatrix* m : {&l.ffn_gate, &l.ffn_up, &l.ffn_down}) matrix_slots.push_back(m);
    floats(&l.post_ffw_norm, w.post_ffw_norm);
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
