// CudaForwardBackend: creation (weights, scratch sized for the step budget, the KV pool from
// what the device has left), copy-on-write block copies, the memory report, and the factory
// the engine calls.
#include "backend/cuda/cuda_forward_backend.h"

#include "backend/cuda/cuda_status.h"
#include "backend/cuda_forward_factory.h"
#include "iwb/engine/backend/cuda_scratch_estimate.h"
#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/backend/device_info.h"
#include "iwb/kernels/cuda/experts_cuda.h"
#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/thread_pool.h"
#include "plan/plan_weights.h"
#include "runtime/kv_budget.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace iwb::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The scratch sizes are shared with the Memory tab's estimate (cuda_scratch_estimate.h).
static_assert(kCudaMatvecTokens == kCudaMatvecMaxTokens,
              "the estimate's cuBLAS threshold is the matvec kernels' limit");

// Device memory left alone for the CUDA context, cuBLAS's own allocations and captured graphs.
uint64_t device_reserve_bytes(uint64_t total) { return std::min<uint64_t>(uint64_t{1} << 30, total / 20); }

}  // namespace

Result<std::unique_ptr<CudaForwardBackend>> CudaForwardBackend::create(const ModelConfig& config,
                                                                       const ModelWeights& weights,
                                                                       const EngineOptions& options, int device_index,
                                                                       int64_t context_length,
                                                                       const LoadProgress& progress) {
  auto report = [&](double fraction, const std::string& stage) {
    if (progress) progress(fraction, stage);
  };
  const std::string id = "cuda:" + std::to_string(device_index);
  IWB_CUDA_TRY(cudaSetDevice(device_index), "selecting " + id);
  std::unique_ptr<CudaForwardBackend> b(new CudaForwardBackend(config, device_index));
  Result<Stream> stream = Stream::create();
  if (!stream) return stream.status();
  b->m_stream = std::move(*stream);
  IWB_CUDA_TRY(cublasCreate(&b->m_cublas), "creating the cuBLAS handle on " + id);
  IWB_CUDA_TRY(cublasSetStream(b->m_cublas, b->m_stream.get()), "giving cuBLAS the engine's stream");

  report(0.0, "uploading the weights to " + id);
  // int8 activations (EngineOptions::cuda_int8_activations) on the split layout, unless the
  // environment asks for the GGUF layout (IWB_CUDA_SPLIT=0: benchmarks of the two side by side).
  const char* split_env = std::getenv("IWB_CUDA_SPLIT");
  const bool use_split = options.cuda_int8_activations && (split_env == nullptr || std::string_view(split_env) != "0");
  Result<DeviceWeights> uploaded = upload_weights(config, weights, device_index, use_split,
                                                  [&](double f) { report(0.8 * f, "uploading the weights to " + id); });
  if (!uploaded) return uploaded.status();
  b->m_weights = std::move(*uploaded);
  // An op's products in one launch (can_group_products), unless the environment says
  // IWB_CUDA_GROUP=0: the two side by side in benchmarks.
  const char* group_env = std::getenv("IWB_CUDA_GROUP");
  b->m_group_products = group_env == nullptr || std::string_view(group_env) != "0";
  // The norm and the activation writing the next products' int8 input (products_take_q8),
  // unless IWB_CUDA_FUSED_Q8=0: the separate quantize launches, side by side in benchmarks.
  const char* fused_q8_env = std::getenv("IWB_CUDA_FUSED_Q8");
  b->m_fuse_q8 = fused_q8_env == nullptr || std::string_view(fused_q8_env) != "0";
  // The plan's records carry the types as uploaded (a converted matrix moves F16 bytes).
  const PlanWeightTypes types = plan::weight_types_of(b->m_weights);
  b->m_plan = build_forward_plan(config, &types);
  IWB_RETURN_IF_ERROR(check_forward_plan(b->m_plan));
  for (const std::string& line : b->m_weights.conversions) report(0.8, line);

  report(0.85, "allocating scratch on " + id);
  IWB_RETURN_IF_ERROR(b->allocate_scratch(options, context_length));
  report(0.9, "allocating the KV cache on " + id);
  IWB_RETURN_IF_ERROR(b->allocate_kv_pool(options, context_length));
  b->m_is_batch_invariant = options.is_batch_invariant;
  report(0.95, "warming up cuBLAS on " + id);
  IWB_RETURN_IF_ERROR(b->warm_up_gemms());
  b->m_num_threads = options.num_threads > 0 ? options.num_threads : iwb::default_num_threads();

  cudaDeviceProp prop{};
  const std::string name = cudaGetDeviceProperties(&prop, device_index) == cudaSuccess ? prop.name : "CUDA device";
  b->m_name = name;
  b->m_description = id + " (" + name + ")";
  const char* pdl_env = std::getenv("IWB_CUDA_PDL");
  b->m_programmatic_launch = cuda_may_launch_programmatically(prop.major, pdl_env);
  return b;
}

CudaForwardBackend::~CudaForwardBackend() {
  cudaSetDevice(m_device);
  if (m_stream.get() != nullptr) cudaStreamSynchronize(m_stream.get());  // nothing may still use the buffers
  destroy_graphs();
  destroy_events();
  if (m_cublas != nullptr) cublasDestroy(m_cublas);
}

void CudaForwardBackend::destroy_graphs() {
  for (auto& [key, exec] : m_graphs) cudaGraphExecDestroy(exec);
  m_graphs.clear();
  m_capture_failures.clear();
}

Status CudaForwardBackend::allocate_scratch(const EngineOptions& o, int64_t context_length) {
  const ModelConfig& c = m_config;
  const std::string id = "cuda:" + std::to_string(m_device);
  const int64_t t = std::max<int64_t>(1, o.max_batch_tokens);
  m_capacity.max_tokens = t;
  m_capacity.max_sequences = std::max<int64_t>(1, std::min<int64_t>(t, o.max_running_sequences));
  m_capacity.block_size = o.kv_block_size;
  m_capacity.max_blocks_per_sequence = (context_length + o.kv_block_size - 1) / o.kv_block_size;
  m_capacity.vocab_size = c.vocab_size;
  m_logits_chunk_rows = std::min(t, kCudaMaxLogitsChunkRows);

  // f32 activations, each sub-buffer 256-byte aligned (the kernels' vector loads need 16); the
  // expert layers' buffers are empty for a dense model.
  const auto rows = static_cast<size_t>(t);
  const auto chunk = static_cast<size_t>(m_logits_chunk_rows);
  const auto routed = rows * static_cast<size_t>(c.num_experts_used);
  const int64_t max_groups = c.has_experts() ? cuda_expert_max_groups(static_cast<int64_t>(routed), c.num_experts) : 0;
  const auto expert_ff = static_cast<size_t>(c.expert_feed_forward_length);
  const auto emb = static_cast<size_t>(c.embedding_length);
  const auto shared = static_cast<size_t>(c.num_shared_experts > 0 ? c.shared_expert_width() : 0);
  // Each buffer's pointer and its values (f32, or int32: as wide).
  const std::pair<std::variant<float**, int32_t**>, size_t> buffers[] = {
      {&m_x, rows * emb},
      {&m_xn, rows * emb},
      {&m_q, rows * static_cast<size_t>(c.q_width())},
      {&m_k, rows * static_cast<size_t>(c.k_width())},
      {&m_v, rows * static_cast<size_t>(c.v_width())},
      {&m_attn, rows * static_cast<size_t>(c.attention_output_width())},
      {&m_proj, rows * emb},
      {&m_gate, rows * static_cast<size_t>(c.feed_forward_length)},
      {&m_up, rows * static_cast<size_t>(c.feed_forward_length)},
      {&m_final, chunk * emb},
      {&m_logits, chunk * static_cast<size_t>(c.vocab_size)},
      {&m_router_logits, rows * static_cast<size_t>(c.num_experts)},
      {&m_expert_gate, routed * expert_ff},
      {&m_expert_up, routed * expert_ff},
      {&m_expert_out, routed * emb},
      {&m_shared_gate, rows * shared},
      {&m_shared_up, rows * shared},
      {&m_expert_weight, routed},
      {&m_expert_choice, routed},
      {&m_expert_in, routed * emb},
      {&m_expert_position, routed},
      {&m_expert_source, routed},
      {&m_expert_groups, 3 * static_cast<size_t>(max_groups)},
      {&m_expert_group_count, c.has_experts() ? size_t{1} : 0},
  };
  size_t total = 0;
  for (const auto& [target, values] : buffers) total += align_up(values * sizeof(float));
  Result<DeviceBuffer> activations =
      DeviceBuffer::allocate(total, "the activations of a " + std::to_string(t) + "-token step", m_device);
  if (!activations) return activations.status();
  m_activations = std::move(*activations);
  size_t offset = 0;
  for (const auto& [target, values] : buffers) {
    char* at = m_activations.as<char>() + offset;
    std::visit([&](auto* slot) { *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(at); }, target);
    offset += align_up(values * sizeof(float));
  }
  if (c.has_experts()) {
    const auto count_bytes = static_cast<uint64_t>(c.num_layers * c.num_experts) * sizeof(int32_t);
    Result<DeviceBuffer> counts = DeviceBuffer::allocate(count_bytes, "the expert counts", m_device);
    if (!counts) return counts.status();
    m_expert_counts = std::move(*counts);
    Result<PinnedBuffer> host = PinnedBuffer::allocate(count_bytes, "the expert counts");
    if (!host) return host.status();
    m_expert_counts_host = std::move(*host);
    std::memset(m_expert_counts_host.data(), 0, count_bytes);
  }

  // int8 activations of up to kSplitMaxTokens tokens (Q4_0 / Q8_0 / Q6_K products): the widest input
  // per token, 16-byte aligned, then one f32 scale per 32 values.
  m_use_q8_input = o.cuda_int8_activations;
  if (const char* env = std::getenv("IWB_CUDA_Q8_INPUT"); env != nullptr && std::string_view(env) == "0") {
    m_use_q8_input = false;
  }
  m_q8_capacity = (std::max(m_weights.widest_input, c.embedding_length) + 31) / 32 * 32;
  {
    const auto values = static_cast<uint64_t>(align_up(static_cast<size_t>(m_q8_capacity * kSplitMaxTokens)));
    const auto scales = static_cast<uint64_t>(m_q8_capacity / 32 * kSplitMaxTokens * 4);
    Result<DeviceBuffer> q8 = DeviceBuffer::allocate(values + scales, "int8 activations", m_device);
    if (!q8) return q8.status();
    m_x_q8 = std::move(*q8);
    m_x_q8_scale = reinterpret_cast<float*>(m_x_q8.as<char>() + values);
  }

  // The cuBLAS path (steps over kCudaMatvecMaxTokens tokens): f16 activations and one f16 weight.
  if (t > kCudaMatvecMaxTokens) {
    Result<DeviceBuffer> x16 =
        DeviceBuffer::allocate(rows * static_cast<size_t>(std::max(m_weights.widest_input, c.embedding_length)) * 2,
                               "f16 activations for cuBLAS", m_device);
    if (!x16) return x16.status();
    m_x16 = std::move(*x16);
    Result<DeviceBuffer> w16 = DeviceBuffer::allocate(static_cast<uint64_t>(m_weights.largest_matrix_elements) * 2,
                                                      "an f16 copy of the largest weight for cuBLAS", m_device);
    if (!w16) return w16.status();
    m_w16 = std::move(*w16);
    Result<DeviceBuffer> ws = DeviceBuffer::allocate(kCudaCublasWorkspaceBytes, "the cuBLAS workspace", m_device);
    if (!ws) return ws.status();
    m_cublas_workspace = std::move(*ws);
    // A workspace of ours: cuBLAS then allocates nothing while a graph is being captured.
    IWB_CUDA_TRY(cublasSetWorkspace(m_cublas, m_cublas_workspace.data(), m_cublas_workspace.bytes()),
                 "giving cuBLAS its workspace");
  }

  // Paged attention's workspace: the largest any step shape up to the capacity needs.
  PagedAttentionCudaArgs a;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim_k;
  a.head_dim_v = c.head_dim_v;
  a.block_size = o.kv_block_size;
  a.max_blocks_per_sequence = m_capacity.max_blocks_per_sequence;
  a.k_type = o.kv_cache_type.k;  // a rotated key cache adds the rotated queries
  a.v_type = o.kv_cache_type.v;
  size_t attention_bytes = 0;
  for (int64_t n = 1; n <= t; ++n) {
    for (int64_t s = 1; s <= std::min(n, m_capacity.max_sequences); ++s) {
      a.num_tokens = n;
      a.num_sequences = s;
      attention_bytes = std::max(attention_bytes, paged_attention_cuda_workspace_bytes(a));
    }
  }
  Result<DeviceBuffer> attention = DeviceBuffer::allocate(attention_bytes, "the attention workspace", m_device);
  if (!attention) return attention.status();
  m_attention_workspace = std::move(*attention);

  // The step's metadata, block tables last so a step copies only the rows it uses.
  MetadataLayout& l = m_layout;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += align_up(bytes);
    return here;
  };
  l.tokens = take(rows * 4);
  l.positions = take(rows * 4);
  l.slot_mapping = take(rows * 8);
  l.token_sequences = take(rows * 4);
  l.sequence_lengths = take(static_cast<size_t>(m_capacity.max_sequences) * 4);
  l.logits_rows = take(rows * 4);
  l.block_tables = take(static_cast<size_t>(m_capacity.max_sequences * m_capacity.max_blocks_per_sequence) * 4);
  l.max_copies = std::max<int64_t>(64, m_capacity.max_sequences * 2);
  l.block_copies = take(static_cast<size_t>(l.max_copies) * 8);
  l.argmax_tokens = take(rows * 4);
  l.total = at;
  Result<DeviceBuffer> meta = DeviceBuffer::allocate(l.total, "the step metadata", m_device);
  if (!meta) return meta.status();
  m_metadata = std::move(*meta);
  Result<PinnedBuffer> staging = PinnedBuffer::allocate(l.total, "the step metadata");
  if (!staging) return staging.status();
  m_staging = std::move(*staging);
  char* base = m_metadata.as<char>();
  m_meta.tokens = reinterpret_cast<int32_t*>(base + l.tokens);
  m_meta.positions = reinterpret_cast<int32_t*>(base + l.positions);
  m_meta.slot_mapping = reinterpret_cast<int64_t*>(base + l.slot_mapping);
  m_meta.token_sequences = reinterpret_cast<int32_t*>(base + l.token_sequences);
  m_meta.sequence_lengths = reinterpret_cast<int32_t*>(base + l.sequence_lengths);
  m_meta.logits_rows = reinterpret_cast<int32_t*>(base + l.logits_rows);
  m_meta.block_tables = reinterpret_cast<int32_t*>(base + l.block_tables);
  m_meta.block_copies = reinterpret_cast<int32_t*>(base + l.block_copies);
  m_meta.argmax_tokens = reinterpret_cast<int32_t*>(base + l.argmax_tokens);

  Result<PinnedBuffer> logits =
      PinnedBuffer::allocate(chunk * static_cast<size_t>(c.vocab_size) * sizeof(float), "the logits rows");
  if (!logits) return logits.status();
  m_logits_host = std::move(*logits);
  (void)id;
  return {};
}

// One GEMM of every layer weight shape at the step budget's token count, at load. On the H200
// the first cuBLAS GEMM of a process took 66 ms (116 ms with CUDA_MODULE_LOADING=EAGER) and the
// first of each new shape ~4 ms, against 0.1 ms warm (session 31): cuBLAS loads and picks its
// kernels on first use, and that landed in the user's first prompt. The inputs are zeros and
// the outputs scratch that every step overwrites. IWB_CUDA_WARMUP=0 skips it (to see the cost).
Status CudaForwardBackend::warm_up_gemms() {
  if (m_x16.data() == nullptr || m_weights.layers.empty()) return {};
  if (const char* env = std::getenv("IWB_CUDA_WARMUP"); env != nullptr && std::string_view(env) == "0") return {};
  const int64_t n = m_capacity.max_tokens;
  const int64_t width = m_config.feed_forward_length;  // m_up (input) and m_gate (output) hold n x width
  IWB_RETURN_IF_ERROR(fail(cudaMemsetAsync(m_up, 0, static_cast<size_t>(n * width) * sizeof(float), m_stream.get()),
                           "clearing the warm-up input"));
  const DeviceLayer& layer = m_weights.layers.front();
  std::vector<const DeviceMatrix*> seen;
  for (const DeviceMatrix* w :
       {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.ffn_gate, &layer.ffn_up, &layer.ffn_down}) {
    if (w->data == nullptr || w->in_features > width || w->out_features > width) continue;
    const bool is_repeat = std::any_of(seen.begin(), seen.end(), [&](const DeviceMatrix* s) {
      return s->type == w->type && s->is_split == w->is_split && s->in_features == w->in_features &&
             s->out_features == w->out_features;
    });
    if (is_repeat) continue;
    seen.push_back(w);
    IWB_RETURN_IF_ERROR(gemm(*w, m_up, n, m_gate));
  }
  return fail(cudaStreamSynchronize(m_stream.get()), "warming up cuBLAS");
}

Status CudaForwardBackend::allocate_kv_pool(const EngineOptions& o, int64_t context_length) {
  const ModelConfig& c = m_config;
  const std::string id = "cuda:" + std::to_string(m_device);
  m_kv.shape = KvCacheShape{c.num_layers, c.num_kv_heads, c.head_dim_k, c.head_dim_v};
  m_kv.block_size = o.kv_block_size;
  m_kv.type = o.kv_cache_type;
  // The attention kernels load a quantized side 16 values per thread, on both sides.
  const bool is_quantized = !m_kv.type.is_f16();
  if (is_quantized && (c.head_dim_k % 16 != 0 || c.head_dim_v % 16 != 0)) {
    return make_error(ErrorCode::Unsupported, "the CUDA KV cache stores " + kv_cache_types_name(m_kv.type) +
                                                  " for head sizes that are multiples of 16; this model's are " +
                                                  std::to_string(c.head_dim_k) + " and " +
                                                  std::to_string(c.head_dim_v) + " (the CPU takes it, or use f16)");
  }
  const auto [free_bytes, total_bytes] = device_memory_info();
  const uint64_t reserve = device_reserve_bytes(total_bytes);
  KvBudgetInput in;
  in.bytes_per_position = m_kv.bytes_per_position();
  in.context_length = context_length;
  in.available_bytes = free_bytes > reserve ? free_bytes - reserve : 0;
  in.is_device = true;
  const std::string memory_name = "free memory on " + id;
  in.memory_name = memory_name.c_str();
  Result<uint64_t> budget = kv_budget_bytes(o, in);
  if (!budget) return budget.status();
  if (*budget > in.available_bytes) {
    return make_error(ErrorCode::OutOfMemory,
                      "the KV cache asks for " + format_device_bytes(*budget) + " but " + id + " has " +
                          format_device_bytes(in.available_bytes) + " left after the weights (" +
                          format_device_bytes(m_weights.num_bytes) + "), the scratch and a " +
                          format_device_bytes(reserve) + " reserve (" + format_device_bytes(total_bytes) +
                          " in all): give the KV cache less memory, or run on the CPU");
  }
  Result<int64_t> num_blocks = PagedKvStorage::num_blocks_for_budget(m_kv.shape, m_kv.block_size, *budget, m_kv.type);
  if (!num_blocks) return num_blocks.status();
  m_kv.num_blocks = *num_blocks;
  m_capacity.num_blocks = *num_blocks;
  Result<DeviceBuffer> pool = DeviceBuffer::allocate(m_kv.num_bytes(), "the KV cache", m_device);
  if (!pool) return pool.status();
  m_kv_pool = std::move(*pool);
  const auto slots = static_cast<size_t>(m_kv.num_slots());
  uint16_t* at = m_kv_pool.as<uint16_t>();
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    m_k_pools.push_back(at);
    at += slots * static_cast<size_t>(kv_row_units(m_kv.type.k, c.k_width()));
    m_v_pools.push_back(at);
    at += slots * static_cast<size_t>(kv_row_units(m_kv.type.v, c.v_width()));
  }
  // FP8 scales: 1 (vLLM's default) until a layer's first write calibrates them.
  Result<DeviceBuffer> scales =
      DeviceBuffer::allocate(2 * static_cast<size_t>(c.num_layers) * sizeof(float), "the KV cache scales", m_device);
  if (!scales) return scales.status();
  m_kv_scales = std::move(*scales);
  const std::vector<float> ones(2 * static_cast<size_t>(c.num_layers), 1.0f);
  IWB_CUDA_TRY(
      cudaMemcpyAsync(m_kv_scales.data(), ones.data(), m_kv_scales.bytes(), cudaMemcpyHostToDevice, m_stream.get()),
      "setting the KV cache scales");
  m_is_scale_calibrated.assign(static_cast<size_t>(c.num_layers), false);
  // Zeros, so a never-written slot holds finite numbers (attention masks it, but 0 x NaN is NaN).
  IWB_CUDA_TRY(cudaMemsetAsync(m_kv_pool.data(), 0, m_kv_pool.bytes(), m_stream.get()), "clearing the KV cache");
  IWB_CUDA_TRY(cudaStreamSynchronize(m_stream.get()), "clearing the KV cache");
  return {};
}

Status CudaForwardBackend::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty()) return {};
  if (!m_broken.empty()) return make_error(ErrorCode::DeviceError, m_broken);
  for (const BlockCopy& copy : copies) {
    if (copy.src < 0 || copy.dst < 0 || copy.src >= m_kv.num_blocks || copy.dst >= m_kv.num_blocks) {
      return make_error(ErrorCode::InvalidArgument, "a KV block copy names a block outside the pool");
    }
  }
  IWB_CUDA_TRY(cudaSetDevice(m_device), "selecting cuda:" + std::to_string(m_device));
  const int64_t k_row_units = kv_row_units(m_kv.type.k, m_config.k_width());
  const int64_t v_row_units = kv_row_units(m_kv.type.v, m_config.v_width());
  const int64_t k_units = m_kv.num_slots() * k_row_units;
  const int64_t v_units = m_kv.num_slots() * v_row_units;
  auto* staged = reinterpret_cast<int32_t*>(m_staging.as<char>() + m_layout.block_copies);
  for (size_t first = 0; first < copies.size(); first += static_cast<size_t>(m_layout.max_copies)) {
    const size_t count = std::min(copies.size() - first, static_cast<size_t>(m_layout.max_copies));
    // The previous chunk's copy must have left the staging memory before it is overwritten.
    IWB_CUDA_TRY(cudaStreamSynchronize(m_stream.get()), "waiting for the KV block copies");
    for (size_t i = 0; i < count; ++i) {
      staged[2 * i] = copies[first + i].src;
      staged[2 * i + 1] = copies[first + i].dst;
    }
    IWB_RETURN_IF_ERROR(
        fail(cudaMemcpyAsync(m_meta.block_copies, staged, count * 8, cudaMemcpyHostToDevice, m_stream.get()),
             "copying the KV block copy list to the device"));
    for (int pass = 0; pass < 2; ++pass) {  // keys, then values: each layer's K and V pools alternate
      CopyKvBlocksCudaArgs a;
      a.pool = pass == 0 ? m_k_pools[0] : m_v_pools[0];
      a.num_pools = m_config.num_layers;
      a.pool_stride_units = k_units + v_units;
      a.block_units = static_cast<int64_t>(m_kv.block_size) * (pass == 0 ? k_row_units : v_row_units);
      a.num_blocks = m_kv.num_blocks;
      a.copies = m_meta.block_copies;
      a.num_copies = static_cast<int64_t>(count);
      IWB_RETURN_IF_ERROR(launched(copy_kv_blocks_cuda(a, m_stream.get()), "the KV block copy", -1));
    }
  }
  return {};
}

void CudaForwardBackend::set_batch_invariant(bool is_batch_invariant) {
  // The invariant path needs nothing the other lacks (one token per matvec call).
  m_is_batch_invariant = is_batch_invariant;
}

void CudaForwardBackend::fill_memory_report(MemoryReport* r) const {
  r->device_id = "cuda:" + std::to_string(m_device);
  r->device_name = m_name;
  r->device_weights_bytes = m_weights.num_bytes;
  r->device_kv_pool_bytes = m_kv_pool.bytes();
  r->device_scratch_bytes = m_activations.bytes() + m_x16.bytes() + m_w16.bytes() + m_x_q8.bytes() +
                            m_attention_workspace.bytes() + m_metadata.bytes() + m_expert_counts.bytes();
  r->device_workspace_bytes = m_cublas_workspace.bytes();
  r->host_pinned_bytes = m_staging.bytes() + m_logits_host.bytes() + m_expert_counts_host.bytes();
  cudaSetDevice(m_device);
  const auto [free_bytes, total_bytes] = device_memory_info();
  r->device_free_bytes = free_bytes;
  r->device_total_bytes = total_bytes;
  r->device_num_graphs = static_cast<int32_t>(m_graphs.size());
}

}  // namespace iwb::cuda

namespace iwb {

Result<std::unique_ptr<ForwardBackend>> make_cuda_forward_backend(const ModelConfig& config,
                                                                  const ModelWeights& weights,
                                                                  const EngineOptions& options, int device_index,
                                                                  int64_t context_length,
                                                                  const LoadProgress& progress) {
  // Refused before the device is touched, so "auto" falls back to the CPU at no cost.
  IWB_RETURN_IF_ERROR(check_cuda_plan_support(build_forward_plan(config)));
  Result<std::unique_ptr<cuda::CudaForwardBackend>> backend =
      cuda::CudaForwardBackend::create(config, weights, options, device_index, context_length, progress);
  if (!backend) return backend.status();
  return std::unique_ptr<ForwardBackend>(std::move(*backend));
}

}  // namespace iwb
