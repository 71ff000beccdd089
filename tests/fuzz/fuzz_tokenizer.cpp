// Fuzz target: every tokenizer family of the shared vocabulary files (SentencePiece, byte-level
// BPE with each pre-tokenizer, Gemma 4's SPM-style BPE, WordPiece): encode arbitrary text,
// decode arbitrary ids, and stream-detokenize them one at a time. The first byte picks the
// vocabulary, the second the options; the rest is text, then ids. The vocabularies load once,
// from IWB_FUZZ_VOCAB_DIR, or else the shared models folder and llama.cpp's vocab cache
// (scripts/fetch-llama-vocab.sh; a file in both is loaded once).
#include "fuzz_input.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/tokenizer/streaming_detokenizer.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_paths.h"

#ifndef IWB_LLAMA_VOCAB_DIR
#define IWB_LLAMA_VOCAB_DIR ""
#endif

namespace {

std::vector<iwb::tokenizer::Tokenizer>& tokenizers() {
  static std::vector<iwb::tokenizer::Tokenizer> loaded = [] {
    std::vector<iwb::tokenizer::Tokenizer> result;
    const char* env = std::getenv("IWB_FUZZ_VOCAB_DIR");
    std::vector<std::filesystem::path> dirs;
    if (env != nullptr) {
      dirs = {env};
    } else {
      dirs = {iwb::test::shared_models_dir() + "/vocab-gguf", IWB_LLAMA_VOCAB_DIR};
    }
    std::map<std::string, std::filesystem::path> files;  // by name: the first folder wins
    for (const auto& dir : dirs) {
      std::error_code error;
      if (dir.empty()) continue;
      for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
        if (entry.path().extension() == ".gguf") files.emplace(entry.path().filename().string(), entry.path());
      }
    }
    for (const auto& [name, path] : files) {
      auto file = iwb::gguf::GgufFile::open(path.string());
      if (!file) continue;
      auto tokenizer = iwb::tokenizer::Tokenizer::from_gguf(**file);
      if (tokenizer) result.push_back(std::move(*tokenizer));
    }
    if (result.empty()) std::fprintf(stderr, "fuzz_tokenizer: no vocabulary under %s\n", dirs.front().c_str());
    return result;
  }();
  return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& all = tokenizers();
  if (all.empty() || size < 2) return 0;
  iwb::fuzz::FuzzInput in(data, size);
  const iwb::tokenizer::Tokenizer& tokenizer = all[in.byte() % all.size()];
  const uint8_t flags = in.byte();

  iwb::tokenizer::EncodeOptions encode;
  encode.add_bos = flags & 1;
  encode.parse_special = flags & 2;
  const std::string text = in.string(4096);
  const auto ids = tokenizer.encode(text, encode);
  iwb::tokenizer::DecodeOptions decode;
  decode.render_special = flags & 4;
  decode.clean_spaces = flags & 32;
  (void)tokenizer.decode(ids, decode);

  // Arbitrary ids, valid or not: decode must skip or reject, the streaming detokenizer must
  // hold back split characters and never emit invalid UTF-8 or crash.
  std::vector<iwb::tokenizer::TokenId> random_ids;
  while (in.remaining() >= 4 && random_ids.size() < 512) {
    random_ids.push_back(static_cast<iwb::tokenizer::TokenId>(in.u32() % (tokenizer.num_tokens() + 8)));
  }
  (void)tokenizer.decode(random_ids, decode);
  iwb::tokenizer::StreamingDetokenizer stream(tokenizer, flags & 8, flags & 16);
  for (iwb::tokenizer::TokenId id : random_ids) (void)stream.push(id);
  (void)stream.flush();
  return 0;
}
