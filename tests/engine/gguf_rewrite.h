// Test helpers for files with one thing wrong (test_gemma4_config, test_qwen35_config): an
// `iwb synth` preset written once in F32, and copies of a file with a key left out or added,
// a tensor left out or written with another shape.
#pragma once

#include "forward_checks.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QFile>
#include <QtGlobal>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace iwb::test {

// `preset` in F32 at `path`, synthesized unless the file is there already.
inline std::string synthesized_f32(const std::string& preset, const std::string& path) {
  if (QFile::exists(QString::fromStdString(path))) return path;
  if (const std::string error = synthesize_preset(preset, "F32", 0, path); !error.empty()) qFatal("%s", error.c_str());
  return path;
}

// A tensor written with another shape: its first bytes, as many as the new shape takes.
struct Reshape {
  std::string name;
  std::vector<int64_t> shape;
};

// A change to a file being copied: a key left out, metadata set on the writer after the
// original's, a tensor left out, a tensor reshaped (empty names: none).
struct Change {
  std::string dropped_key;
  std::function<void(gguf::GgufWriter&)> metadata;
  std::string dropped_tensor;
  Reshape reshaped;
};

// The F32 file at `from` written again to `to` with `change`.
inline std::string changed_copy(const std::string& from, const std::string& to, const Change& change) {
  auto file = gguf::GgufFile::open(from);
  if (!file.is_ok()) qFatal("%s", file.error_message().c_str());
  gguf::GgufWriter w((*file)->alignment());
  for (const gguf::KeyValue& kv : (*file)->metadata()) {
    if (kv.key != change.dropped_key) w.set(kv.key, kv.value);
  }
  if (change.metadata) change.metadata(w);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (t.name == change.dropped_tensor) continue;
    std::span<const uint8_t> data = (*file)->tensor_data(t);
    std::vector<int64_t> shape = t.shape;
    if (t.name == change.reshaped.name) {
      shape = change.reshaped.shape;
      int64_t elements = 1;
      for (const int64_t n : shape) elements *= n;
      // F32 only (the presets are written so): 4 bytes a value.
      data = data.first(std::min(data.size(), static_cast<size_t>(elements) * sizeof(float)));
    }
    if (!w.add_tensor(t.name, shape, t.type, data).is_ok()) qFatal("add_tensor %s failed", t.name.c_str());
  }
  if (!w.write_file(to).is_ok()) qFatal("write failed");
  return to;
}

}  // namespace iwb::test
