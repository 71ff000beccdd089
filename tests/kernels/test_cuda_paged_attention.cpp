// GPU paged attention against paged_attention_ref: decode batches (split keys), prefill chunks
// and mixed batches over F16 and Q8_0 caches, head sizes 64/80/128/256, GQA groups 1/2/4/8,
// block sizes 16 and 32, sequences of 1..1000 positions in scattered blocks, sliding windows and
// soft-capping, on the f32 and the tensor-core kernels; and a CUDA graph captured once and
// replayed after the sequences grew. Skips without a CUDA device.
#include "cuda_test_support.h"
#include "paged_attention_batch.h"
#include "random_tensors.h"

#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::Batch;
using iwb::test::DeviceBuffer;
using iwb::test::SequenceSpec;

namespace {

// The batch's arrays on the device and arguments pointing at them.
struct DeviceBatch {
  DeviceBuffer<float> q, output;
  DeviceBuffer<uint16_t> k_cache, v_cache;
  DeviceBuffer<int32_t> block_tables, lengths, token_sequences, positions;
  DeviceBuffer<unsigned char> workspace;
  PagedAttentionCudaArgs args;

  DeviceBatch(const Batch& b, int64_t window, float softcap)
      : q(b.q),
        output(b.q.size()),
        k_cache(b.k_cache),
        v_cache(b.v_cache),
        block_tables(b.block_tables),
        lengths(b.lengths),
        token_sequences(b.token_sequences),
        positions(b.positions),
        workspace(plan_paged_attention({b.num_tokens(), b.num_sequences(), b.num_heads, b.num_kv_heads, b.head_dim,
                                        b.max_blocks * b.block_size})
                      .workspace_bytes) {
    const PagedAttentionArgs c = iwb::test::cpu_args(b, window, softcap, nullptr);
    args.q = q.get();
    args.k_cache = k_cache.get();
    args.v_cache = v_cache.get();
    args.num_blocks = c.num_blocks;
    args.block_size = c.block_size;
    args.block_tables = block_tables.get();
    args.max_blocks_per_sequence = c.max_blocks_per_sequence;
    args.sequence_lengths = lengths.get();
    args.num_sequences = c.num_sequences;
    args.token_sequences = token_sequences.get();
    args.positions = positions.get();
    args.num_tokens = c.num_tokens;
    args.num_heads = c.num_heads;
    args.num_kv_heads = c.num_kv_heads;
    args.head_dim = args.head_dim_v = c.head_dim;
    args.scale = c.scale;
    args.sliding_window = window;
    args.softcap = softcap;
    args.output = output.get();
    args.k_type = c.k_type;
    args.v_type = c.v_type;
    args.is_rotated = c.is_rotated;  // random blocks: nothing rotated
    args.workspace = workspace.get();
    args.workspace_bytes = workspace.size();
  }
};

}  // namespace

class TestCudaPagedAttention : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString reason = iwb::test::cuda_unavailable_reason();
    if (!reason.isEmpty()) QSKIP(qPrintable(QStringLiteral("CUDA paged attention not tested: %1").arg(reason)));
  }

  void matches_reference_data() {
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("block_size");
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap");
    QTest::addColumn<bool>("is_prefill");
    QTest::addColumn<bool>("is_q8");
    QTest::newRow("decode d128 g4 bs16") << 16 << 4 << 128 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("decode d64 g1 bs32 window softcap") << 4 << 4 << 64 << 32 << 64 << 50.0f << false << false;
    QTest::newRow("decode d80 g8 bs16") << 16 << 2 << 80 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("decode d256 g2 bs32 window") << 4 << 2 << 256 << 32 << 300 << 0.0f << false << false;
    QTest::newRow("mixed d128 g4 bs16") << 8 << 2 << 128 << 16 << 0 << 0.0f << true << false;
    QTest::newRow("mixed d64 g8 bs32 window softcap") << 8 << 1 << 64 << 32 << 100 << 30.0f << true << false;
    QTest::newRow("mixed d80 g1 bs16") << 4 << 4 << 80 << 16 << 0 << 0.0f << true << false;
    QTest::newRow("mixed d256 g2 bs16 softcap") << 4 << 2 << 256 << 16 << 0 << 50.0f << true << false;
    QTest::newRow("decode d128 g4 bs16 q8") << 16 << 4 << 128 << 16 << 0 << 0.0f << false << true;
    QTest::newRow("mixed d64 g8 bs32 window softcap q8") << 8 << 1 << 64 << 32 << 100 << 30.0f << true << true;
    QTest::newRow("prefill unsplit d64 g1 bs16") << 128 << 128 << 64 << 16 << 0 << 0.0f << true << false;
    // gpt-oss's attention sinks: the split combine, both tensor-core kernels, the f32 kernel.
    QTest::newRow("decode d64 g8 bs16 window sinks") << 64 << 8 << 64 << 16 << 128 << 0.0f << false << false;
    QTest::newRow("mixed d64 g8 bs16 window sinks") << 64 << 8 << 64 << 16 << 128 << 0.0f << true << false;
    QTest::newRow("mixed d128 g4 bs16 sinks") << 8 << 2 << 128 << 16 << 0 << 0.0f << true << false;
  }

  void matches_reference() {
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, block_size);
    QFETCH(int, window);
    QFETCH(float, softcap);
    QFETCH(bool, is_prefill);
    QFETCH(bool, is_q8);
    std::vector<SequenceSpec> specs;
    if (!is_prefill) {
      for (int32_t len : {1, 15, 16, 17, 300, 1000}) specs.push_back({len, 1});
    } else if (heads == 128) {
      specs = {{300, 300}, {17, 17}};  // many heads: enough blocks without splitting the keys
    } else {
      // A whole prompt, a chunk continuing a prompt, a chunk of 64 late in a long one, decodes.
      specs = {{300, 300}, {17, 7}, {1000, 64}, {1000, 1}, {16, 1}, {1, 1}};
    }
    std::mt19937 rng(static_cast<uint32_t>(heads * 1000 + head_dim * 10 + block_size + window));
    const Batch b = iwb::test::make_batch(specs, heads, kv_heads, head_dim, block_size, 1024, rng,
                                          is_q8 ? GgmlType::Q8_0 : GgmlType::F16);
    std::vector<float> expected(b.q.size());
    const std::vector<float> sinks =
        QByteArray(QTest::currentDataTag()).endsWith("sinks") ? iwb::test::test_sinks(heads) : std::vector<float>{};
    PagedAttentionArgs reference = iwb::test::cpu_args(b, window, softcap, expected.data());
    reference.sinks = sinks.empty() ? nullptr : sinks.data();
    QVERIFY(paged_attention_ref(reference));

    DeviceBatch d(b, window, softcap);
    DeviceBuffer<float> d_sinks(sinks);
    if (!sinks.empty()) d.args.sinks = d_sinks.get();
    QCOMPARE(d.workspace.error(), cudaSuccess);
    QCOMPARE(d.workspace.size(), paged_attention_cuda_workspace_bytes(d.args));
    const AttentionLaunchPlan plan = paged_attention_cuda_plan(d.args);
    qInfo("%lld tokens: %lld tiles max of %lld tokens, %lld splits of %lld keys",
          static_cast<long long>(b.num_tokens()), static_cast<long long>(plan.max_tiles),
          static_cast<long long>(plan.tile_tokens), static_cast<long long>(plan.num_splits),
          static_cast<long long>(plan.split_size));
    if (heads == 128) QCOMPARE(plan.num_splits, int64_t{1});
    if (!is_prefill) QVERIFY(plan.num_splits > 1);
    // Batches with prefill chunks run on tensor cores (Q and weights rounded to f16, hence the
    // looser bound, as for Q8_0 values expanded to f16) unless told not to; decode batches
    // always take the f32 kernel.
    for (const bool allow_tensor_cores : {true, false}) {
      d.args.allow_tensor_cores = allow_tensor_cores;
      CUDA_VERIFY(d.output.poison());
      CUDA_VERIFY(paged_attention_cuda(d.args, nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      const float tolerance = (allow_tensor_cores && is_prefill) || is_q8 ? 3e-3f : 1e-3f;
      COMPARE_FLOATS(allow_tensor_cores ? "paged attention (tensor cores allowed)" : "paged attention (f32)",
                     d.output.download(), expected, tolerance, tolerance);
    }
  }

  // A decode step captured once, replayed after every sequence grew by a token: the graph reads
  // lengths and positions from device memory and its grid depends only on fixed sizes.
  void graph_replay_follows_device_data() {
    std::mt19937 rng(77);
    std::vector<SequenceSpec> specs = {{5, 1}, {250, 1}, {700, 1}};
    Batch b = iwb::test::make_batch(specs, 8, 2, 128, 16, 1024, rng);
    DeviceBatch d(b, 0, 0.0f);
    cudaStream_t stream = nullptr;
    CUDA_VERIFY(cudaStreamCreate(&stream));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_VERIFY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const cudaError_t launched = paged_attention_cuda(d.args, stream);
    CUDA_VERIFY(cudaStreamEndCapture(stream, &graph));
    CUDA_VERIFY(launched);
    CUDA_VERIFY(cudaGraphInstantiate(&exec, graph, 0));
    for (int step = 0; step < 3; ++step) {
      // Grow each sequence by `step` positions inside its existing blocks (the tables have room).
      Batch grown = b;
      for (size_t s = 0; s < specs.size(); ++s) {
        const int32_t len = b.lengths[s] + step;
        const int64_t blocks = (len + b.block_size - 1) / b.block_size;
        if (blocks > (b.lengths[s] + b.block_size - 1) / b.block_size) continue;  // would need a new block
        grown.lengths[s] = len;
        grown.positions[s] = len - 1;
      }
      CUDA_VERIFY(d.lengths.upload(grown.lengths));
      CUDA_VERIFY(d.positions.upload(grown.positions));
      CUDA_VERIFY(d.output.poison());
      CUDA_VERIFY(cudaGraphLaunch(exec, stream));
      CUDA_VERIFY(cudaStreamSynchronize(stream));
      std::vector<float> expected(b.q.size());
      QVERIFY(paged_attention_ref(iwb::test::cpu_args(grown, 0, 0.0f, expected.data())));
      COMPARE_FLOATS("graph replay", d.output.download(), expected, 1e-3f, 1e-3f);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }

  void refuses_what_it_cannot_do() {
    std::mt19937 rng(3);
    const Batch b = iwb::test::make_batch({{20, 1}}, 4, 2, 64, 16, 64, rng);
    DeviceBatch d(b, 0, 0.0f);
    PagedAttentionCudaArgs a = d.args;
    a.k_type = GgmlType::Q6_K;  // no KV cache type
    QCOMPARE(paged_attention_cuda(a, nullptr), cudaErrorInvalidValue);
    a.k_type = a.v_type = GgmlType::Q8_0;
    a.head_dim = a.head_dim_v = 80;  // Q8_0 rows need multiples of 32
    QCOMPARE(paged_attention_cuda(a, nullptr), cudaErrorInvalidValue);
    a = d.args;
    a.workspace_bytes -= 1;
    QCOMPARE(paged_attention_cuda(a, nullptr), cudaErrorInvalidValue);
    a = d.args;
    a.head_dim = a.head_dim_v = 60;  // not a multiple of 8
    QCOMPARE(paged_attention_cuda(a, nullptr), cudaErrorInvalidValue);
    a = d.args;
    a.num_kv_heads = 3;
    QCOMPARE(paged_attention_cuda(a, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }
};

QTEST_APPLESS_MAIN(TestCudaPagedAttention)
#include "test_cuda_paged_attention.moc"
