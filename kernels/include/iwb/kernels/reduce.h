// Reductions over one long f32 row, for sampling and log-probabilities over a vocabulary (150k
// logits a decoded token): the first largest value's index, a sum of exponentials, and the next
// value at or above a bar (the scan of a top-k selection). Each has
// a vector body chosen at run time (AVX2) and a plain reference twin. The standard library's
// std::max_element took 0.5 ms a token at -O2 (1.4% of a 1.5B model's decode on a Xeon), the
// double-precision std::exp sum of token_logprobs 0.9 ms.
#pragma once

#include <cstdint>

namespace iwb {

// The index of the first of the largest values of x[0, n); NaNs are passed over (all NaN: 0).
// -1 when n <= 0.
int64_t argmax_f32(const float* x, int64_t n);
int64_t argmax_f32_ref(const float* x, int64_t n);

// sum of exp(x[i] - shift) over i < n, for shift >= every x[i] (the row's maximum): each term
// in f32 (relative error near 1e-7, terms below exp(-87) count as 1.6e-38), the sum in double.
// -inf terms add nothing (in the reference exactly 0).
double sum_exp_f32(const float* x, int64_t n, float shift);
double sum_exp_f32_ref(const float* x, int64_t n, float shift);  // std::exp in double

// The first i in [from, n) with x[i] >= bar (NaN never is), or n.
int64_t find_at_least_f32(const float* x, int64_t from, int64_t n, float bar);
int64_t find_at_least_f32_ref(const float* x, int64_t from, int64_t n, float bar);

}  // namespace iwb
