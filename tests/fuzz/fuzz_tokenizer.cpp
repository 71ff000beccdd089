// Fuzz target: every tokenizer family of the shared vocabulary files (SentencePiece, byte-level
// BPE with each pre-tokenizer, WordPiece): encode arbitrary text, decode arbitrary ids, and
// stream-detokenize them one at a time. The first byte picks the vocabulary, the second the
// options; the rest is text, then ids. The vocabularies load once, from IWB_FUZZ_VOCAB_DIR or
// the shared models folder.
#include "fuzz_input.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/tokenizer/streaming_detokenizer.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#ifndef IWB_SHARED_MODELS_DIR
#define IWB_SHARED_MODELS_DIR "../shared/models"
#endif

namespace {

std::vector<iwb::tokenizer::Tokenizer>& tokenizers() {
  static std::vector<iwb::tokenizer::Tokenizer> loaded = [] {
    std::vector<iwb::tokenizer::Tokenizer> result;
    const char* env = std::getenv("IWB_FUZZ_VOCAB_DIR");
    const std::filesystem::path dir = env ? env : IWB_SHARED_MODELS_DIR "/vocab-gguf";
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".gguf") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      auto file = iwb::gguf::GgufFile::open(path.string());
      if (!file) continue;
      auto tokenizer = iwb::tokenizer::Tokenizer::from_gguf(**file);
      if (tokenizer) result.push_back(std::move(*tokenizer));
    }
    if (result.empty()) std::fprintf(stderr, "fuzz_tokenizer: no vocabulary under %s\n", dir.c_str());
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
