// Host-side argument checks of the GPU forward-pass kernels (norm, RoPE, activations, embedding,
// element-wise, KV cache, paged attention, sampling). They never touch a device, so this runs on
// any machine: fake, suitably aligned addresses stand in for device pointers.
#include "iwb/kernels/cuda/activations_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/norm_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/cuda/rope_cuda.h"
#include "iwb/kernels/cuda/sampling_cuda.h"

#include <QTest>

#include <cstdint>

using namespace iwb;

namespace {

// A 256-byte aligned address and offsets from it; never dereferenced.
template <typename T>
T* fake(uintptr_t offset_bytes = 0) {
  return reinterpret_cast<T*>(uintptr_t{0x10000000} + offset_bytes);
}

PagedAttentionCudaArgs attention_args() {
  PagedAttentionCudaArgs a;
  a.q = fake<const float>();
  a.k_cache = fake<const uint16_t>();
  a.v_cache = fake<const uint16_t>();
  a.num_blocks = 100;
  a.block_size = 16;
  a.block_tables = fake<const int32_t>();
  a.max_blocks_per_sequence = 64;
  a.sequence_lengths = fake<const int32_t>();
  a.num_sequences = 3;
  a.token_sequences = fake<const int32_t>();
  a.positions = fake<const int32_t>();
  a.num_tokens = 40;
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_dim = a.head_dim_v = 128;
  a.output = fake<float>();
  a.workspace = fake<void>();
  a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
  return a;
}

}  // namespace

class TestCudaOpsArgs : public QObject {
  Q_OBJECT

 private slots:
  void norm_rope_activation_checks() {
    QCOMPARE(rmsnorm_cuda_check({fake<const float>(), nullptr, fake<float>(), 7, 896, 1e-6f}), cudaSuccess);
    QCOMPARE(rmsnorm_cuda_check({fake<const float>(), nullptr, fake<float>(), 0, 896, 1e-6f}), cudaSuccess);
    QCOMPARE(rmsnorm_cuda_check({nullptr, nullptr, fake<float>(), 7, 896, 1e-6f}), cudaErrorInvalidValue);
    QCOMPARE(rmsnorm_cuda_check({fake<const float>(), nullptr, fake<float>(), 7, 0, 1e-6f}), cudaErrorInvalidValue);
    QCOMPARE(rmsnorm_cuda_check({fake<const float>(2), nullptr, fake<float>(), 7, 896, 1e-6f}), cudaErrorInvalidValue);

    RopeCudaArgs rope;
    rope.q = fake<float>();
    rope.num_heads = 12;
    rope.num_tokens = 5;
    rope.head_dim = 128;
    rope.num_rotated = 128;
    rope.positions = fake<const int32_t>();
    QCOMPARE(rope_cuda_check(rope), cudaSuccess);
    rope.k = fake<float>();
    QCOMPARE(rope_cuda_check(rope), cudaErrorInvalidValue);  // keys without a head count
    rope.num_kv_heads = 2;
    QCOMPARE(rope_cuda_check(rope), cudaSuccess);
    rope.num_rotated = 130;
    QCOMPARE(rope_cuda_check(rope), cudaErrorInvalidValue);  // more than the head
    rope.num_rotated = 64;
    rope.freq_base = 0.0f;
    QCOMPARE(rope_cuda_check(rope), cudaErrorInvalidValue);

    GatedActivationCudaArgs act;
    act.gate = fake<const float>();
    act.up = fake<const float>(4 * 100);
    act.output = fake<float>();
    act.num_rows = 3;
    act.row_length = 100;
    act.gate_stride = act.up_stride = 200;
    QCOMPARE(gated_activation_cuda_check(act), cudaSuccess);
    act.up_stride = 99;  // shorter than a row
    QCOMPARE(gated_activation_cuda_check(act), cudaErrorInvalidValue);
  }

  void embedding_and_elementwise_checks() {
    EmbeddingCudaArgs e{GgmlType::Q4_K, fake<const void>(), 1000, 512, fake<const int32_t>(), 3, 1.0f, fake<float>(), nullptr};
    QCOMPARE(embedding_cuda_check(e), cudaSuccess);
    e.dim = 500;  // not whole Q4_K blocks
    QCOMPARE(embedding_cuda_check(e), cudaErrorInvalidValue);
    e.dim = 512;
    e.table_type = GgmlType::Q2_K;
    QVERIFY(!cuda_embedding_supports(GgmlType::Q2_K));
    QCOMPARE(embedding_cuda_check(e), cudaErrorInvalidValue);
    e.table_type = GgmlType::F32;
    e.table = fake<const void>(2);  // f32 rows need 4-byte alignment
    QCOMPARE(embedding_cuda_check(e), cudaErrorInvalidValue);

    // Refusals and empty ranges return before any CUDA call.
    QCOMPARE(add_cuda(fake<float>(), nullptr, 10, nullptr), cudaErrorInvalidValue);
    QCOMPARE(add_cuda(fake<float>(), fake<const float>(), -1, nullptr), cudaErrorInvalidValue);
    QCOMPARE(add_cuda(fake<float>(), fake<const float>(), 0, nullptr), cudaSuccess);
    QCOMPARE(softcap_cuda(fake<float>(), 10, -1.0f, nullptr), cudaErrorInvalidValue);
    QCOMPARE(f32_to_f16_cuda(fake<const float>(), fake<uint16_t>(1), 10, nullptr), cudaErrorInvalidValue);
    QCOMPARE(gather_rows_cuda(fake<const float>(), 10, fake<const int32_t>(), 0, fake<float>(), nullptr), cudaSuccess);
    QCOMPARE(argmax_rows_cuda(fake<const float>(), 2, 0, fake<int32_t>(), nullptr), cudaErrorInvalidValue);
  }

  void kv_cache_checks() {
    WriteKvCudaArgs w{fake<const float>(),
                      fake<const float>(),
                      fake<const int64_t>(),
                      4,
                      fake<uint16_t>(),
                      fake<uint16_t>(),
                      64,
                      256,
                      256,
                      GgmlType::Q8_0,
                      GgmlType::Q4_1,
                      2};
    QCOMPARE(write_kv_paged_cuda_check(w), cudaSuccess);
    w.v_row = 80;  // heads of 40: block types need whole blocks of 32 per head
    QCOMPARE(write_kv_paged_cuda_check(w), cudaErrorInvalidValue);
    w.v_type = GgmlType::F8_E4M3;  // FP8: any even head size
    QCOMPARE(write_kv_paged_cuda_check(w), cudaSuccess);
    w.num_kv_heads = 3;  // 256 keys are not 3 heads
    QCOMPARE(write_kv_paged_cuda_check(w), cudaErrorInvalidValue);
    w.num_kv_heads = 2;
    w.k_type = GgmlType::Q6_K;  // no KV cache type
    QCOMPARE(write_kv_paged_cuda_check(w), cudaErrorInvalidValue);
    w.k_type = w.v_type = GgmlType::F16;
    QCOMPARE(write_kv_paged_cuda_check(w), cudaSuccess);
    w.slot_mapping = fake<const int64_t>(4);  // int64 slots need 8-byte alignment
    QCOMPARE(write_kv_paged_cuda_check(w), cudaErrorInvalidValue);

    CopyKvBlocksCudaArgs c{fake<uint16_t>(), 28, 0, 16 * 256, 100, fake<const int32_t>(), 2};
    QCOMPARE(copy_kv_blocks_cuda_check(c), cudaErrorInvalidValue);  // 28 pools need a stride
    c.pool_stride_units = 100 * 16 * 256;
    QCOMPARE(copy_kv_blocks_cuda_check(c), cudaSuccess);
    c.num_pools = 1;
    c.pool_stride_units = 0;
    QCOMPARE(copy_kv_blocks_cuda_check(c), cudaSuccess);
  }

  void attention_checks() {
    PagedAttentionCudaArgs a = attention_args();
    QCOMPARE(paged_attention_cuda_check(a), cudaSuccess);
    a.k_type = GgmlType::Q8_0;
    a.v_type = GgmlType::Q4_0;
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);  // rotated keys: the rotated queries need room
    QVERIFY(paged_attention_cuda_workspace_bytes(a) >= a.workspace_bytes + 40 * 32 * 128 * sizeof(float));
    a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
    QCOMPARE(paged_attention_cuda_check(a), cudaSuccess);
    a.head_dim = a.head_dim_v = 80;  // block types need multiples of 32
    a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a.k_type = a.v_type = GgmlType::F8_E4M3;  // FP8 takes 80 (a multiple of 16)
    QCOMPARE(paged_attention_cuda_check(a), cudaSuccess);
    a.head_dim = a.head_dim_v = 72;  // an F16 cache takes 72, a quantized side not
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a.k_type = a.v_type = GgmlType::F16;
    a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
    QCOMPARE(paged_attention_cuda_check(a), cudaSuccess);

    a = attention_args();
    a.workspace_bytes -= 1;
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.workspace = fake<void>(128);  // not 256-byte aligned
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.k_cache = fake<const uint16_t>(8);  // 16-byte loads
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.head_dim = a.head_dim_v = 264;  // over 256
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.num_kv_heads = 5;  // does not divide 32
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.num_heads = 128;
    a.num_kv_heads = 1;  // a group of 128 query heads exceeds a block's 64 rows
    QCOMPARE(paged_attention_cuda_check(a), cudaErrorInvalidValue);
    a = attention_args();
    a.num_tokens = 0;  // nothing to do: no workspace needed
    a.workspace = nullptr;
    QCOMPARE(paged_attention_cuda_check(a), cudaSuccess);
    // The workspace depends on fixed sizes only: the same for any lengths or positions.
    a = attention_args();
    const size_t bytes = paged_attention_cuda_workspace_bytes(a);
    a.sequence_lengths = fake<const int32_t>(1024);
    a.positions = fake<const int32_t>(2048);
    QCOMPARE(paged_attention_cuda_workspace_bytes(a), bytes);
  }

  void sampling_checks() {
    SampleCudaArgs s{fake<const float>(), 4, 151936, fake<const SamplingRowParams>(), fake<const float>(), fake<int32_t>()};
    QCOMPARE(sample_rows_cuda_check(s), cudaSuccess);
    s.uniforms = nullptr;
    QCOMPARE(sample_rows_cuda_check(s), cudaErrorInvalidValue);
    s.uniforms = fake<const float>();
    s.vocab_size = 0;
    QCOMPARE(sample_rows_cuda_check(s), cudaErrorInvalidValue);
    QVERIFY(cuda_sampling_matches_cpu({0.0f, 0, 1.0f, 0.0f}));
    QVERIFY(cuda_sampling_matches_cpu({0.7f, kCudaSamplingMaxTopK, 0.9f, 0.0f}));
    QVERIFY(!cuda_sampling_matches_cpu({0.7f, kCudaSamplingMaxTopK + 1, 0.9f, 0.0f}));
    QVERIFY(!cuda_sampling_matches_cpu({0.7f, 0, 0.9f, 0.0f}));
  }
};

QTEST_APPLESS_MAIN(TestCudaOpsArgs)
#include "test_cuda_ops_args.moc"
