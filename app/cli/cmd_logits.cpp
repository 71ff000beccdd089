// `iwb logits -m MODEL.gguf --tokens ID,ID,... [-o LOGITS.bin] [--greedy N] [-c CTX] [--mtp]`: the
// logits of every prompt position (or of the model's multi-token-prediction head there) and a
// greedy continuation, in the format scripts/compare-logits-llama.sh reads from llama.cpp's side
// too ('IWBL', int32 positions, int32 vocabulary, f32 rows).
#include "commands.h"
#include "options/option_groups.h"

#include "iwb/engine/runtime/engine.h"

#include <cstdio>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

struct Options {
  std::string model;
  std::vector<int32_t> tokens;
  std::string output;
  int32_t num_greedy = 0;
  bool is_mtp = false;
  int64_t context = 512;
  int threads = 0;
  DeviceOptions device;
};

int parse(int argc, char** argv, Options* o) {
  OptionTable t("logits", "-m MODEL.gguf --tokens ID,ID,... [-o LOGITS.bin] [--greedy N] [options]",
                "Every position's logits for token ids, and greedy token ids after them (for comparing\n"
                "with another implementation on the same file).");
  add_model_option(t, &o->model);
  t.add({.names = {"--tokens"},
         .value_name = "IDS",
         .help = "the prompt as token ids",
         .destination = &o->tokens,
         .min = 0,
         .is_required = true});
  t.add({.names = {"-o", "--output"},
         .value_name = "FILE",
         .help = "write the logits here: 'IWBL', int32 positions, int32 vocabulary, f32 rows",
         .destination = &o->output});
  t.add({.names = {"--greedy"},
         .value_name = "N",
         .help = "print N greedy (argmax) token ids after the prompt on one line",
         .destination = &o->num_greedy,
         .min = 0});
  t.add({.names = {"--mtp"},
         .help = "the multi-token-prediction head's logits instead: position p reads token p and the\n"
                 "model's hidden state at p - 1 (zeros at 0), as llama.cpp's draft-mtp",
         .destination = &o->is_mtp});
  add_context_option(t, &o->context, "context per sequence (picks LongRoPE's factors as llama.cpp's -c does)", 1);
  add_threads_option(t, &o->threads);
  add_device_options(t, &o->device);
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (o->output.empty() && o->num_greedy == 0) return report_usage_error(t, "give -o FILE, --greedy N or both");
  if (o->is_mtp && (o->output.empty() || o->num_greedy > 0)) {
    return report_usage_error(t, "--mtp writes the head's logits: give -o FILE and no --greedy");
  }
  return -1;
}

Status write_logits(Engine& engine, const Options& o) {
  std::FILE* f = std::fopen(o.output.c_str(), "wb");
  if (f == nullptr) return make_error(ErrorCode::IoError, "cannot write '" + o.output + "'");
  const int32_t header[2] = {static_cast<int32_t>(o.tokens.size()), static_cast<int32_t>(engine.config().vocab_size)};
  bool is_written = std::fwrite("IWBL", 1, 4, f) == 4 && std::fwrite(header, sizeof header, 1, f) == 1;
  const Engine::LogitsSink sink = [&](int64_t, std::span<const float> row) -> Status {
    is_written = is_written && std::fwrite(row.data(), sizeof(float), row.size(), f) == row.size();
    return {};
  };
  Status s =
      o.is_mtp ? engine.mtp_logits_for_positions(o.tokens, sink) : engine.logits_for_positions(o.tokens, 0, sink);
  is_written = std::fclose(f) == 0 && is_written;
  if (!s.is_ok()) return s;
  if (!is_written) return make_error(ErrorCode::IoError, "writing '" + o.output + "' failed");
  return {};
}

Result<std::vector<int32_t>> greedy(Engine& engine, const Options& o) {
  GenerationRequest r;
  r.prompt_tokens = o.tokens;
  r.sampling.temperature = 0.0f;
  r.sampling.repeat_penalty = 1.0f;
  r.max_new_tokens = o.num_greedy;
  r.stop_at_end_of_generation = false;
  Result<RequestId> id = engine.add_request(r);
  if (!id) return id.status();
  std::vector<int32_t> out;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    for (const TokenEvent& e : step->tokens) out.push_back(e.token);
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error) return make_error(ErrorCode::DeviceError, f.error);
    }
  }
  return out;
}

}  // namespace

int run_logits(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  Result<std::string> device = resolve_device(o.device, o.model);
  if (!device) {
    std::fprintf(stderr, "iwb logits: %s\n", device.error_message().c_str());
    return 2;
  }
  EngineOptions eo;
  eo.context_length = o.context;
  eo.num_threads = o.threads;
  eo.device = *device;
  eo.load_mode = o.device.load_mode;
  eo.enable_prefix_caching = false;  // every position must be computed, not served from the cache
  eo.max_running_sequences = 1;
  auto engine = Engine::load(o.model, eo);
  if (!engine) {
    std::fprintf(stderr, "iwb logits: %s: %s\n", o.model.c_str(), engine.error_message().c_str());
    return 1;
  }
  for (int32_t t : o.tokens) {
    if (t >= (*engine)->config().vocab_size) {
      std::fprintf(stderr, "iwb logits: token %d is outside the vocabulary of %lld\n", t,
                   static_cast<long long>((*engine)->config().vocab_size));
      return 2;
    }
  }
  if (!o.output.empty()) {
    if (Status s = write_logits(**engine, o); !s.is_ok()) {
      std::fprintf(stderr, "iwb logits: %s\n", s.message().c_str());
      return 1;
    }
  }
  if (o.num_greedy > 0) {
    Result<std::vector<int32_t>> ids = greedy(**engine, o);
    if (!ids) {
      std::fprintf(stderr, "iwb logits: %s\n", ids.error_message().c_str());
      return 1;
    }
    for (size_t i = 0; i < ids->size(); ++i) std::printf(i ? " %d" : "%d", (*ids)[i]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace iwb::cli
