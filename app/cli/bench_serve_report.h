// `iwb bench-serve`'s human output: vllm bench serve's summary table per point, the server's
// own view from /metrics beneath it, and a one-line-per-point table after a sweep.
#pragma once

#include "iwb/engine/remote/bench_serve.h"

#include <cstdio>

namespace iwb::cli {

void print_bench_serve_point(std::FILE* out, const remote::BenchServeResult& result, size_t point_index);
void print_bench_serve_sweep(std::FILE* out, const remote::BenchServeResult& result);

}  // namespace iwb::cli
