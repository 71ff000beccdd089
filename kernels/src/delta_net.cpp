// Qwen 3.5's recurrent layer kernels: the short causal convolution and the gated delta rule,
// fast (float, SIMD dots, one pass over each state row per token) and reference (double).
#include "iwb/kernels/delta_net.h"

#include "parallel.h"
#include "simd.h"

#include <cmath>
#include <vector>

namespace iwb {
namespace {

bool valid(const ShortConvArgs& a) {
  return a.input != nullptr && a.output != nullptr && (a.state != nullptr || a.kernel == 1) && a.weight != nullptr &&
         a.input != a.output && a.num_tokens > 0 && a.channels > 0 && a.kernel >= 1;
}

bool valid(const DeltaNetArgs& a) {
  return a.qkv != nullptr && a.alpha != nullptr && a.beta != nullptr && a.dt_bias != nullptr && a.a != nullptr &&
         a.state != nullptr && a.output != nullptr && a.num_tokens > 0 && a.num_key_heads > 0 &&
         a.num_value_heads > 0 && a.num_value_heads % a.num_key_heads == 0 && a.head_dim > 0 && a.eps >= 0.0f;
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }  // ggml_softplus's cut-off
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The conv of channel c at every token: the window is [state (kernel - 1), inputs].
template <typename Acc>
void conv_channel(const ShortConvArgs& a, int64_t c) {
  const int64_t hist = a.kernel - 1;
  const float* w = a.weight + c * a.kernel;
  auto window = [&](int64_t i) {  // i in [0, hist + num_tokens)
    return i < hist ? a.state[i * a.channels + c] : a.input[(i - hist) * a.channels + c];
  };
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    Acc sum = 0;
    for (int64_t i = 0; i < a.kernel; ++i) sum += static_cast<Acc>(window(t + i)) * static_cast<Acc>(w[i]);
    a.output[t * a.channels + c] = static_cast<float>(static_cast<double>(sum) * sigmoid(static_cast<double>(sum)));
  }
  // The new state: the window's last hist values (older state values when the call has fewer tokens).
  float last[16];
  std::vector<float> spill;
  float* keep = last;
  if (hist > 16) {
    spill.resize(static_cast<size_t>(hist));
    keep = spill.data();
  }
  for (int64_t i = 0; i < hist; ++i) keep[i] = window(a.num_tokens + i);
  for (int64_t i = 0; i < hist; ++i) a.state[i * a.channels + c] = keep[i];
}

// Per token: q and k L2-normalised into qn, kn (head_dim each).
void normalise(const float* x, float* out, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(simd::dot_f32(x, x, n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace

bool short_conv_silu(const ShortConvArgs& a) {
  if (!valid(a)) return false;
  const int num_threads =
      a.num_tokens * a.channels * a.kernel >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;
  // Channels are independent; a thread's channels are contiguous, so its reads of a row stay in
  // one stretch of cache lines.
  detail::parallel_for_static(num_threads, a.channels, [&](int64_t c) { conv_channel<float>(a, c); });
  return true;
}

bool short_conv_silu_ref(const ShortConvArgs& a) {
  if (!valid(a)) return false;
  for (int64_t c = 0; c < a.channels; ++c) conv_channel<double>(a, c);
  return true;
}

OpCost short_conv_cost(const ShortConvArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double n = static_cast<double>(a.num_tokens) * static_cast<double>(a.channels);
  const double state = static_cast<double>((a.kernel - 1) * a.channels);
  cost.flops = n * (2.0 * static_cast<double>(a.kernel) + 4.0);  // the taps, then SiLU
  cost.bytes = 8.0 * n + 8.0 * state + 4.0 * static_cast<double>(a.channels * a.kernel);
  return cost;
}

bool delta_net(const DeltaNetArgs& a) {
  if (!valid(a)) return false;
  const int64_t d = a.head_dim, hk = a.num_key_heads, hv = a.num_value_heads;
  const int64_t row = (2 * hk + hv) * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int num_threads =
      hv > 1 && a.num_tokens * d * d >= detail::kMinParallelWork / 4 ? detail::resolve_threads(a.num_threads) : 1;
  // Value heads are independent: each thread runs its heads' recurrence over every token.
  detail::parallel_for_dynamic(num_threads, hv, [&](int64_t h) {
    std::vector<float> qn(static_cast<size_t>(d)), kn(static_cast<size_t>(d));
    float* s = a.state + h * d * d;
    const int64_t key_head = h % hk;
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const float* x = a.qkv + t * row;
      normalise(x + key_head * d, qn.data(), d, a.eps);
      normalise(x + (hk + key_head) * d, kn.data(), d, a.eps);
      const float* v = x + (2 * hk + h) * d;
      const auto g = static_cast<float>(softplus(static_cast<double>(a.alpha[t * hv + h]) + a.dt_bias[h]) * a.a[h]);
      const float decay = std::exp(g);
      const auto b = static_cast<float>(sigmoid(a.beta[t * hv + h]));
      float* out = a.output + t * hv * d + h * d;
      // Row j of the state is value j's: decay it, read its key response, correct it towards
      // v[j] along k, then read the query's response; one pass over the row.
      for (int64_t j = 0; j < d; ++j) {
        float* sj = s + j * d;
        for (int64_t i = 0; i < d; ++i) sj[i] *= decay;
        const float delta = (v[j] - simd::dot_f32(sj, kn.data(), d)) * b;
        for (int64_t i = 0; i < d; ++i) sj[i] += delta * kn[static_cast<size_t>(i)];
        out[j] = simd::dot_f32(sj, qn.data(), d) * scale;
      }
    }
  });
  return true;
}

bool delta_net_ref(const DeltaNetArgs& a) {
  if (!valid(a)) return false;
  const int64_t d = a.head_dim, hk = a.num_key_heads, hv = a.num_value_heads;
  const int64_t row = (2 * hk + hv) * d;
  const auto ud = static_cast<size_t>(d);
  std::vector<double> s(ud * ud), qn(ud), kn(ud);
  auto l2 = [&](const float* x, std::vector<double>& out) {
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(sum + a.eps);
    for (int64_t i = 0; i < d; ++i) out[static_cast<size_t>(i)] = x[i] * inv;
  };
  for (int64_t h = 0; h < hv; ++h) {
    float* state = a.state + h * d * d;
    for (size_t i = 0; i < ud * ud; ++i) s[i] = state[i];
    const int64_t key_head = h % hk;
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const float* x = a.qkv + t * row;
      l2(x + key_head * d, qn);
      l2(x + (hk + key_head) * d, kn);
      const float* v = x + (2 * hk + h) * d;
      const double decay = std::exp(softplus(static_cast<double>(a.alpha[t * hv + h]) + a.dt_bias[h]) * a.a[h]);
      const double b = sigmoid(a.beta[t * hv + h]);
      for (size_t i = 0; i < ud * ud; ++i) s[i] *= decay;
      for (size_t j = 0; j < ud; ++j) {
        double sk = 0;
        for (size_t i = 0; i < ud; ++i) sk += s[j * ud + i] * kn[i];
        const double delta = (v[j] - sk) * b;
        for (size_t i = 0; i < ud; ++i) s[j * ud + i] += delta * kn[i];
      }
      float* out = a.output + t * hv * d + h * d;
      for (size_t j = 0; j < ud; ++j) {
        double o = 0;
        for (size_t i = 0; i < ud; ++i) o += s[j * ud + i] * qn[i];
        out[j] = static_cast<float>(o / std::sqrt(static_cast<double>(d)));
      }
    }
    for (size_t i = 0; i < ud * ud; ++i) state[i] = static_cast<float>(s[i]);
  }
  return true;
}

OpCost delta_net_cost(const DeltaNetArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double t = static_cast<double>(a.num_tokens), d = static_cast<double>(a.head_dim);
  const double hv = static_cast<double>(a.num_value_heads);
  const double width = static_cast<double>((2 * a.num_key_heads + a.num_value_heads) * a.head_dim);
  // Per token and head: decay, two dots and a rank-1 update over the d x d state (7 d^2).
  cost.flops = t * hv * 7.0 * d * d;
  // The state is read and written once per call (it stays in cache between tokens); the
  // inputs and outputs once per token.
  cost.bytes = 8.0 * hv * d * d + 4.0 * t * (width + 2.0 * hv + hv * d);
  return cost;
}

}  // namespace iwb
