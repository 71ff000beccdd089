// Microbenchmark of matmul's integer paths (and F16's float path) for 1..16 tokens (decode of
// several sequences) on the default model's shapes, in CPU time of the calling thread (one thread, so other processes'
// load on a shared machine drops out). A plain program, not a test: it prints figures.
//
//   bench_matmul_tokens [--types Q4_K,Q6_K] [--shapes 1536x8960,...] [--tokens 1,2,4,8,16]
//                       [--seconds 0.3] [--threads 1] [--copies 1]
// With --threads above 1 the times are wall-clock (the machine should then be quiet). With
// --copies N the calls take N copies of the weights in turn: a working set past the last-level
// cache is read from memory, as a model's layers are in decode (one copy of 1536x8960 stays in
// a 32 MiB L3 and measures the cache).
// A shape is in_features x out_features (rows), in_features a multiple of 32 (of 256 for the
// K types; gpt-oss's 2880 fits only the 32-blocks types, which the others skip). Per shape and
// token count it prints the median and best time of one call, GOP/s (2 ops per multiply-add)
// and the cost per token against one token's call (when 1 is among the token counts).
#include "huge_page_buffer.h"
#include "random_tensors.h"

#include "iwb/kernels/matmul.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace iwb;

namespace {

struct Shape {
  int64_t in = 0, out = 0;
};

bool is_wall_clock = false;  // --threads > 1

double thread_seconds() {
  timespec ts{};
  clock_gettime(is_wall_clock ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    const size_t end = std::min(s.find(',', begin), s.size());
    if (end > begin) out.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

std::optional<GgmlType> type_named(const std::string& name) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::MXFP4,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16, GgmlType::BF16}) {
    if (name == ggml_type_name(t)) return t;
  }
  return std::nullopt;
}

// Random quant bytes with sane fp16 scales (values do not change the speed of integer code;
// random_tensor_bytes' exact RMS would take seconds on the 233M-weight output matrix).
std::vector<uint8_t> random_weights(GgmlType type, const Shape& s) {
  const size_t bytes = *ggml_row_bytes(type, s.in) * static_cast<size_t>(s.out);
  std::vector<uint8_t> w(bytes);
  uint64_t state = 0x9E3779B97F4A7C15ull ^ bytes;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(w.data() + i, &z, 8);
  }
  if (type == GgmlType::F16 || type == GgmlType::BF16) {  // finite values in [-1/64, 1/64): no NaN or infinity
    for (size_t i = 0; i + 2 <= bytes; i += 2) {
      uint16_t bits;
      std::memcpy(&bits, w.data() + i, 2);
      const float v = (static_cast<float>(bits) / 32768.0f - 1.0f) / 64.0f;
      uint32_t f;
      std::memcpy(&f, &v, 4);
      test::write_u16(&w[i], type == GgmlType::F16 ? f32_to_fp16(v) : static_cast<uint16_t>(f >> 16));
    }
    return w;
  }
  const size_t block_bytes = ggml_type_traits(type).bytes_per_block;
  if (type == GgmlType::MXFP4) {  // exponents near 2^-10, as the others' scales
    for (size_t b = 0; b < bytes / block_bytes; ++b)
      w[b * block_bytes] = static_cast<uint8_t>(118 + w[b * block_bytes] % 4);
    return w;
  }
  const uint16_t scale = f32_to_fp16(1.0f / 1024);
  for (size_t b = 0; b < bytes / block_bytes; ++b) {
    for (size_t off : test::fp16_field_offsets(type)) test::write_u16(&w[b * block_bytes + off], scale);
  }
  return w;
}

struct Timing {
  double median = 0, best = 0;  // seconds per call
};

// Copies of one weight tensor in 2 MiB pages, as the engine's weights are (in 4 KiB pages the
// streamed one-token products lost ~30 us a call to TLB misses the engine does not have).
struct WeightCopies {
  std::vector<test::HugePageBuffer<uint8_t>> buffers;
  size_t bytes = 0;
  const uint8_t* operator[](size_t i) const { return buffers[i].get(); }
  size_t size() const { return buffers.size(); }
};

WeightCopies weight_copies(const std::vector<uint8_t>& weights, int num_copies) {
  WeightCopies copies;
  copies.bytes = weights.size();
  for (int c = 0; c < num_copies; ++c) {
    copies.buffers.push_back(test::huge_page_buffer<uint8_t>(weights.size()));
    std::copy(weights.begin(), weights.end(), copies.buffers.back().get());
  }
  return copies;
}

Timing time_calls(MatmulArgs args, const WeightCopies& copies, double min_seconds) {
  for (size_t c = 0; c < copies.size(); ++c) {  // also the warm-up: buffers grown, weights touched
    args.weight = copies[c];
    if (!matmul(args)) {
      std::fprintf(stderr, "matmul refused the arguments\n");
      std::exit(1);
    }
  }
  std::vector<double> calls;
  double total = 0;
  while (total < min_seconds || calls.size() < 5) {
    args.weight = copies[calls.size() % copies.size()];
    const double t0 = thread_seconds();
    matmul(args);
    const double dt = thread_seconds() - t0;
    calls.push_back(dt);
    total += dt;
  }
  std::sort(calls.begin(), calls.end());
  return {calls[calls.size() / 2], calls.front()};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> type_names = {"Q4_K", "Q6_K", "Q4_0", "Q8_0"};
  std::vector<std::string> shape_names = {"1536x1536", "1536x8960", "8960x1536", "1536x151936"};
  std::vector<std::string> token_names = {"1", "2", "4", "8", "16"};
  double min_seconds = 0.3;
  int num_threads = 1;
  int num_copies = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--types")
      type_names = split(value);
    else if (flag == "--shapes")
      shape_names = split(value);
    else if (flag == "--tokens")
      token_names = split(value);
    else if (flag == "--seconds")
      min_seconds = std::atof(value.c_str());
    else if (flag == "--threads")
      num_threads = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--copies")
      num_copies = std::max(1, std::atoi(value.c_str()));
    else {
      std::fprintf(stderr, "unknown option %s (--types, --shapes, --tokens, --seconds, --threads, --copies)\n",
                   flag.c_str());
      return 2;
    }
  }
  std::vector<int64_t> tokens;
  for (const std::string& t : token_names) tokens.push_back(std::max(1, std::atoi(t.c_str())));
  if (tokens.empty() || type_names.empty() || shape_names.empty()) {
    std::fprintf(stderr, "nothing to measure: give at least one type, shape and token count\n");
    return 2;
  }
  is_wall_clock = num_threads > 1;
  const int64_t max_tokens = *std::max_element(tokens.begin(), tokens.end());
  // Every name checked before the first (slow) measurement.
  std::vector<GgmlType> types;
  for (const std::string& name : type_names) {
    const std::optional<GgmlType> type = type_named(name);
    if (!type) {
      std::fprintf(stderr, "unknown type %s (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q4_K, Q5_K, Q6_K, F16, BF16)\n",
                   name.c_str());
      return 2;
    }
    types.push_back(*type);
  }
  std::vector<Shape> shapes;
  for (const std::string& name : shape_names) {
    Shape s;
    if (std::sscanf(name.c_str(), "%" SCNd64 "x%" SCNd64, &s.in, &s.out) != 2 || s.in <= 0 || s.out <= 0 ||
        s.in % 32 != 0) {
      std::fprintf(stderr, "bad shape %s (in x out, in a multiple of 32)\n", name.c_str());
      return 2;
    }
    shapes.push_back(s);
  }

  std::printf("%-5s %-12s %6s %10s %10s %8s %8s %10s\n", "type", "shape", "tokens", "median_ms", "best_ms", "GOP/s",
              "GB/s", "x1_per_tok");
  for (size_t i = 0; i < types.size(); ++i) {
    for (size_t j = 0; j < shapes.size(); ++j) {
      const Shape& s = shapes[j];
      if (!ggml_row_bytes(types[i], s.in)) {
        std::printf("%-5s %-12s skipped: rows of %" PRId64 " do not fit its blocks\n", type_names[i].c_str(),
                    shape_names[j].c_str(), s.in);
        continue;
      }
      const WeightCopies copies = weight_copies(random_weights(types[i], s), num_copies);
      std::mt19937 rng(5);
      const std::vector<float> x_values = test::random_floats(static_cast<size_t>(max_tokens * s.in), rng, 1.0f, 0.1f);
      // Activations and outputs in 2 MiB pages, as the engine's (huge_page_buffer.h).
      const auto x = test::huge_page_buffer<float>(x_values.size());
      std::copy(x_values.begin(), x_values.end(), x.get());
      const auto y = test::huge_page_buffer<float>(static_cast<size_t>(max_tokens * s.out));
      double one_token = 0;
      for (int64_t t : tokens) {
        MatmulArgs args{types[i], copies[0], s.in, s.out, x.get(), t, nullptr, y.get(), num_threads};
        const Timing timing = time_calls(args, copies, min_seconds);
        if (t == 1) one_token = timing.median;
        const double ops = 2.0 * static_cast<double>(s.in) * static_cast<double>(s.out) * static_cast<double>(t);
        // GB/s: the weights' bytes per median call (their read rate; the activations stay in cache).
        std::printf("%-5s %-12s %6" PRId64 " %10.3f %10.3f %8.1f %8.1f", type_names[i].c_str(), shape_names[j].c_str(),
                    t, 1e3 * timing.median, 1e3 * timing.best, ops / timing.median * 1e-9,
                    static_cast<double>(copies.bytes) / timing.median * 1e-9);
        if (one_token > 0) std::printf(" %10.3f", timing.median / static_cast<double>(t) / one_token);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
