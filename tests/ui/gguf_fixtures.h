// Small GGUF files for the UI tests, written with iwb::gguf::GgufWriter: a tiny "llama" with a
// handful of tensors of several types, a corrupt file and a file that is not GGUF at all.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <QString>

#include <cstdint>
#include <string>
#include <vector>

namespace iwb::test {

struct FixtureTensor {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
  GgmlType type;
  uint64_t numElements() const;
  uint64_t numBytes() const;
};

// The tensors of the tiny model, in file order.
const std::vector<FixtureTensor>& tinyModelTensors();
uint64_t tinyModelParamCount();   // sum of elements, computed from the list above
inline constexpr const char* kTinyModelName = "Tiny Test Llama";
inline constexpr int kTinyModelNumMetadata = 14;  // keys written by writeTinyModel
inline constexpr int kTinyModelVocabSize = 8;
// Written into tokenizer.chat_template: markup-like text that must be shown as text.
inline constexpr const char* kTinyChatTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";

Status writeTinyModel(const QString& path);
// A file with the GGUF magic whose header claims an impossible number of tensors.
Status writeCorruptGguf(const QString& path);
// Plain text bytes, whatever the file is called.
Status writeTextFile(const QString& path, const QByteArray& text);

}  // namespace iwb::test
