// Helpers of the forward-pass tests against the test reference (test_forward_reference,
// test_deepseek_reference, test_gemma4_reference, test_qwen35_reference): a file (or a synthesized preset) loaded on
// both sides, random prompts, and greedy tokens from the engine's step() loop and from the reference recomputing the
// whole sequence each step.
#pragma once

#include "../kernels/random_tensors.h"
#include "reference_forward.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace iwb::test {

// Reads the GGUF at `path` as the reference model and loads it in the engine (two threads).
// Empty on success, else what failed.
inline std::string load_reference_and_engine(const std::string& path, RefModel* ref, std::unique_ptr<Engine>* engine) {
  auto file = gguf::GgufFile::open(path);
  if (!file.is_ok()) return file.error_message();
  std::string error;
  *ref = load_reference_model(**file, &error);
  if (!error.empty()) return error;
  auto loaded = Engine::load(path, {0, 2});
  if (!loaded.is_ok()) return loaded.error_message();
  *engine = std::move(*loaded);
  return {};
}

// Writes `iwb synth`'s preset in `type` to `path` (two threads), with `nextn_layers`
// multi-token-prediction layers where >= 0 (else the preset's). Empty on success, else what failed.
inline std::string synthesize_preset(const std::string& preset, const std::string& type, uint64_t seed,
                                     const std::string& path, int64_t nextn_layers = -1) {
  synth::SynthOptions options;
  options.shape = *synth::find_synth_preset(preset);
  if (nextn_layers >= 0) options.shape.num_nextn_layers = nextn_layers;
  options.weight_type = type;
  options.seed = seed;
  options.num_threads = 2;
  options.output_path = path;
  auto written = synth::synthesize_model(options);
  return written.is_ok() ? std::string() : written.error_message();
}

// Writes `iwb synth`'s preset in `type` to `path`, reads it back as the reference and loads it
// in the engine. Empty on success, else what failed.
inline std::string synthesize_and_load(const std::string& preset, const std::string& type, uint64_t seed,
                                       const std::string& path, RefModel* ref, std::unique_ptr<Engine>* engine) {
  if (std::string error = synthesize_preset(preset, type, seed, path); !error.empty()) return error;
  return load_reference_and_engine(path, ref, engine);
}

// Every position's logits from the engine, [tokens][vocab].
inline Result<std::vector<std::vector<float>>> engine_logits_all(Engine& engine, const std::vector<int32_t>& tokens) {
  std::vector<std::vector<float>> rows;
  Status s = engine.logits_for_positions(tokens, 0, [&](int64_t position, std::span<const float> logits) {
    if (position != static_cast<int64_t>(rows.size()))
      return make_error(ErrorCode::InvalidArgument, "positions out of order");
    rows.emplace_back(logits.begin(), logits.end());
    return Status{};
  });
  if (!s.is_ok()) return s;
  return rows;
}

// The largest per-position relative error (max |difference| over max |logit|).
inline double max_error_over_positions(const std::vector<std::vector<float>>& got,
                                       const std::vector<std::vector<float>>& want) {
  if (got.size() != want.size()) return 1e30;
  double worst = 0;
  for (size_t p = 0; p < got.size(); ++p) worst = std::max(worst, max_relative_error(got[p], want[p]));
  return worst;
}

// n token ids past the first three (<unk>, <s>, </s> in the synthetic vocabularies).
inline std::vector<int32_t> random_tokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = dist(rng);
  return out;
}

// A request for n greedy tokens (no repeat penalty, no stop at the end token).
inline GenerationRequest greedy_request(const std::vector<int32_t>& prompt, int n) {
  GenerationRequest r;
  r.prompt_tokens = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.repeat_penalty = 1.0f;
  r.max_new_tokens = n;
  r.stop_at_end_of_generation = false;
  return r;
}

// Greedy tokens from the engine's step() loop (greedy_request's).
inline std::vector<int32_t> engine_greedy(Engine& engine, const std::vector<int32_t>& prompt, int n) {
  const GenerationRequest r = greedy_request(prompt, n);
  std::vector<int32_t> out;
  if (!engine.add_request(r)) return out;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) return {};
    for (const TokenEvent& e : s->tokens) out.push_back(e.token);
  }
  return out;
}

// Requests run through the engine's step() loop to their ends: each one's tokens and end.
struct EngineRun {
  std::vector<RequestId> ids;  // in the order the requests were given
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, RequestFinished> finished;
  std::string error;  // a refused request or a failed step (then nothing else), or failed requests' errors
};
inline EngineRun run_to_end(Engine& engine, const std::vector<GenerationRequest>& requests) {
  EngineRun out;
  for (const GenerationRequest& r : requests) {
    Result<RequestId> id = engine.add_request(r);
    if (!id) return {{}, {}, {}, id.error_message()};
    out.ids.push_back(*id);
  }
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) return {{}, {}, {}, s.error_message()};
    for (const TokenEvent& e : s->tokens) out.tokens[e.request].push_back(e.token);
    for (const RequestFinished& f : s->finished) {
      if (f.reason == FinishReason::Error) out.error += f.error;
      out.finished[f.request] = f;
    }
  }
  return out;
}

// The reference's greedy tokens, keys and values rounded to f16 as the engine's cache holds them.
inline std::vector<int32_t> reference_greedy(const RefModel& m, std::vector<int32_t> seq, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(reference_logits(m, seq, true)));
    seq.push_back(out.back());
  }
  return out;
}

}  // namespace iwb::test
