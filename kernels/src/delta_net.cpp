// Qwen 3.5's recurrent layer kernels: the short causal convolution and the gated delta rule,
// fast (float, SIMD dots, one pass over each state row per token) and reference (double).
#include "iwb/kernels/delta_net.h"

#include "activations_simd.h"
#include "cpu_features.h"
#include "parallel.h"
#include "simd.h"

#include <algorithm>
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

// The reference conv of channel c at every token, in double: the window is [state (kernel - 1),
// inputs].
void conv_channel_ref(const ShortConvArgs& a, int64_t c) {
  const int64_t hist = a.kernel - 1;
  const float* w = a.weight + c * a.kernel;
  auto window = [&](int64_t i) {  // i in [0, hist + num_tokens)
    return i < hist ? a.state[i * a.channels + c] : a.input[(i - hist) * a.channels + c];
  };
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    double sum = 0;
    for (int64_t i = 0; i < a.kernel; ++i) sum += static_cast<double>(window(t + i)) * w[i];
    a.output[t * a.channels + c] = static_cast<float>(sum * sigmoid(sum));
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

constexpr int64_t kConvChunk = 1024;  // channels per work item of the convolution

// Token t's convolution over channels [c0, c0 + n) into out (taps by tap, [kernel x channels]).
template <int kIsa>
[[gnu::always_inline]] inline void conv_row_body(const ShortConvArgs& a, const float* taps, int64_t t, int64_t c0,
                                                 int64_t n, float* __restrict out) {
  const int64_t hist = a.kernel - 1;
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) out[c] = 0.0f;
  for (int64_t i = 0; i < a.kernel; ++i) {
    const int64_t w = t + i;  // window index
    const float* __restrict row = (w < hist ? a.state + w * a.channels : a.input + (w - hist) * a.channels) + c0;
    const float* __restrict tap = taps + i * a.channels + c0;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) out[c] += tap[c] * row[c];
  }
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f,avx2,fma"))) void conv_row_avx512(const ShortConvArgs& a, const float* taps, int64_t t,
                                                                 int64_t c0, int64_t n, float* out) {
  conv_row_body<2>(a, taps, t, c0, n, out);
}
__attribute__((target("avx2,fma"))) void conv_row_avx2(const ShortConvArgs& a, const float* taps, int64_t t, int64_t c0,
                                                       int64_t n, float* out) {
  conv_row_body<1>(a, taps, t, c0, n, out);
}
#endif

void conv_row(const ShortConvArgs& a, const float* taps, int64_t t, int64_t c0, int64_t n, float* out) {
#if defined(__x86_64__) || defined(__i386__)
  switch (detail::cpu_path()) {
    case detail::CpuPath::Avx512: conv_row_avx512(a, taps, t, c0, n, out); return;
    case detail::CpuPath::Avx2:
    case detail::CpuPath::AvxVnni: conv_row_avx2(a, taps, t, c0, n, out); return;
    case detail::CpuPath::Portable: break;
  }
#endif
  conv_row_body<0>(a, taps, t, c0, n, out);
}

// One value head over every token. The state is stored by key row: row i holds S[:, i], the
// key's weight in every value (contiguous over the values), so each token is two passes over the
// rows with plain multiply-adds across the values, vectorised without horizontal sums:
//   pass 1: sk = sum_i k[i] row_i                  (S k of the decayed state is decay * sk)
//   delta = (v - decay * sk) * b
//   pass 2: row_i = decay * row_i + k[i] delta;  out += q[i] row_i
// `scratch` holds 4 * head_dim floats (q, k, sk, out). The loops are `omp simd`: the kernels build at
// -O2, where GCC vectorises only what it is told to.
template <int kIsa>
[[gnu::always_inline]] inline void head_tokens(const DeltaNetArgs& a, int64_t h, float* scratch) {
  const int64_t d = a.head_dim, hk = a.num_key_heads, hv = a.num_value_heads;
  const int64_t row = (2 * hk + hv) * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* __restrict qn = scratch;
  float* __restrict kn = scratch + d;
  float* __restrict sk = scratch + 2 * d;
  float* __restrict out_acc = scratch + 3 * d;
  float* s = a.state + h * d * d;
  const int64_t key_head = h % hk;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const float* x = a.qkv + t * row;
    normalise(x + key_head * d, qn, d, a.eps);
    normalise(x + (hk + key_head) * d, kn, d, a.eps);
    const float* v = x + (2 * hk + h) * d;
    const auto g = static_cast<float>(softplus(static_cast<double>(a.alpha[t * hv + h]) + a.dt_bias[h]) * a.a[h]);
    const float decay = std::exp(g);
    const auto b = static_cast<float>(sigmoid(a.beta[t * hv + h]));
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) sk[j] = 0.0f;
    for (int64_t i = 0; i < d; ++i) {
      const float ki = kn[i];
      const float* __restrict si = s + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) sk[j] += ki * si[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      sk[j] = (v[j] - decay * sk[j]) * b;  // delta
      out_acc[j] = 0.0f;
    }
    for (int64_t i = 0; i < d; ++i) {
      const float ki = kn[i], qi = qn[i];
      float* __restrict si = s + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        si[j] = decay * si[j] + ki * sk[j];
        out_acc[j] += qi * si[j];
      }
    }
    float* out = a.output + t * hv * d + h * d;
    for (int64_t j = 0; j < d; ++j) out[j] = out_acc[j] * scale;
  }
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f,avx2,fma"))) void head_tokens_avx512(const DeltaNetArgs& a, int64_t h, float* scratch) {
  head_tokens<2>(a, h, scratch);
}
__attribute__((target("avx2,fma"))) void head_tokens_avx2(const DeltaNetArgs& a, int64_t h, float* scratch) {
  head_tokens<1>(a, h, scratch);
}
#endif
void head_tokens_portable(const DeltaNetArgs& a, int64_t h, float* scratch) { head_tokens<0>(a, h, scratch); }

void run_head(const DeltaNetArgs& a, int64_t h, float* scratch) {
#if defined(__x86_64__) || defined(__i386__)
  switch (detail::cpu_path()) {
    case detail::CpuPath::Avx512: head_tokens_avx512(a, h, scratch); return;
    case detail::CpuPath::Avx2:
    case detail::CpuPath::AvxVnni: head_tokens_avx2(a, h, scratch); return;
    case detail::CpuPath::Portable: break;
  }
#endif
  head_tokens_portable(a, h, scratch);
}

}  // namespace

bool short_conv_silu(const ShortConvArgs& a) {
  if (!valid(a)) return false;
  const int64_t hist = a.kernel - 1, channels = a.channels;
  // The taps by tap (tap i of every channel together), so each tap is one multiply-add across a
  // row of channels.
  std::vector<float> taps(static_cast<size_t>(a.kernel * channels));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < a.kernel; ++i) taps[static_cast<size_t>(i * channels + c)] = a.weight[c * a.kernel + i];
  }
  const std::vector<float> ones(static_cast<size_t>(std::min(channels, kConvChunk)), 1.0f);
  const detail::GatedRowFn silu_row = detail::select_gated_row(false, detail::cpu_path());
  // Work items: a token's row of channels, in chunks (a decode token still splits across threads).
  const int64_t num_chunks = (channels + kConvChunk - 1) / kConvChunk;
  const int num_threads =
      a.num_tokens * channels * a.kernel >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;
  detail::parallel_for_static(num_threads, a.num_tokens * num_chunks, [&](int64_t w) {
    const int64_t t = w / num_chunks, c0 = (w % num_chunks) * kConvChunk;
    const int64_t n = std::min(kConvChunk, channels - c0);
    float* out = a.output + t * channels + c0;
    conv_row(a, taps.data(), t, c0, n, out);
    if (silu_row != nullptr) {
      silu_row(out, ones.data(), out, n);
    } else {
      for (int64_t c = 0; c < n; ++c) out[c] = out[c] / (1.0f + std::exp(-out[c]));
    }
  });
  // The new state: the window's last hist rows (older state rows when the call has fewer tokens).
  if (hist > 0) {
    std::vector<float> last(static_cast<size_t>(hist * channels));
    for (int64_t r = 0; r < hist; ++r) {
      const int64_t i = a.num_tokens + r;  // window index
      const float* from = i < hist ? a.state + i * channels : a.input + (i - hist) * channels;
      std::copy(from, from + channels, last.begin() + static_cast<ptrdiff_t>(r * channels));
    }
    std::copy(last.begin(), last.end(), a.state);
  }
  return true;
}

bool short_conv_silu_ref(const ShortConvArgs& a) {
  if (!valid(a)) return false;
  for (int64_t c = 0; c < a.channels; ++c) conv_channel_ref(a, c);
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
  const int64_t d = a.head_dim, hv = a.num_value_heads;
  const int num_threads =
      hv > 1 && a.num_tokens * d * d >= detail::kMinParallelWork / 4 ? detail::resolve_threads(a.num_threads) : 1;
  // Value heads are independent: each thread runs its heads' recurrence over every token.
  detail::parallel_for_dynamic(num_threads, hv, [&](int64_t h) {
    std::vector<float> scratch(static_cast<size_t>(4 * d));
    run_head(a, h, scratch.data());
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
    // s[j * d + i] = S[j][i] (value j, key i); the buffer holds it by key row (state[i * d + j]).
    float* state = a.state + h * d * d;
    for (size_t j = 0; j < ud; ++j) {
      for (size_t i = 0; i < ud; ++i) s[j * ud + i] = state[i * ud + j];
    }
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
    for (size_t j = 0; j < ud; ++j) {
      for (size_t i = 0; i < ud; ++i) state[i * ud + j] = static_cast<float>(s[j * ud + i]);
    }
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
