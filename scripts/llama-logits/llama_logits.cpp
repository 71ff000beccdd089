// llama_logits: runs llama.cpp's libllama (built outside this repository) on a GGUF and token
// ids, writing every position's logits and greedy continuation ids for compare-logits-llama.sh.
// With --mtp the rows are instead the MTP (next-n) head's logits, as llama.cpp's draft-mtp driver
// (common/speculative.cpp) computes them: row p reads token p and the target's last hidden state at
// position p-1 (zeros for p = 0). Built by that script against a llama.cpp build folder; not part of
// the project's build.
#include "llama-ext.h"  // staging C++ API of llama.cpp's src/: the next-n embeddings
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
               "                    [-t THREADS] [--flash-attn on|off] [--mtp]\n"
               "Writes the logits of every prompt position to LOGITS.bin ('IWBL', int32 positions, int32\n"
               "vocabulary, then f32 rows) and prints N greedy token ids after the prompt on stdout.\n"
               "--mtp: the rows are the MTP head's logits (row p: token p and the target's hidden state at\n"
               "p-1, zeros for p = 0); needs --greedy 0.\n");
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

bool write_logits(const std::string& path, llama_context* ctx, int n, int n_vocab) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const int32_t header[2] = {n, n_vocab};
  bool ok = std::fwrite("IWBL", 1, 4, f) == 4 && std::fwrite(header, sizeof header, 1, f) == 1;
  for (int i = 0; ok && i < n; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    ok = row != nullptr && std::fwrite(row, sizeof(float), n_vocab, f) == size_t(n_vocab);
  }
  return std::fclose(f) == 0 && ok;
}

// llama.cpp's MTP context on the target's weights: one batch of the n prompt tokens, entry p with the
// target's next-n embedding of p-1 as its hidden-state input (common_batch::set_embd, which is
// llama_batch_ext_set_embd_token: the MTP graph reads the batch's embedding as its h input).
llama_context* run_mtp(llama_model* model, llama_context* ctx_tgt, llama_context_params cp,
                       const std::vector<llama_token>& prompt) {
  if (llama_model_n_layer_nextn(model) < 1) return std::fprintf(stderr, "llama_logits: no MTP layer\n"), nullptr;
  cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;  // as common_speculative_init_result sets up the draft-mtp context
  cp.n_rs_seq = 0;
  cp.ctx_other = ctx_tgt;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return std::fprintf(stderr, "llama_logits: llama.cpp cannot make an MTP context\n"), nullptr;
  llama_set_embeddings_nextn(ctx, true, /*masked*/ true);
  const size_t n_embd = static_cast<size_t>(llama_model_n_embd_out(model));
  const std::vector<float> zeros(n_embd, 0.0f);
  llama_batch_ext* batch = llama_batch_ext_init(ctx);
  bool ok = true;
  for (int p = 0; ok && p < static_cast<int>(prompt.size()); ++p) {
    const float* h = p == 0 ? zeros.data() : llama_get_embeddings_nextn_ith(ctx_tgt, p - 1);
    const int32_t idx = llama_batch_ext_add_token(batch, 0, prompt[static_cast<size_t>(p)]);
    const llama_pos pos = p;
    ok = h != nullptr && idx == p && llama_batch_ext_set_pos(batch, idx, &pos) &&
         llama_batch_ext_set_embd_token(batch, idx, llama_embd{h, 1, n_embd}) &&
         llama_batch_ext_set_output_logits(batch, idx, true);
  }
  ok = ok && llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch) == 0;
  llama_batch_ext_free(batch);
  if (!ok) return std::fprintf(stderr, "llama_logits: the MTP batch failed\n"), llama_free(ctx), nullptr;
  return ctx;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path;
  std::vector<llama_token> prompt;
  int num_greedy = 0, context = 512, threads = 2;
  bool mtp = false;
  llama_flash_attn_type flash = LLAMA_FLASH_ATTN_TYPE_AUTO;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mtp") {
      mtp = true;
      continue;
    }
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
  if (model_path.empty() || prompt.empty() || (mtp && num_greedy != 0)) return usage(), 2;
  if (static_cast<int>(prompt.size()) + num_greedy > context) {
    return std::fprintf(stderr, "llama_logits: %zu prompt + %d greedy tokens exceed the context %d\n", prompt.size(),
                        num_greedy, context),
           2;
  }

  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mtp = mtp;
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
  if (mtp) llama_set_embeddings_nextn(ctx, true, /*masked*/ false);  // every position's hidden state

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

  llama_context* ctx_mtp = mtp ? run_mtp(model, ctx, cp, prompt) : nullptr;
  if (mtp && ctx_mtp == nullptr) return 1;
  if (!out_path.empty() && !write_logits(out_path, mtp ? ctx_mtp : ctx, n, n_vocab))
    return std::fprintf(stderr, "llama_logits: writing %s failed\n", out_path.c_str()), 1;

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
  if (ctx_mtp != nullptr) llama_free(ctx_mtp);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
