// CudaForwardBackend::forward: the step checked on the host, its metadata up in one copy, the
// operations (eagerly, or a decode step's captured graph replayed), the logits rows down
// through page-locked memory, one synchronisation. Errors become Status values; a fault that
// poisons the CUDA context makes every later step say the model must be reloaded.
#include "backend/cuda/cuda_forward_backend.h"

#include "backend/cuda/cuda_status.h"
#include "iwb/kernels/cuda/launch_cuda.h"
#include "iwb/kernels/cuda/sampling_cuda.h"

#include <algorithm>
#include <cstring>

namespace iwb::cuda {
namespace {

constexpr size_t kMaxGraphs = 128;  // captured decode shapes kept (one per batch size in practice)

// Errors after which the context cannot be used again (the CUDA runtime says so for these).
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout: return true;
    default: return false;
  }
}

}  // namespace

Status CudaForwardBackend::fail(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return {};
  Status s = status_from(error, "cuda:" + std::to_string(m_device) + ": " + std::string(what));
  if (is_sticky(error)) {
    m_broken = s.message() + "; the device's context is lost: reload the model (or choose the CPU)";
    return make_error(ErrorCode::DeviceError, m_broken);
  }
  cudaGetLastError();  // not sticky: clear it so the next call does not report it again
  return s;
}

Status CudaForwardBackend::launched(cudaError_t error, const char* what, int64_t layer) {
  if (error == cudaSuccess) return {};
  std::string text = what;
  if (error == cudaErrorInvalidValue) text += " refused its arguments";
  if (layer >= 0) text += " in layer " + std::to_string(layer);
  return fail(error, text);
}

Status CudaForwardBackend::stage_metadata(const FlatBatch& b) {
  const auto num_sequences = static_cast<size_t>(b.sequence_lengths.size());
  char* host = m_staging.as<char>();
  // An empty array (no rows sample in a step that only prefills) may have no data pointer, which
  // memcpy must not be given even for 0 bytes.
  const auto stage = [&](size_t offset, const auto& values) {
    if (!values.empty()) std::memcpy(host + offset, values.data(), values.size() * sizeof(values[0]));
  };
  stage(m_layout.tokens, b.tokens);
  stage(m_layout.positions, b.positions);
  stage(m_layout.slot_mapping, b.slot_mapping);
  stage(m_layout.token_sequences, b.token_sequences);
  stage(m_layout.sequence_lengths, b.sequence_lengths);
  stage(m_layout.logits_rows, b.logits_rows);
  const auto width = static_cast<size_t>(m_capacity.max_blocks_per_sequence);
  pack_block_tables(
      b, static_cast<int64_t>(width),
      std::span<int32_t>(reinterpret_cast<int32_t*>(host + m_layout.block_tables), num_sequences * width));
  const size_t bytes = m_layout.block_tables + num_sequences * width * 4;
  return fail(cudaMemcpyAsync(m_metadata.data(), host, bytes, cudaMemcpyHostToDevice, m_stream.get()),
              "copying the step's metadata to the device");
}

Status CudaForwardBackend::run_step(const FlatBatch& batch, float* logits, int32_t* tokens) {
  if (!m_broken.empty()) return make_error(ErrorCode::DeviceError, m_broken);
  IWB_RETURN_IF_ERROR(check_cuda_step(batch, m_capacity));
  IWB_RETURN_IF_ERROR(fail(cudaSetDevice(m_device), "selecting the device"));
  // A profile's records time each kernel between its own events, so its kernels never overlap.
  set_cuda_programmatic_launch(m_programmatic_launch && !is_recording());
  IWB_RETURN_IF_ERROR(stage_metadata(batch));
  const bool is_argmax = tokens != nullptr;
  StepShape shape;
  shape.num_tokens = static_cast<int64_t>(batch.tokens.size());
  shape.num_sequences = static_cast<int64_t>(batch.sequence_lengths.size());
  shape.num_logits_rows = logits != nullptr || is_argmax ? static_cast<int64_t>(batch.logits_rows.size()) : 0;
  shape.batch = &batch;

  m_num_events = 0;
  // Not while FP8 scales wait for their calibrating first write (a graph would replay it).
  const bool is_calibrating =
      m_kv.type.calculate_scales &&
      std::find(m_is_scale_calibrated.begin(), m_is_scale_calibrated.end(), false) != m_is_scale_calibrated.end();
  const bool may_replay =
      !is_recording() && m_observer == nullptr && shape.num_logits_rows == shape.num_tokens && !is_calibrating;
  std::optional<DecodeGraphKey> key = may_replay ? decode_graph_key(batch, m_logits_chunk_rows) : std::nullopt;
  if (key) key->is_argmax = is_argmax;
  const auto failures = key ? m_capture_failures.find(*key) : m_capture_failures.end();
  if (key && (failures == m_capture_failures.end() || failures->second < 2)) {
    Status s = run_decode_graph(*key, shape);
    if (!s) {
      (void)fail(cudaStreamSynchronize(m_stream.get()), "finishing the failed step");
      return s;
    }
    return is_argmax ? copy_tokens_out(shape.num_logits_rows, tokens) : copy_logits_out(shape.num_logits_rows, logits);
  }

  Status s = run_layers(shape);
  if (s) {
    for (const RowChunk& chunk : logits_row_chunks(shape.num_logits_rows, m_logits_chunk_rows)) {
      s = finish_rows(shape, chunk.first, chunk.count, is_argmax);
      if (s && !is_argmax) s = copy_logits_out(chunk.count, logits + chunk.first * m_config.vocab_size);
      if (!s) break;
    }
  }
  if (s) s = copy_expert_counts();
  if (!s) {
    // Work queued before the failure still runs; wait for it so the buffers are free again.
    (void)fail(cudaStreamSynchronize(m_stream.get()), "finishing the failed step");
    return s;
  }
  if (is_argmax) return copy_tokens_out(shape.num_logits_rows, tokens);
  // (The logits rows were copied, and waited for, chunk by chunk above; the expert counts not.)
  if (shape.num_logits_rows == 0 || m_expert_counts.data() != nullptr) {
    IWB_RETURN_IF_ERROR(fail(cudaStreamSynchronize(m_stream.get()), "finishing the step"));
  }
  return {};
}

Status CudaForwardBackend::finish_rows(const StepShape& shape, int64_t first, int64_t count, bool is_argmax) {
  IWB_RETURN_IF_ERROR(compute_logits(shape, first, count));
  if (!is_argmax) return {};
  return launched(argmax_rows_cuda(m_logits, count, m_config.vocab_size, m_meta.argmax_tokens + first, m_stream.get()),
                  "the greedy argmax", -1);
}

Status CudaForwardBackend::copy_tokens_out(int64_t num_rows, int32_t* tokens) {
  auto* host = reinterpret_cast<int32_t*>(m_staging.as<char>() + m_layout.argmax_tokens);
  const size_t bytes = static_cast<size_t>(num_rows) * sizeof(int32_t);
  if (num_rows > 0) {
    IWB_RETURN_IF_ERROR(fail(cudaMemcpyAsync(host, m_meta.argmax_tokens, bytes, cudaMemcpyDeviceToHost, m_stream.get()),
                             "copying the greedy tokens to the host"));
  }
  IWB_RETURN_IF_ERROR(fail(cudaStreamSynchronize(m_stream.get()), "running the step"));
  std::memcpy(tokens, host, bytes);
  return {};
}

Status CudaForwardBackend::copy_logits_out(int64_t num_rows, float* logits) {
  if (num_rows == 0 || logits == nullptr) {
    return fail(cudaStreamSynchronize(m_stream.get()), "finishing the step");
  }
  const size_t bytes = static_cast<size_t>(num_rows) * static_cast<size_t>(m_config.vocab_size) * sizeof(float);
  IWB_RETURN_IF_ERROR(
      fail(cudaMemcpyAsync(m_logits_host.data(), m_logits, bytes, cudaMemcpyDeviceToHost, m_stream.get()),
           "copying the logits to the host"));
  // The step's one wait: every kernel before it has run when the logits are here.
  IWB_RETURN_IF_ERROR(fail(cudaStreamSynchronize(m_stream.get()), "running the step"));
  std::memcpy(logits, m_logits_host.data(), bytes);
  return {};
}

Status CudaForwardBackend::run_decode_graph(const DecodeGraphKey& key, const StepShape& shape) {
  auto found = m_graphs.find(key);
  if (found == m_graphs.end()) {
    auto eager = [&]() -> Status {
      IWB_RETURN_IF_ERROR(run_layers(shape));
      IWB_RETURN_IF_ERROR(finish_rows(shape, 0, shape.num_logits_rows, key.is_argmax));
      return copy_expert_counts();  // in the graph too
    };
    if (m_graphs.size() >= kMaxGraphs) return eager();
    cudaStream_t stream = m_stream.get();
    IWB_RETURN_IF_ERROR(
        fail(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "starting a decode graph capture"));
    Status captured = eager();
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = end;
    if (captured && end == cudaSuccess) made = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!captured || made != cudaSuccess) {
      // The shape runs eagerly from now on; a launch that failed in capture fails eagerly too
      // and reports itself there.
      cudaGetLastError();
      ++m_capture_failures[key];
      if (!m_broken.empty()) return make_error(ErrorCode::DeviceError, m_broken);
      return eager();
    }
    found = m_graphs.emplace(key, exec).first;
  }
  return launched(cudaGraphLaunch(found->second, m_stream.get()), "replaying the decode step's CUDA graph", -1);
}

}  // namespace iwb::cuda
