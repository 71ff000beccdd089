// llama_logits: runs llama.cpp's libllama (built outside this repository) on a GGUF and token
// ids, writing every position's logits and greedy continuation ids for compare-logits-llama.sh.
// Built by that script against a llama.cpp build folder; not part of the project's build.
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: llama_logits -m MODEL.gguf --tokens ID,ID,... [-o LOGITS.bin] [--greedy N] [-c CTX]\n"
               "                    [-t THREADS] [--flash-attn on|off]\n"
               "Writes the logits of every prompt position to LOGITS.bin ('IWBL', int32 positions, int32\n"
               "vocabulary, then f32 rows) and prints N greedy token ids after the prompt on stdout.\n");
}

bool parse_tokens(const char* text, std::vector<llama_token>* out) {
  const char* p = text;
  while (*p) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 0) return false;
    out->push_back(static_cast<llama_token>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return false;
  }
  return !out->empty();
}

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return best;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path;
  std::vector<llama_token> prompt;
  int num_greedy = 0, context = 512, threads = 2;
  llama_flash_attn_type flash = LLAMA_FLASH_ATTN_TYPE_AUTO;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return usage(), 2;
    if (a == "-m")
      model_path = v;
    else if (a == "-o")
      out_path = v;
    else if (a == "--tokens") {
      if (!parse_tokens(v, &prompt)) return std::fprintf(stderr, "llama_logits: bad --tokens '%s'\n", v), 2;
    } else if (a == "--greedy")
      num_greedy = std::atoi(v);
    else if (a == "-c")
      context = std::atoi(v);
    else if (a == "-t")
      threads = std::atoi(v);
    else if (a == "--flash-attn")
      flash = std::strcmp(v, "on") == 0 ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else
      return usage(), 2;
    ++i;
  }
  if (model_path.empty() || prompt.empty()) return usage(), 2;
  if (static_cast<int>(prompt.size()) + num_greedy > context) {
    return std::fprintf(stderr, "llama_logits: %zu prompt + %d greedy tokens exceed the context %d\n", prompt.size(),
                        num_greedy, context),
           2;
  }

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (model == nullptr) return std::fprintf(stderr, "llama_logits: llama.cpp cannot load %s\n", model_path.c_str()), 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(context);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(prompt.size() < 512 ? 512 : prompt.size());
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.flash_attn_type = flash;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return std::fprintf(stderr, "llama_logits: llama.cpp cannot make a context\n"), 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  // The whole prompt in one batch, logits at every position.
  const int n = static_cast<int>(prompt.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = prompt[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return std::fprintf(stderr, "llama_logits: llama_decode failed\n"), 1;

  if (!out_path.empty()) {
    std::FILE* f = std::fopen(out_path.c_str(), "wb");
    if (f == nullptr) return std::fprintf(stderr, "llama_logits: cannot write %s\n", out_path.c_str()), 1;
    const int32_t header[2] = {n, n_vocab};
    bool ok = std::fwrite("IWBL", 1, 4, f) == 4 && std::fwrite(header, sizeof header, 1, f) == 1;
    for (int i = 0; ok && i < n; ++i)
      ok = std::fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, f) == size_t(n_vocab);
    if (std::fclose(f) != 0 || !ok)
      return std::fprintf(stderr, "llama_logits: writing %s failed\n", out_path.c_str()), 1;
  }

  // Greedy continuation: one token per decode, as a chat would run it.
  llama_token next = argmax(llama_get_logits_ith(ctx, n - 1), n_vocab);
  for (int step = 0; step < num_greedy; ++step) {
    std::printf(step ? " %d" : "%d", next);
    if (step + 1 == num_greedy) break;
    llama_batch one = llama_batch_get_one(&next, 1);
    if (llama_decode(ctx, one) != 0) return std::fprintf(stderr, "\nllama_logits: llama_decode failed\n"), 1;
    next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
  }
  if (num_greedy > 0) std::printf("\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
