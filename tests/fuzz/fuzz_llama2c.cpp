// Fuzz target: the llama2.c converter's inputs: the checkpoint header (its sizes decide how
// many bytes the converter then expects) and the tokenizer file. The first byte picks which.
#include "iwb/engine/convert/llama2c.h"

#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> rest(data + 1, size - 1);
  if (data[0] & 1) {
    auto config = iwb::convert::parse_llama2c_header(rest);
    if (config) (void)iwb::convert::llama2c_checkpoint_bytes(*config);
  } else {
    // The vocabulary size the checkpoint would announce: small, odd and the usual 32000.
    static const int64_t kSizes[] = {1, 3, 512, 32000};
    (void)iwb::convert::parse_llama2c_tokenizer(rest, kSizes[(data[0] >> 1) % 4]);
  }
  return 0;
}
