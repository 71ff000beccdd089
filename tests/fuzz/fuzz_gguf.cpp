// Fuzz target: the GGUF reader and what the model loader reads next from a file it accepted
// (the model summary with its tensor infos, the model configuration, the vocabulary and the
// tokenizer built from it). Every input must end in a value or a clear error, never a crash.
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = iwb::gguf::GgufFile::from_bytes(std::vector<uint8_t>(data, data + size));
  if (!file) return 0;
  (void)iwb::summarize_model(**file);
  (void)iwb::model_config_from_gguf(**file);
  auto tokenizer = iwb::tokenizer::Tokenizer::from_gguf(**file);
  if (tokenizer) {
    const auto ids = tokenizer->encode("Hello world, 123 <s> ünïcödé");
    (void)tokenizer->decode(ids);
  }
  return 0;
}
