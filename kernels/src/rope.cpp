// Rotary position embedding. The fast path computes each position's cos/sin row once and
// applies it to every head (and keeps it for later calls at that position with the same
// settings); the reference recomputes every angle in double.
#include "iwb/kernels/rope.h"

#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iwb {
namespace {

bool valid(const RopeArgs& a) {
  return a.data != nullptr && a.positions != nullptr && a.num_tokens > 0 && a.num_heads > 0 && a.head_dim > 0 &&
         a.num_rotated > 0 && a.num_rotated % 2 == 0 && a.num_rotated <= a.head_dim && a.freq_base > 0.0f &&
         a.freq_scale > 0.0f && a.ext_factor >= 0.0f && (a.ext_factor == 0.0f || a.original_context > 0);
}

// ggml's rope_yarn_ramp at pair i: 1 below corr dim low, 0 above high.
double yarn_ramp(float low, float high, int64_t i) {
  const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
  return 1.0 - std::min(1.0f, std::max(0.0f, y));
}

// The YaRN pieces shared by both paths: the per-pair extrapolation mix and the magnitude scale.
struct YarnMix {
  float dims[2] = {0.0f, 0.0f};
  double mscale = 1.0;
};

YarnMix yarn_mix(const RopeArgs& a) {
  YarnMix m;
  m.mscale = a.attn_factor;
  if (a.ext_factor != 0.0f) {
    rope_yarn_corr_dims(a.num_rotated, a.original_context, a.freq_base, a.beta_fast, a.beta_slow, m.dims);
    m.mscale *= 1.0 + 0.1 * std::log(1.0 / a.freq_scale);
  }
  return m;
}

// Pair i's angle per unit position: interpolated, mixed with the extrapolated one under YaRN.
double pair_frequency(const RopeArgs& a, const YarnMix& m, int64_t i) {
  double extrap = std::pow(static_cast<double>(a.freq_base), -2.0 * static_cast<double>(i) / a.num_rotated);
  if (a.freq_factors) extrap /= a.freq_factors[i];
  const double interp = a.freq_scale * extrap;
  if (a.ext_factor == 0.0f) return interp;
  const double mix = yarn_ramp(m.dims[0], m.dims[1], i) * a.ext_factor;
  return interp * (1.0 - mix) + extrap * mix;
}

// The two elements pair i of a head rotates together.
inline void pair_indices(RopeLayout layout, int64_t i, int64_t num_rotated, int64_t* first, int64_t* second) {
  if (layout == RopeLayout::Normal) {
    *first = 2 * i;
    *second = 2 * i + 1;
  } else {
    *first = i;
    *second = i + num_rotated / 2;
  }
}

}  // namespace

void rope_yarn_corr_dims(int64_t num_rotated, int64_t original_context, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]) {
  // In float, as ggml: the dims are floored and ceiled, so a rounding difference could move them.
  const auto corr_dim = [&](float rotations) {
    return static_cast<float>(num_rotated) *
           std::log(static_cast<float>(original_context) / (rotations * 2.0f * static_cast<float>(M_PI))) /
           (2.0f * std::log(freq_base));
  };
  dims[0] = std::max(0.0f, std::floor(corr_dim(beta_fast)));
  dims[1] = std::min(static_cast<float>(num_rotated - 1), std::ceil(corr_dim(beta_slow)));
}

namespace {

// What a rope call's angles depend on besides the position: equal keys, equal tables.
// (The frequency factors by value: another model's may come at the same address.)
struct RopeKey {
  int64_t num_rotated = 0;
  float freq_base = 0, freq_scale = 0, ext_factor = 0, attn_factor = 0, beta_fast = 0, beta_slow = 0;
  int64_t original_context = 0;
  std::vector<float> freq_factors;  // empty: none
};

bool key_matches(const RopeKey& k, const RopeArgs& a) {
  if (k.num_rotated != a.num_rotated || k.freq_base != a.freq_base || k.freq_scale != a.freq_scale ||
      k.ext_factor != a.ext_factor || k.attn_factor != a.attn_factor || k.beta_fast != a.beta_fast ||
      k.beta_slow != a.beta_slow || k.original_context != a.original_context ||
      k.freq_factors.empty() != (a.freq_factors == nullptr)) {
    return false;
  }
  return a.freq_factors == nullptr || std::equal(k.freq_factors.begin(), k.freq_factors.end(), a.freq_factors);
}

RopeKey key_of(const RopeArgs& a) {
  RopeKey k{a.num_rotated,      a.freq_base, a.freq_scale, a.ext_factor, a.attn_factor, a.beta_fast, a.beta_slow,
            a.original_context, {}};
  if (a.freq_factors != nullptr) k.freq_factors.assign(a.freq_factors, a.freq_factors + a.num_rotated / 2);
  return k;
}

// A thread's pair frequencies for one key, and its cos/sin rows for the positions it met last,
// direct-mapped by position (kSlots rows). A decode step calls rope twice a layer (queries,
// keys) at one position, and a prompt's chunk twice a layer at the same positions: each row is
// computed once a step or a chunk instead of twice a layer (one row's 64 pow, cos and sin of a
// head of 128 took ~0.2 ms of a 35 ms token on the default model while the other thread
// waited; in a prompt the double-precision sincos took 3.4% of a Q4_0 pp512, 28 layers).
struct RopeTables {
  static constexpr int64_t kSlots = 512;  // a 512-token chunk's positions
  bool has_key = false;
  RopeKey key;
  double mscale = 1.0;
  std::vector<double> freq;
  std::vector<int64_t> tags;              // the position of each slot's row; -1: none
  std::vector<float> cos_rows, sin_rows;  // kSlots x pairs
  uint64_t last_use = 0;

  void prepare(const RopeArgs& a) {
    if (has_key && key_matches(key, a)) return;
    const int64_t num_pairs = a.num_rotated / 2;
    const YarnMix mix = yarn_mix(a);
    mscale = mix.mscale;
    freq.resize(static_cast<size_t>(num_pairs));
    for (int64_t i = 0; i < num_pairs; ++i) freq[static_cast<size_t>(i)] = pair_frequency(a, mix, i);
    key = key_of(a);
    has_key = true;
    tags.assign(kSlots, -1);
    cos_rows.resize(static_cast<size_t>(kSlots * num_pairs));
    sin_rows.resize(cos_rows.size());
  }
  struct Row {
    const float* cos;
    const float* sin;
  };
  Row at(int64_t p) {
    const auto slot = static_cast<size_t>(p & (kSlots - 1));
    float* c = cos_rows.data() + slot * freq.size();
    float* s = sin_rows.data() + slot * freq.size();
    if (tags[slot] != p) {
      for (size_t i = 0; i < freq.size(); ++i) {
        const double theta = static_cast<double>(p) * freq[i];
        c[i] = static_cast<float>(std::cos(theta) * mscale);
        s[i] = static_cast<float>(std::sin(theta) * mscale);
      }
      tags[slot] = p;
    }
    return {c, s};
  }
};

// Two keys a thread (models whose layers alternate rope settings, local and global attention):
// the least recently used is replaced.
RopeTables& tables_for(const RopeArgs& a) {
  thread_local RopeTables tables[2];
  thread_local uint64_t clock = 0;
  RopeTables* pick = nullptr;
  for (RopeTables& t : tables) {
    if (t.has_key && key_matches(t.key, a)) pick = &t;
  }
  if (pick == nullptr) pick = tables[0].last_use <= tables[1].last_use ? &tables[0] : &tables[1];
  pick->prepare(a);
  pick->last_use = ++clock;
  return *pick;
}

// One head's rotation by a position's row (c: cos, s: sin, pairs of them).
void rotate_head(float* x, RopeLayout layout, int64_t pairs, const float* __restrict c, const float* __restrict s) {
  if (layout == RopeLayout::NeoX) {
    float* __restrict x0 = x;
    float* __restrict x1 = x + pairs;
    for (int64_t i = 0; i < pairs; ++i) {
      const float a = x0[i], b = x1[i];
      x0[i] = a * c[i] - b * s[i];
      x1[i] = a * s[i] + b * c[i];
    }
    return;
  }
  for (int64_t i = 0; i < pairs; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c[i] - b * s[i];
    x[2 * i + 1] = a * s[i] + b * c[i];
  }
}

}  // namespace

bool rope(const RopeArgs& a) {
  if (!valid(a)) return false;
  const int64_t num_pairs = a.num_rotated / 2;
  // Angles in double: at position 4000 a float angle is already off by ~1e-4 radians.
  // A prompt's tokens on all threads (their angles are most of the work); each token is
  // rotated the same whoever takes it.
  const int64_t work = a.num_tokens * a.num_heads * a.num_rotated;
  const int num_threads =
      a.num_tokens > 1 && work >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;
  detail::parallel_for_static(num_threads, a.num_tokens, [&](int64_t t) {
    const RopeTables::Row row = tables_for(a).at(a.positions[t]);
    for (int64_t h = 0; h < a.num_heads; ++h) {
      rotate_head(a.data + (t * a.num_heads + h) * a.head_dim, a.layout, num_pairs, row.cos, row.sin);
    }
  });
  return true;
}

bool rope_ref(const RopeArgs& a) {
  if (!valid(a)) return false;
  const int64_t num_pairs = a.num_rotated / 2;
  const YarnMix mix = yarn_mix(a);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    for (int64_t h = 0; h < a.num_heads; ++h) {
      float* x = a.data + (t * a.num_heads + h) * a.head_dim;
      for (int64_t i = 0; i < num_pairs; ++i) {
        const double theta = static_cast<double>(a.positions[t]) * pair_frequency(a, mix, i);
        const double c = std::cos(theta) * mix.mscale, s = std::sin(theta) * mix.mscale;
        int64_t i0, i1;
        pair_indices(a.layout, i, a.num_rotated, &i0, &i1);
        const double x0 = x[i0], x1 = x[i1];
        x[i0] = static_cast<float>(x0 * c - x1 * s);
        x[i1] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
  return true;
}

OpCost rope_cost(const RopeArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double rotated =
      static_cast<double>(a.num_tokens) * static_cast<double>(a.num_heads) * static_cast<double>(a.num_rotated);
  cost.flops = 3.0 * rotated;  // per element: two multiplies and an add
  cost.bytes =
      8.0 * static_cast<double>(a.num_tokens) * static_cast<double>(a.num_heads) * static_cast<double>(a.head_dim);
  return cost;
}

}  // namespace iwb
