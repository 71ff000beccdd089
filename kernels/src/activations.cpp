// Gated activations for the feed-forward block: SwiGLU and GeGLU (tanh approximation); the
// SIMD bodies are in activations_simd.cpp.
#include "iwb/kernels/activations.h"

#include "activations_simd.h"
#include "parallel.h"

#include <algorithm>

#include <cmath>

namespace iwb {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
constexpr double kGeluCoef = 0.044715;

bool valid(const GatedActivationArgs& a) {
  return a.gate != nullptr && a.up != nullptr && a.output != nullptr && a.num_elements > 0;
}

}  // namespace

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
  const float inner = static_cast<float>(kSqrt2OverPi) * x * (1.0f + static_cast<float>(kGeluCoef) * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

float swiglu_oai(float gate, float up) {
  const float g = std::min(gate, kSwigluOaiLimit);
  const float u = std::clamp(up, -kSwigluOaiLimit, kSwigluOaiLimit);
  return g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
}

bool gated_activation(const GatedActivationArgs& a) {
  if (!valid(a)) return false;
  const int num_threads = a.num_elements >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;
  if (a.kind == GatedActivation::SwigluOai) {  // expert-sized rows only: the scalar loop is enough
    detail::parallel_for_static(num_threads, a.num_elements,
                                [&](int64_t i) { a.output[i] = swiglu_oai(a.gate[i], a.up[i]); });
    return true;
  }
  if (const detail::GatedRowFn row =
          detail::select_gated_row(a.kind == GatedActivation::GeluTanh, detail::cpu_path())) {
    // Contiguous chunks of whole vectors, one per thread.
    const int64_t chunk = (a.num_elements / num_threads + 15) / 16 * 16;
    detail::parallel_for_static(num_threads, num_threads, [&](int64_t i) {
      const int64_t begin = std::min(a.num_elements, i * chunk);
      const int64_t end = i + 1 == num_threads ? a.num_elements : std::min(a.num_elements, begin + chunk);
      if (end > begin) row(a.gate + begin, a.up + begin, a.output + begin, end - begin);
    });
    return true;
  }
  if (a.kind == GatedActivation::SiLU) {
    detail::parallel_for_static(num_threads, a.num_elements,
                                [&](int64_t i) { a.output[i] = silu(a.gate[i]) * a.up[i]; });
  } else {
    detail::parallel_for_static(num_threads, a.num_elements,
                                [&](int64_t i) { a.output[i] = gelu_tanh(a.gate[i]) * a.up[i]; });
  }
  return true;
}

bool gated_activation_ref(const GatedActivationArgs& a) {
  if (!valid(a)) return false;
  for (int64_t i = 0; i < a.num_elements; ++i) {
    double g = a.gate[i], up = a.up[i];
    double act;
    if (a.kind == GatedActivation::SwigluOai) {
      g = std::min<double>(g, kSwigluOaiLimit);
      up = std::clamp<double>(up, -kSwigluOaiLimit, kSwigluOaiLimit) + 1.0;
      act = g / (1.0 + std::exp(-static_cast<double>(kSwigluOaiAlpha) * g));
    } else if (a.kind == GatedActivation::SiLU) {
      act = g / (1.0 + std::exp(-g));
    } else {
      act = 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * g * (1.0 + kGeluCoef * g * g)));
    }
    a.output[i] = static_cast<float>(act * up);
  }
  return true;
}

OpCost gated_activation_cost(const GatedActivationArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double n = static_cast<double>(a.num_elements);
  cost.flops = (a.kind == GatedActivation::GeluTanh ? 9.0 : a.kind == GatedActivation::SwigluOai ? 8.0 : 5.0) * n;
  cost.bytes = 12.0 * n;
  return cost;
}

}  // namespace iwb
