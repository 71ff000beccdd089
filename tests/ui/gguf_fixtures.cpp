// Writers for the UI tests' GGUF fixtures.
#include "gguf_fixtures.h"

#include "iwb/engine/gguf/gguf_writer.h"

#include <QFile>

namespace iwb::test {

uint64_t FixtureTensor::numElements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t FixtureTensor::numBytes() const {
  const uint64_t rows = numElements() / static_cast<uint64_t>(shape[0]);
  return *ggml_row_bytes(type, shape[0]) * rows;
}

const std::vector<FixtureTensor>& tinyModelTensors() {
  // blk.2 and blk.10 check that names sort as people count; Q8_0 checks block-size bytes.
  static const std::vector<FixtureTensor> tensors = {
      {"token_embd.weight", {16, 8}, GgmlType::F32},
      {"blk.0.attn_q.weight", {16, 16}, GgmlType::F16},
      {"blk.0.ffn_up.weight", {16, 32}, GgmlType::F16},
      {"blk.10.attn_norm.weight", {16}, GgmlType::F32},
      {"blk.2.attn_norm.weight", {16}, GgmlType::F32},
      {"output_norm.weight", {16}, GgmlType::F32},
      {"output.weight", {32, 8}, GgmlType::Q8_0},
  };
  return tensors;
}

uint64_t tinyModelParamCount() {
  uint64_t n = 0;
  for (const FixtureTensor& t : tinyModelTensors()) n += t.numElements();
  return n;
}

Status writeTinyModel(const QString& path) {
  gguf::GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("general.name", kTinyModelName);
  writer.set_u32("general.file_type", 1);  // "mostly F16"
  writer.set_u32("llama.block_count", 11);
  writer.set_u32("llama.context_length", 256);
  writer.set_u32("llama.embedding_length", 16);
  writer.set_u32("llama.feed_forward_length", 32);
  writer.set_u32("llama.attention.head_count", 4);
  writer.set_u32("llama.attention.head_count_kv", 2);
  writer.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  writer.set_f32("llama.rope.freq_base", 10000.0f);
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set("tokenizer.ggml.tokens",
             gguf::Value::string_array({"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "abc"}));
  writer.set_string("tokenizer.chat_template", kTinyChatTemplate);

  uint8_t seed = 1;
  for (const FixtureTensor& t : tinyModelTensors()) {
    std::vector<uint8_t> bytes(t.numBytes());
    for (uint8_t& b : bytes) b = seed = static_cast<uint8_t>(seed * 73 + 41);
    IWB_RETURN_IF_ERROR(writer.add_tensor(t.name, t.shape, t.type, bytes));
  }
  return writer.write_file(QFile::encodeName(path).toStdString());
}

Status writeCorruptGguf(const QString& path) {
  QByteArray bytes("GGUF", 4);
  const auto appendLe = [&bytes](uint64_t v, int size) {
    for (int i = 0; i < size; ++i) bytes.append(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  appendLe(3, 4);                      // version
  appendLe(0x7fffffffffffffffULL, 8);  // tensor count: far more than the file could hold
  appendLe(0, 8);                      // metadata count
  bytes.append(64, '\0');
  return writeTextFile(path, bytes);
}

Status writeTextFile(const QString& path, const QByteArray& text) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size()) {
    return make_error(ErrorCode::IoError, "cannot write " + path.toStdString());
  }
  return {};
}

}  // namespace iwb::test
