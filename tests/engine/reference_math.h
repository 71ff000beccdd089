// Double-precision building blocks shared by the tests' reference forward passes
// (reference_gemma4.cpp, reference_qwen35.cpp): tensors read and dequantized by name, per-layer
// keys, products, RMS norms, f16 rounding.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/kernels/dequantize.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace iwb::test::ref {

using Vec = std::vector<double>;

inline std::vector<float> load(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  if (!dequantize_row_ref(t->type, f.tensor_data(*t).data(), out.data(), t->num_elements())) return {};
  return out;
}

// A key that is one value for every layer or an array of one per layer; `fallback` when absent.
inline int64_t per_layer(const gguf::GgufFile& f, const std::string& key, int64_t il, int64_t fallback) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return fallback;
  if (const gguf::Array* a = v->as_array()) {
    return static_cast<size_t>(il) < a->items.size() ? a->items[static_cast<size_t>(il)].as_int().value_or(fallback)
                                                     : fallback;
  }
  return v->as_int().value_or(fallback);
}

// y[o] = sum_i W[o][i] x[i] over a [rows][x.size()] matrix, rows from `first_row`.
inline Vec matvec(const std::vector<float>& w, const Vec& x, int64_t out, int64_t first_row = 0) {
  const int64_t in = static_cast<int64_t>(x.size());
  Vec y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const float* row = w.data() + (first_row + o) * in;
    double s = 0;
    for (int64_t i = 0; i < in; ++i) s += static_cast<double>(row[i]) * x[static_cast<size_t>(i)];
    y[static_cast<size_t>(o)] = s;
  }
  return y;
}

// x[0, n) / rms(x) (* w where given).
inline void rms_norm(double* x, int64_t n, const float* w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv * (w != nullptr ? static_cast<double>(w[i]) : 1.0);
}

inline Vec normed(Vec x, const std::vector<float>& w, double eps) {
  rms_norm(x.data(), static_cast<int64_t>(x.size()), w.empty() ? nullptr : w.data(), eps);
  return x;
}

// x rounded to f16 and back (the f16 KV cache and llama.cpp's f16 queries).
inline double round_f16(double x) { return fp16_to_f32(f32_to_fp16(static_cast<float>(x))); }

// Each token's last hidden state through the output norm, as f32 rows.
inline std::vector<std::vector<float>> hidden_rows(std::vector<Vec> states, const std::vector<float>& output_norm,
                                                   double eps) {
  std::vector<std::vector<float>> out;
  for (Vec& h : states) {
    h = normed(std::move(h), output_norm, eps);
    out.emplace_back(h.begin(), h.end());
  }
  return out;
}

// Each token's logits: the output norm, the classifier of `vocab` rows, then `softcap` * tanh(z /
// softcap) where softcap > 0.
inline std::vector<std::vector<float>> logit_rows(const std::vector<Vec>& states, const std::vector<float>& output,
                                                  const std::vector<float>& output_norm, double eps, int64_t vocab,
                                                  double softcap = 0) {
  std::vector<std::vector<float>> out;
  for (const Vec& h : states) {
    const Vec z = matvec(output, normed(h, output_norm, eps), vocab);
    std::vector<float> row(z.size());
    for (size_t i = 0; i < z.size(); ++i)
      row[i] = static_cast<float>(softcap > 0 ? softcap * std::tanh(z[i] / softcap) : z[i]);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace iwb::test::ref
