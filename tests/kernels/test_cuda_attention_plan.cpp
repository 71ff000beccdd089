// Launch planning of the GPU paged attention (paged_attention_plan.h), on the CPU: the query
// tile bound holds for any batch layout, key splits cover the context, the workspace layout is
// aligned and disjoint, and nothing depends on sequence lengths (so CUDA graphs stay valid).
#include "iwb/kernels/cuda/paged_attention_plan.h"

#include <QTest>

#include <random>
#include <vector>

using namespace iwb;

namespace {

// The device planner's rule (paged_attention.cu, plan_tiles_kernel): a tile starts at each run
// of one sequence's tokens and every tile_tokens tokens into the run.
int64_t count_tiles(const std::vector<int32_t>& token_sequences, int64_t tile_tokens) {
  int64_t tiles = 0, run_start = 0;
  for (size_t t = 0; t < token_sequences.size(); ++t) {
    if (t == 0 || token_sequences[t] != token_sequences[t - 1]) run_start = static_cast<int64_t>(t);
    if ((static_cast<int64_t>(t) - run_start) % tile_tokens == 0) ++tiles;
  }
  return tiles;
}

}  // namespace

class TestCudaAttentionPlan : public QObject {
  Q_OBJECT

 private slots:
  void tiles_never_exceed_the_bound() {
    std::mt19937 rng(1);
    for (int trial = 0; trial < 2000; ++trial) {
      const int64_t num_sequences = std::uniform_int_distribution<int64_t>(1, 70)(rng);
      std::vector<int32_t> token_sequences;
      for (int32_t s = 0; s < num_sequences; ++s) {
        // Mostly decodes, sometimes chunks of a prompt of any length.
        const int n = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? std::uniform_int_distribution<int>(1, 300)(rng) : 1;
        token_sequences.insert(token_sequences.end(), static_cast<size_t>(n), s);
      }
      const int64_t group = std::vector<int64_t>{1, 2, 4, 6, 8, 16, 64}[static_cast<size_t>(trial % 7)];
      AttentionPlanInputs in{static_cast<int64_t>(token_sequences.size()), num_sequences, group * 4, 4,
                             trial % 3 == 0 ? 256 : 128, 4096};
      const AttentionLaunchPlan plan = plan_paged_attention(in);
      if (group > (in.head_dim_v > 128 ? 32 : 64)) {  // more query heads per KV head than a block holds
        QCOMPARE(plan.workspace_bytes, size_t{0});
        continue;
      }
      QVERIFY(plan.tile_tokens >= 1);
      QCOMPARE(plan.tile_tokens * group <= plan.rows_per_block || plan.tile_tokens == 1, true);
      const int64_t tiles = count_tiles(token_sequences, plan.tile_tokens);
      QVERIFY2(tiles <= plan.max_tiles, qPrintable(QStringLiteral("%1 tiles > bound %2").arg(tiles).arg(plan.max_tiles)));
    }
  }

  void splits_cover_the_context() {
    for (int64_t tokens : {1, 2, 7, 64, 300, 2048}) {
      for (int64_t context : {16, 100, 1024, 8192, 131072}) {
        const int64_t sequences = std::min<int64_t>(tokens, 64);
        const bool is_decode = tokens == sequences;
        const AttentionLaunchPlan plan = plan_paged_attention({tokens, sequences, 32, 8, 128, context});
        QVERIFY(plan.split_size % kAttentionKeyTile == 0);
        QVERIFY(plan.split_size >= (is_decode ? kAttentionMinSplitDecode : kAttentionMinSplit));
        QVERIFY(plan.num_splits * plan.split_size >= context);
        QVERIFY((plan.num_splits - 1) * plan.split_size < context);
        QVERIFY(plan.num_splits <= 65535);  // grid z
        const int64_t target = is_decode ? kAttentionTargetBlocksDecode : kAttentionTargetBlocks;
        if (plan.max_tiles * 8 >= target) QCOMPARE(plan.num_splits, int64_t{1});
      }
    }
    // Decode of one sequence of llama-3-8b shape over an 8k context: split finely, ~2048 blocks.
    const AttentionLaunchPlan decode = plan_paged_attention({1, 1, 32, 8, 128, 8192});
    QCOMPARE(decode.max_tiles, int64_t{1});
    QCOMPARE(decode.split_size, int64_t{32});
    QCOMPARE(decode.num_splits, int64_t{256});
    // A prefill chunk of one sequence keeps the coarser splits.
    const AttentionLaunchPlan chunk = plan_paged_attention({64, 1, 32, 8, 128, 8192});
    QVERIFY(chunk.split_size >= kAttentionMinSplit);
    QVERIFY(chunk.num_splits * chunk.max_tiles * 8 <= 2 * kAttentionTargetBlocks);
  }

  void workspace_is_aligned_and_disjoint() {
    for (int64_t tokens : {1, 5, 64, 333}) {
      const AttentionPlanInputs in{tokens, std::min<int64_t>(tokens, 8), 12, 2, 80, 2048};
      const AttentionLaunchPlan p = plan_paged_attention(in);
      const size_t tiles_end = p.tiles_offset + static_cast<size_t>(p.max_tiles) * sizeof(int32_t);
      QVERIFY(tiles_end <= p.workspace_bytes);
      if (p.num_splits == 1) {
        QCOMPARE(p.workspace_bytes, attention_align_256(tiles_end));
        continue;
      }
      const size_t partials = static_cast<size_t>(tokens * in.num_heads * p.num_splits);
      for (size_t offset : {p.max_offset, p.sum_offset, p.acc_offset}) QCOMPARE(offset % 256, size_t{0});
      QVERIFY(tiles_end <= p.max_offset);
      QVERIFY(p.max_offset + partials * sizeof(float) <= p.sum_offset);
      QVERIFY(p.sum_offset + partials * sizeof(float) <= p.acc_offset);
      QVERIFY(p.acc_offset + partials * static_cast<size_t>(in.head_dim_v) * sizeof(float) <= p.workspace_bytes);
    }
  }

  void rows_follow_the_value_head_size() {
    QCOMPARE(plan_paged_attention({4, 1, 8, 2, 128, 64}).rows_per_block, int64_t{64});
    QCOMPARE(plan_paged_attention({4, 1, 8, 2, 256, 64}).rows_per_block, int64_t{32});
    QCOMPARE(plan_paged_attention({4, 1, 8, 2, 128, 64}).tile_tokens, int64_t{16});
    // Groups larger than a block's rows, and inconsistent sizes, give no plan.
    QCOMPARE(plan_paged_attention({4, 1, 128, 1, 128, 64}).workspace_bytes, size_t{0});
    QCOMPARE(plan_paged_attention({4, 1, 12, 5, 128, 64}).workspace_bytes, size_t{0});
    QCOMPARE(plan_paged_attention({0, 1, 8, 2, 128, 64}).workspace_bytes, size_t{0});
  }
};

QTEST_APPLESS_MAIN(TestCudaAttentionPlan)
#include "test_cuda_attention_plan.moc"
