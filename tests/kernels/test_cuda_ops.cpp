// The GPU's small forward-pass kernels against their CPU references on random data and odd
// sizes: RMSNorm, RoPE, gated activations, embedding gather (every table type) and the
// element-wise kernels. Skips, saying why, when no CUDA device is usable.
#include "cuda_test_support.h"
#include "random_tensors.h"

#include "iwb/kernels/activations.h"
#include "iwb/kernels/cuda/activations_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/norm_cuda.h"
#include "iwb/kernels/cuda/rope_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"
#include "iwb/kernels/split_blocks.h"

#include <QTest>

#include <cmath>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::DeviceBuffer;

class TestCudaOps : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString reason = iwb::test::cuda_unavailable_reason();
    if (!reason.isEmpty()) QSKIP(qPrintable(QStringLiteral("CUDA kernels not tested: %1").arg(reason)));
  }

  void rmsnorm_matches_reference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("dim");
    QTest::addColumn<bool>("has_weight");
    QTest::addColumn<bool>("in_place");
    QTest::newRow("1x896") << 1 << 896 << true << false;
    QTest::newRow("7x1536 in place") << 7 << 1536 << true << true;
    QTest::newRow("33x4097 no weight") << 33 << 4097 << false << false;
    QTest::newRow("per-head 77x80") << 77 << 80 << true << true;
    QTest::newRow("per-head 300x128") << 300 << 128 << true << false;
    QTest::newRow("5x37") << 5 << 37 << true << false;
  }

  void rmsnorm_matches_reference() {
    QFETCH(int, rows);
    QFETCH(int, dim);
    QFETCH(bool, has_weight);
    QFETCH(bool, in_place);
    std::mt19937 rng(static_cast<uint32_t>(rows * 131 + dim));
    const std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(rows) * dim, rng, 2.0f, 0.3f);
    const std::vector<float> w = iwb::test::random_floats(static_cast<size_t>(dim), rng, 0.5f, 1.0f);
    std::vector<float> expected(x.size());
    QVERIFY(rmsnorm_ref({x.data(), has_weight ? w.data() : nullptr, expected.data(), rows, dim, 1e-5f}));

    DeviceBuffer<float> d_x(x), d_w(w), d_y(x.size());
    CUDA_VERIFY(d_y.poison());
    float* out = in_place ? d_x.get() : d_y.get();
    CUDA_VERIFY(rmsnorm_cuda({d_x.get(), has_weight ? d_w.get() : nullptr, out, rows, dim, 1e-5f}, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    const std::vector<float> got = in_place ? d_x.download() : d_y.download();
    COMPARE_FLOATS("rmsnorm", got, expected, 1e-5f, 1e-5f);

    // The residual add fused in: the same bits as add_cuda then rmsnorm_cuda on the device.
    const std::vector<float> addend = iwb::test::random_floats(x.size(), rng, 1.0f);
    DeviceBuffer<float> d_sep(x), d_fused(x), d_add(addend), d_sep_out(x.size()), d_fused_out(x.size());
    const float* weight = has_weight ? d_w.get() : nullptr;
    CUDA_VERIFY(add_cuda(d_sep.get(), d_add.get(), static_cast<int64_t>(rows) * dim, nullptr));
    CUDA_VERIFY(rmsnorm_cuda({d_sep.get(), weight, d_sep_out.get(), rows, dim, 1e-5f}, nullptr));
    CUDA_VERIFY(add_rmsnorm_cuda(d_fused.get(), d_add.get(),
                                 {d_fused.get(), weight, d_fused_out.get(), rows, dim, 1e-5f}, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    QVERIFY(d_fused.download() == d_sep.download());
    QVERIFY(d_fused_out.download() == d_sep_out.download());
  }

  // The norm's and the activation's int8 outputs (what the engine's next products read instead
  // of quantizing): the same f32 bits as without them, and quantize_x_q8_cuda's bytes of those.
  void int8_outputs_match_quantize() {
    std::mt19937 rng(23);
    for (const int64_t width : {int64_t{320}, int64_t{4096}}) {
      const int64_t rows = 3, n = rows * width;
      const std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(n), rng, 2.0f);
      const std::vector<float> addend = iwb::test::random_floats(x.size(), rng, 1.0f);
      const std::vector<float> w = iwb::test::random_floats(static_cast<size_t>(width), rng, 0.5f, 1.0f);
      DeviceBuffer<float> d_plain(x), d_fused(x), d_add(addend), d_w(w), d_plain_out(x.size()), d_fused_out(x.size());
      DeviceBuffer<int8_t> d_q(x.size()), d_q_ref(x.size());
      DeviceBuffer<float> d_d(x.size() / 32), d_d_ref(x.size() / 32);
      CUDA_VERIFY(add_rmsnorm_cuda(d_plain.get(), d_add.get(),
                                   {d_plain.get(), d_w.get(), d_plain_out.get(), rows, width, 1e-5f}, nullptr));
      CUDA_VERIFY(quantize_x_q8_cuda(d_plain_out.get(), n, d_q_ref.get(), d_d_ref.get(), nullptr));
      CUDA_VERIFY(add_rmsnorm_q8_cuda(d_fused.get(), d_add.get(),
                                      {d_fused.get(), d_w.get(), d_fused_out.get(), rows, width, 1e-5f}, d_q.get(),
                                      d_d.get(), nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      QVERIFY(d_fused_out.download() == d_plain_out.download());
      QVERIFY(d_q.download() == d_q_ref.download());
      QVERIFY(d_d.download() == d_d_ref.download());

      const std::vector<float> up = iwb::test::random_floats(x.size(), rng, 3.0f);
      DeviceBuffer<float> d_gate(x), d_up(up), d_act(x.size()), d_act_q8(x.size());
      GatedActivationCudaArgs a;
      a.gate = d_gate.get();
      a.up = d_up.get();
      a.output = d_act.get();
      a.num_rows = rows;
      a.row_length = width;
      CUDA_VERIFY(gated_activation_cuda(a, nullptr));
      CUDA_VERIFY(quantize_x_q8_cuda(d_act.get(), n, d_q_ref.get(), d_d_ref.get(), nullptr));
      a.output = d_act_q8.get();
      a.q8 = d_q.get();
      a.q8_scale = d_d.get();
      CUDA_VERIFY(gated_activation_cuda(a, nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      QVERIFY(d_act_q8.download() == d_act.download());
      QVERIFY(d_q.download() == d_q_ref.download());
      QVERIFY(d_d.download() == d_d_ref.download());
    }
  }

  void rope_matches_reference_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("num_rotated");
    QTest::addColumn<bool>("is_neox");
    QTest::addColumn<bool>("has_factors");
    QTest::newRow("llama 7 tok, 64") << 7 << 64 << 64 << false << false;
    QTest::newRow("neox 33 tok, 128") << 33 << 128 << 128 << true << false;
    QTest::newRow("llama3 factors 5 tok, 128") << 5 << 128 << 128 << false << true;
    QTest::newRow("neox partial 80/32") << 17 << 80 << 32 << true << false;
    QTest::newRow("normal partial 80/48 factors") << 3 << 80 << 48 << false << true;
  }

  void rope_matches_reference() {
    QFETCH(int, tokens);
    QFETCH(int, head_dim);
    QFETCH(int, num_rotated);
    QFETCH(bool, is_neox);
    QFETCH(bool, has_factors);
    const int heads = 14, kv_heads = 2;
    std::mt19937 rng(static_cast<uint32_t>(tokens * 7 + head_dim));
    std::vector<float> q = iwb::test::random_floats(static_cast<size_t>(tokens) * heads * head_dim, rng);
    std::vector<float> k = iwb::test::random_floats(static_cast<size_t>(tokens) * kv_heads * head_dim, rng);
    std::vector<int32_t> positions(static_cast<size_t>(tokens));
    std::uniform_int_distribution<int32_t> pos_dist(0, 32000);
    for (int32_t& p : positions) p = pos_dist(rng);
    positions[0] = 0;
    std::vector<float> factors(static_cast<size_t>(num_rotated / 2));
    std::uniform_real_distribution<float> factor_dist(1.0f, 8.0f);
    for (float& f : factors) f = factor_dist(rng);
    const RopeLayout layout = is_neox ? RopeLayout::NeoX : RopeLayout::Normal;

    DeviceBuffer<float> d_q(q), d_k(k), d_factors(factors);
    DeviceBuffer<int32_t> d_positions(positions);
    RopeCudaArgs args;
    args.q = d_q.get();
    args.num_heads = heads;
    args.k = d_k.get();
    args.num_kv_heads = kv_heads;
    args.num_tokens = tokens;
    args.head_dim = head_dim;
    args.num_rotated = num_rotated;
    args.positions = d_positions.get();
    args.layout = layout;
    args.freq_base = 500000.0f;
    args.freq_scale = 0.5f;
    args.freq_factors = has_factors ? d_factors.get() : nullptr;
    CUDA_VERIFY(rope_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());

    RopeArgs ref{q.data(),         tokens, heads,     head_dim, num_rotated,
                 positions.data(), layout, 500000.0f, 0.5f,     has_factors ? factors.data() : nullptr};
    QVERIFY(rope_ref(ref));
    ref.data = k.data();
    ref.num_heads = kv_heads;
    QVERIFY(rope_ref(ref));
    COMPARE_FLOATS("rope q", d_q.download(), q, 2e-5f, 2e-5f);
    COMPARE_FLOATS("rope k", d_k.download(), k, 2e-5f, 2e-5f);
  }

  void activations_match_reference_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("swiglu") << static_cast<int>(GatedActivation::SiLU);
    QTest::newRow("geglu") << static_cast<int>(GatedActivation::GeluTanh);
    QTest::newRow("swiglu_oai (gpt-oss)") << static_cast<int>(GatedActivation::SwigluOai);
  }

  void activations_match_reference() {
    QFETCH(int, kind);
    const auto activation = static_cast<GatedActivation>(kind);
    const int rows = 7, length = 4097;
    std::mt19937 rng(static_cast<uint32_t>(kind + 5));
    const std::vector<float> gate = iwb::test::random_floats(static_cast<size_t>(rows) * length, rng, 3.0f);
    const std::vector<float> up = iwb::test::random_floats(gate.size(), rng);
    std::vector<float> expected(gate.size());
    QVERIFY(gated_activation_ref({gate.data(), up.data(), expected.data(), rows * length, activation}));

    // Contiguous, in place over gate.
    DeviceBuffer<float> d_gate(gate), d_up(up);
    GatedActivationCudaArgs args;
    args.gate = d_gate.get();
    args.up = d_up.get();
    args.output = d_gate.get();
    args.num_rows = rows;
    args.row_length = length;
    args.kind = activation;
    CUDA_VERIFY(gated_activation_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    COMPARE_FLOATS("gated activation", d_gate.download(), expected, 1e-5f, 1e-4f);

    // A fused [rows x (gate | up)] product into a separate output.
    std::vector<float> fused(static_cast<size_t>(rows) * 2 * length);
    for (int r = 0; r < rows; ++r) {
      std::copy_n(gate.begin() + r * length, length, fused.begin() + r * 2 * length);
      std::copy_n(up.begin() + r * length, length, fused.begin() + r * 2 * length + length);
    }
    DeviceBuffer<float> d_fused(fused), d_out(gate.size());
    CUDA_VERIFY(d_out.poison());
    args.gate = d_fused.get();
    args.up = d_fused.get() + length;
    args.output = d_out.get();
    args.gate_stride = args.up_stride = 2 * length;
    args.output_stride = 0;
    CUDA_VERIFY(gated_activation_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    COMPARE_FLOATS("strided gated activation", d_out.download(), expected, 1e-5f, 1e-4f);
  }

  void embedding_matches_reference_data() {
    QTest::addColumn<int>("type_id");
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                          GgmlType::Q6_K}) {
      QTest::newRow(std::string(ggml_type_name(type)).c_str()) << static_cast<int>(type);
    }
  }

  void embedding_matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    QVERIFY(cuda_embedding_supports(type));
    const int64_t block = ggml_type_traits(type).block_size;
    const int64_t dim = block == 1 ? 77 : 3 * block, vocab = 37;
    std::mt19937 rng(static_cast<uint32_t>(type_id * 17 + 3));
    const std::vector<uint8_t> table = iwb::test::random_tensor_bytes(type, vocab, dim, rng, 0.7f);
    const std::vector<int32_t> tokens = {0, 36, 5, 5, 17, 1, 36, 22, 9};
    const auto num_tokens = static_cast<int64_t>(tokens.size());
    for (const float scale : {1.0f, std::sqrt(static_cast<float>(dim))}) {
      std::vector<float> expected(static_cast<size_t>(num_tokens * dim));
      QVERIFY(
          embedding_lookup_ref({type, table.data(), vocab, dim, tokens.data(), num_tokens, scale, expected.data()}));
      DeviceBuffer<uint8_t> d_table(table);
      DeviceBuffer<int32_t> d_tokens(tokens), d_flag(std::vector<int32_t>{0});
      DeviceBuffer<float> d_out(expected.size());
      CUDA_VERIFY(d_out.poison());
      EmbeddingCudaArgs args{type,       d_table.get(), vocab,       dim,         d_tokens.get(),
                             num_tokens, scale,         d_out.get(), d_flag.get()};
      CUDA_VERIFY(embedding_cuda(args, nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      // A fused multiply-add on the GPU may round d * sc * q - dmin * m differently where the
      // terms cancel: an absolute floor proportional to the scale.
      COMPARE_FLOATS("embedding", d_out.download(), expected, 1e-5f * scale, 1e-5f);
      QCOMPARE(d_flag.download().front(), 0);
      if (has_split_blocks(type)) {  // the same rows from the split layout the engine uploads
        std::vector<uint8_t> split(table.size());
        QVERIFY(repack_split_blocks(type, table.data(), vocab, dim, split.data()));
        DeviceBuffer<uint8_t> d_split(split);
        CUDA_VERIFY(d_out.poison());
        args.table = d_split.get();
        args.is_split = true;
        CUDA_VERIFY(embedding_cuda(args, nullptr));
        CUDA_VERIFY(cudaDeviceSynchronize());
        COMPARE_FLOATS("embedding (split layout)", d_out.download(), expected, 1e-5f * scale, 1e-5f);
      }
    }
  }

  void embedding_flags_bad_tokens() {
    const int64_t dim = 64, vocab = 10;
    std::mt19937 rng(11);
    const std::vector<float> table = iwb::test::random_floats(static_cast<size_t>(vocab * dim), rng);
    DeviceBuffer<float> d_table(table), d_out(static_cast<size_t>(3 * dim));
    DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>{3, 10, -1}), d_flag(std::vector<int32_t>{0});
    EmbeddingCudaArgs args{GgmlType::F32, d_table.get(), vocab,       dim, d_tokens.get(), 3,
                           1.0f,          d_out.get(),   d_flag.get()};
    CUDA_VERIFY(embedding_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    QCOMPARE(d_flag.download().front(), 1);
    const std::vector<float> out = d_out.download();
    for (int64_t i = 0; i < dim; ++i) QCOMPARE(out[static_cast<size_t>(i)], table[static_cast<size_t>(3 * dim + i)]);
    for (int64_t i = dim; i < 3 * dim; ++i) QCOMPARE(out[static_cast<size_t>(i)], 0.0f);
    args.table_type = GgmlType::Q5_K;  // not supported: refused before any launch
    QCOMPARE(embedding_cuda(args, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }

  void elementwise_kernels_match_cpu() {
    std::mt19937 rng(5);
    const int64_t rows = 9, length = 1001, n = rows * length;
    const std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(n), rng, 10.0f);
    const std::vector<float> y = iwb::test::random_floats(static_cast<size_t>(n), rng);
    const std::vector<float> bias = iwb::test::random_floats(static_cast<size_t>(length), rng);

    DeviceBuffer<float> d_x(x), d_y(y), d_bias(bias);
    CUDA_VERIFY(add_cuda(d_x.get(), d_y.get(), n, nullptr));
    CUDA_VERIFY(add_bias_rows_cuda(d_x.get(), d_bias.get(), rows, length, nullptr));
    std::vector<float> expected(x);
    for (int64_t i = 0; i < n; ++i)
      expected[static_cast<size_t>(i)] = (x[i] + y[i]) + bias[static_cast<size_t>(i % length)];
    COMPARE_FLOATS("add + bias", d_x.download(), expected, 0.0f, 0.0f);

    // Gather rows 8, 0, 3 of the sum.
    const std::vector<int32_t> rows_wanted = {8, 0, 3};
    DeviceBuffer<int32_t> d_rows(rows_wanted);
    DeviceBuffer<float> d_gathered(rows_wanted.size() * length);
    CUDA_VERIFY(gather_rows_cuda(d_x.get(), length, d_rows.get(), 3, d_gathered.get(), nullptr));
    std::vector<float> gathered_expected;
    for (int32_t r : rows_wanted) {
      gathered_expected.insert(gathered_expected.end(), expected.begin() + r * length,
                               expected.begin() + (r + 1) * length);
    }
    COMPARE_FLOATS("gather rows", d_gathered.download(), gathered_expected, 0.0f, 0.0f);

    // Soft-capping.
    CUDA_VERIFY(softcap_cuda(d_x.get(), n, 30.0f, nullptr));
    for (float& v : expected) v = 30.0f * std::tanh(v / 30.0f);
    COMPARE_FLOATS("softcap", d_x.download(), expected, 1e-5f, 1e-5f);
  }

  void half_conversions_match_cpu() {
    // Every f16 bit pattern to f32, and f32 values of every magnitude (denormal halves,
    // overflow to inf, ties) to f16: bit-exact with the CPU's conversions (NaN: any NaN).
    std::vector<uint16_t> halves(65536);
    for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
    DeviceBuffer<uint16_t> d_halves(halves);
    DeviceBuffer<float> d_floats(halves.size());
    CUDA_VERIFY(f16_to_f32_cuda(d_halves.get(), d_floats.get(), static_cast<int64_t>(halves.size()), nullptr));
    const std::vector<float> floats = d_floats.download();
    for (size_t i = 0; i < halves.size(); ++i) {
      const float expected = fp16_to_f32(halves[i]);
      if (std::isnan(expected)) {
        QVERIFY2(std::isnan(floats[i]), qPrintable(QString::number(i)));
      } else {
        QVERIFY2(floats[i] == expected && std::signbit(floats[i]) == std::signbit(expected),
                 qPrintable(QString::number(i)));
      }
    }
    std::mt19937 rng(9);
    std::vector<float> values = iwb::test::random_floats(100000, rng, 1.0f);
    std::uniform_int_distribution<int> exponent(-30, 17);
    for (float& v : values) v = std::ldexp(v, exponent(rng));
    for (float special : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, 5.96046448e-8f, 2.98e-8f, 1e-10f,
                          INFINITY, -INFINITY}) {
      values.push_back(special);
    }
    DeviceBuffer<float> d_values(values);
    DeviceBuffer<uint16_t> d_half(values.size());
    CUDA_VERIFY(f32_to_f16_cuda(d_values.get(), d_half.get(), static_cast<int64_t>(values.size()), nullptr));
    const std::vector<uint16_t> got = d_half.download();
    for (size_t i = 0; i < values.size(); ++i) {
      QVERIFY2(got[i] == f32_to_fp16(values[i]), qPrintable(QStringLiteral("%1 -> GPU %2, CPU %3")
                                                                .arg(values[i], 0, 'g', 9)
                                                                .arg(got[i])
                                                                .arg(f32_to_fp16(values[i]))));
    }
  }

  void refusals_launch_nothing() {
    DeviceBuffer<float> d(64);
    QCOMPARE(rmsnorm_cuda({d.get(), nullptr, d.get(), 1, 0, 1e-6f}, nullptr), cudaErrorInvalidValue);
    RopeCudaArgs rope;
    rope.q = d.get();
    rope.num_heads = 1;
    rope.num_tokens = 1;
    rope.head_dim = 8;
    rope.num_rotated = 3;  // odd
    rope.positions = reinterpret_cast<const int32_t*>(d.get());
    QCOMPARE(rope_cuda(rope, nullptr), cudaErrorInvalidValue);
    QCOMPARE(add_cuda(d.get(), nullptr, 4, nullptr), cudaErrorInvalidValue);
    QCOMPARE(softcap_cuda(d.get(), 4, 0.0f, nullptr), cudaErrorInvalidValue);
    QCOMPARE(add_cuda(d.get(), d.get(), 0, nullptr), cudaSuccess);  // empty: nothing to do
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }
};

QTEST_APPLESS_MAIN(TestCudaOps)
#include "test_cuda_ops.moc"
