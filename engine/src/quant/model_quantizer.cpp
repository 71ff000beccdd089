// quantize_model: every tensor of the source is read row by row (dequantized to f32 when it
// is not already float), quantized to the type the mix rules give it, written through the
// streaming GGUF writer, and dequantized again to measure its relative error.
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/kernels/thread_pool.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

namespace iwb::quant {
namespace {

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

synth::TensorRole role_of(const std::string& name, const TensorName& n, size_t num_dims) {
  using synth::TensorRole;
  if (num_dims < 2) {
    if (n.kind.find("bias") != std::string::npos || name.ends_with(".bias")) return TensorRole::Bias;
    if (n.kind == "rope_freqs") return TensorRole::RopeFactors;
    return TensorRole::Norm;
  }
  if (n.kind == "token_embd") return TensorRole::TokenEmbedding;
  if (n.kind == "output") return TensorRole::Output;
  if (n.kind == "attn_k") return TensorRole::AttnK;
  if (n.kind == "attn_v") return TensorRole::AttnV;
  if (n.kind == "attn_output") return TensorRole::AttnOutput;
  // A mixture of experts' router stays F32; its experts follow the dense matrices' rules.
  if (n.kind == "ffn_gate_inp") return TensorRole::Router;
  if (n.kind == "ffn_gate" || n.kind == "ffn_gate_exps") return TensorRole::FfnGate;
  if (n.kind == "ffn_up" || n.kind == "ffn_up_exps") return TensorRole::FfnUp;
  if (n.kind == "ffn_down" || n.kind == "ffn_down_exps") return TensorRole::FfnDown;
  // attn_q and any other 2-D weight: the file's base type, no special rule.
  return TensorRole::AttnQ;
}

struct Job {
  const gguf::TensorInfo* source = nullptr;
  QuantizedTensor* report = nullptr;
  std::vector<float> importance;  // empty: no imatrix for this tensor
  // An expert tensor's imatrix holds each expert's channels: rows [e * rows_per_expert, ...)
  // take slice e. 0: one set of channels for every row.
  int64_t rows_per_expert = 0;
};

// Quantizes `job` into dst, one row per iteration, and measures the error.
Status quantize_tensor(const gguf::GgufFile& file, const Job& job, int num_threads, std::span<uint8_t> dst) {
  const gguf::TensorInfo& t = *job.source;
  QuantizedTensor& r = *job.report;
  const std::span<const uint8_t> src = file.tensor_data(t);
  if (t.type == r.type) {  // nothing to change: the stored bytes as they are
    std::memcpy(dst.data(), src.data(), dst.size());
    r.relative_rmse = 0;
    return {};
  }
  const int64_t row_length = t.shape[0];
  const int64_t num_rows = t.num_elements() / row_length;
  const size_t src_row_bytes = *ggml_row_bytes(t.type, row_length);
  const size_t dst_row_bytes = *ggml_row_bytes(r.type, row_length);
  const float* importance = job.importance.empty() ? nullptr : job.importance.data();
  double sum_err = 0, sum_ref = 0;
  int failed_row = -1;
#pragma omp parallel num_threads(num_threads) reduction(+ : sum_err, sum_ref)
  {
    std::vector<float> row(static_cast<size_t>(row_length)), back(static_cast<size_t>(row_length));
#pragma omp for schedule(dynamic, 4)
    for (int64_t i = 0; i < num_rows; ++i) {
      const uint8_t* in = src.data() + static_cast<size_t>(i) * src_row_bytes;
      uint8_t* out = dst.data() + static_cast<size_t>(i) * dst_row_bytes;
      const float* row_importance = importance != nullptr && job.rows_per_expert > 0
                                        ? importance + (i / job.rows_per_expert) * row_length
                                        : importance;
      bool ok = dequantize_row_ref(t.type, in, row.data(), row_length);
      ok = ok && quantize_row_ref(r.type, row.data(), out, row_length, row_importance);
      if (ok) ok = dequantize_row_ref(r.type, out, back.data(), row_length);
      if (!ok) {
#pragma omp critical
        failed_row = static_cast<int>(i);
        continue;
      }
      for (int64_t j = 0; j < row_length; ++j) {
        const double d = static_cast<double>(row[j]) - back[j];
        sum_err += d * d;
        sum_ref += static_cast<double>(row[j]) * row[j];
      }
    }
  }
  if (failed_row >= 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "tensor '" + t.name + "' row " + std::to_string(failed_row) + " cannot be written as " +
                          std::string(ggml_type_name(r.type)) +
                          " (a value is infinite, NaN, or too large for the type's fp16 scales)");
  }
  r.relative_rmse = sum_ref > 0 ? std::sqrt(sum_err / sum_ref) : 0;
  return {};
}

}  // namespace

TensorName parse_tensor_name(const std::string& name) {
  TensorName n;
  std::string rest = name;
  if (rest.starts_with("blk.")) {
    const size_t dot = rest.find('.', 4);
    if (dot != std::string::npos) {
      try {
        n.layer = std::stoll(rest.substr(4, dot - 4));
      } catch (...) {
        n.layer = -1;
      }
      rest = rest.substr(dot + 1);
    }
  }
  if (rest.ends_with(".weight")) rest.resize(rest.size() - 7);
  n.kind = rest;
  return n;
}

Result<QuantizeReport> quantize_model(const QuantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.output_path.empty()) return make_error(ErrorCode::InvalidArgument, "no output file given");
  std::error_code ec;
  if (std::filesystem::equivalent(o.source_path, o.output_path, ec)) {
    return make_error(ErrorCode::InvalidArgument, "the output would overwrite the source model");
  }
  Result<synth::WeightTypePlan> plan = synth::parse_weight_type(o.type);
  if (!plan) return plan.status();
  Result<std::unique_ptr<gguf::GgufFile>> opened = gguf::GgufFile::open(o.source_path);
  if (!opened) return opened.status();
  const gguf::GgufFile& file = **opened;

  QuantizeReport report;
  report.plan = *plan;
  report.source_bytes = file.file_size();
  const std::string arch = file.get_string("general.architecture").value_or("");
  const int64_t num_layers = file.get_int(arch + ".block_count").value_or(1);
  const bool has_output = file.find_tensor("output.weight") != nullptr;

  gguf::GgufWriter writer(file.alignment());
  for (const gguf::KeyValue& kv : file.metadata()) {
    if (kv.key.starts_with("quantize.imatrix.")) continue;  // describes the source's quantization
    writer.set(kv.key, kv.value);
  }
  writer.set_u32("general.file_type", plan->file_type);
  if (!is_float_type(plan->base_type)) writer.set_u32("general.quantization_version", 2);
  if (o.imatrix != nullptr) {
    // The keys llama-quantize writes, so tools can tell an imatrix file apart.
    writer.set_string("quantize.imatrix.file", o.imatrix_path);
    writer.set_string("quantize.imatrix.dataset", o.imatrix->dataset);
    writer.set_i32("quantize.imatrix.entries_count", static_cast<int32_t>(o.imatrix->entries.size()));
    writer.set_i32("quantize.imatrix.chunks_count", o.imatrix->num_chunks);
  }

  const auto& tensors = file.tensors();
  report.tensors.resize(tensors.size());
  // llama-quantize picks the "more bits" layers of attn_v and ffn_down with counters over the
  // tensors it visits, in (layer number, name) order: for dense models the layer number, out of
  // as many layers as there are such tensors. (Older llama.cpp visited tensors in file order,
  // which for name-sorted files, blk.0, blk.1, blk.10 ..., gives other layers: files made then,
  // such as the default model's, differ from today's llama-quantize in those layers.)
  int64_t num_attn_v = 0, num_ffn_down = 0;
  for (const gguf::TensorInfo& t : tensors) {
    const std::string kind = parse_tensor_name(t.name).kind;
    num_attn_v += kind == "attn_v";
    num_ffn_down += kind == "ffn_down" || kind == "ffn_down_exps";  // llama.cpp matches "ffn_down" in the name
  }
  std::vector<Job> jobs(tensors.size());
  int num_missing_imatrix = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo& t = tensors[i];
    if (t.shape.empty() || t.shape[0] <= 0) {
      return make_error(ErrorCode::InvalidArgument, "tensor '" + t.name + "' has an empty shape");
    }
    if (!is_float_type(t.type)) report.is_source_quantized = true;
    QuantizedTensor& r = report.tensors[i];
    const TensorName n = parse_tensor_name(t.name);
    r.name = t.name;
    r.shape = t.shape;
    r.kind = n.kind;
    r.layer = n.layer;
    r.source_type = t.type;
    report.num_parameters += t.num_elements();

    synth::TensorTypeQuery q;
    q.role = role_of(t.name, n, t.shape.size());
    q.row_length = t.shape[0];
    q.layer = std::max<int64_t>(0, n.layer);
    q.num_layers = num_layers;
    if (q.role == synth::TensorRole::AttnV) q.num_layers = num_attn_v;
    if (q.role == synth::TensorRole::FfnDown) q.num_layers = num_ffn_down;
    q.has_imatrix = o.imatrix != nullptr;
    q.is_classifier =
        q.role == synth::TensorRole::Output || (q.role == synth::TensorRole::TokenEmbedding && !has_output);
    synth::TensorTypeChoice choice = synth::choose_tensor_type(*plan, q);
    if (q.is_classifier && o.keep_output_f16) choice = {GgmlType::F16, false, GgmlType::F16};
    r.type = choice.type;
    r.wanted = choice.wanted;
    r.is_fallback = choice.is_fallback;
    r.num_bytes = *ggml_row_bytes(r.type, t.shape[0]) * static_cast<uint64_t>(t.num_elements() / t.shape[0]);
    jobs[i].source = &t;
    jobs[i].report = &r;
    if (o.imatrix != nullptr && quantize_uses_imatrix(r.type) && r.type != t.type) {
      jobs[i].importance = o.imatrix->importance(t.name);
      if (jobs[i].importance.empty() && t.name.ends_with(".attn_qkv.weight")) {
        // Our imatrix names the fused matrix's views (phi3) attn_q/k/v; all three read the same
        // input, so attn_q's channels are the fused matrix's. llama.cpp's files name attn_qkv.
        std::string q_name = t.name;
        q_name.replace(q_name.size() - std::string_view("attn_qkv.weight").size(), 8, "attn_q");
        jobs[i].importance = o.imatrix->importance(q_name);
      }
      const bool is_per_expert = t.shape.size() == 3 && t.shape[2] > 1 &&
                                 static_cast<int64_t>(jobs[i].importance.size()) == t.shape[0] * t.shape[2];
      if (is_per_expert) jobs[i].rows_per_expert = t.shape[1];
      if (!jobs[i].importance.empty() && !is_per_expert &&
          static_cast<int64_t>(jobs[i].importance.size()) != t.shape[0]) {
        report.warnings.push_back("the imatrix entry of " + t.name + " has " +
                                  std::to_string(jobs[i].importance.size()) + " channels, the tensor's rows " +
                                  std::to_string(t.shape[0]) + ": not used");
        jobs[i].importance.clear();
      }
      if (jobs[i].importance.empty()) ++num_missing_imatrix;
      r.used_imatrix = !jobs[i].importance.empty();
    }
  }
  if (report.is_source_quantized) {
    report.warnings.push_back(is_float_type(plan->base_type)
                                  ? "the source holds quantized tensors: they are dequantized, so the output keeps "
                                    "their quantization error"
                                  : "the source holds quantized tensors: they are dequantized and quantized again, so "
                                    "the result carries both roundings (quantize from an F32/F16/BF16 file when you "
                                    "have one)");
  }
  if (num_missing_imatrix > 0) {
    report.warnings.push_back(std::to_string(num_missing_imatrix) +
                              " quantized tensors have no imatrix entry and were "
                              "quantized without one");
  }

  struct Stream {
    uint64_t total = 0, done = 0;
  };
  auto stream = std::make_shared<Stream>();
  for (const QuantizedTensor& r : report.tensors) stream->total += r.num_bytes;
  const int threads = o.num_threads > 0 ? o.num_threads : iwb::default_num_threads();
  const auto num_tensors = static_cast<int64_t>(tensors.size());
  for (int64_t i = 0; i < num_tensors; ++i) {
    auto filler = [&, i, stream](std::span<uint8_t> dst) -> Status {
      const Job& job = jobs[static_cast<size_t>(i)];
      if (o.cancel != nullptr && o.cancel->load())
        return make_error(ErrorCode::InvalidArgument, "quantization cancelled");
      if (o.progress) o.progress({i, num_tensors, job.report->name, job.report->type, stream->done, stream->total});
      IWB_RETURN_IF_ERROR(quantize_tensor(file, job, threads, dst));
      stream->done += dst.size();
      return {};
    };
    const QuantizedTensor& r = report.tensors[static_cast<size_t>(i)];
    IWB_RETURN_IF_ERROR(writer.add_tensor(r.name, r.shape, r.type, filler));
  }
  IWB_RETURN_IF_ERROR(writer.write_file(o.output_path));
  if (o.progress) o.progress({num_tensors, num_tensors, "", GgmlType::F32, stream->total, stream->total});
  report.file_bytes = std::filesystem::file_size(o.output_path, ec);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace iwb::quant
