// The tokenizer of a synthetic model (private to engine/src/synth): copied from a vocab GGUF,
// or a byte-level SentencePiece vocabulary that both this engine and llama.cpp load.
#pragma once

#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb::synth::detail {

// Copies every tokenizer.* key of the GGUF at `path` into the writer; returns its token count.
Result<int64_t> copy_tokenizer(const std::string& path, gguf::GgufWriter* writer);

// <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (every text encodes, byte by byte), the
// space token U+2581, then `control_tokens` (a chat format's markers, e.g. phi3's <|user|>) as
// control tokens, and [PAD n] tokens up to vocab_size (>= 260 + control tokens), so the
// embedding keeps the preset's shape.
Status add_byte_level_tokenizer(int64_t vocab_size, gguf::GgufWriter* writer,
                                const std::vector<std::string>& control_tokens = {});

inline constexpr int64_t kByteLevelMinVocab = 3 + 256 + 1;

}  // namespace iwb::synth::detail
