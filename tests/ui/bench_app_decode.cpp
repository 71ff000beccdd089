// The desktop application's decode speed next to `iwb bench`'s, in one process, rounds
// interleaved: the chat panel (shown on the offscreen platform, streaming every token into its
// message view) asks the engine worker thread for a greedy reply of N tokens, as a person's
// Send does; and the same model, loaded as `iwb bench` loads it, runs tgN on this thread
// (after the reply in odd rounds, before it in even ones). It prints each round, the medians,
// and the median and quartiles of the rounds' own ratios, the figure to quote (each round's
// pair runs seconds apart; the memory bandwidth drifts over minutes). A plain program, not a
// test: it prints figures (docs/benchmarks.md).
//
//   QT_QPA_PLATFORM=offscreen bench_app_decode MODEL.gguf [-n TOKENS] [-r ROUNDS] [-t THREADS] [-p 1]
// IWB_BENCH_HIDDEN=1: the panel is not shown (nothing painted); IWB_BENCH_RAW_TEXT=1: replies as
// raw text rather than rendered from Markdown (the GUI thread's CPU ms shows what rendering costs).
// -p 1: each round's second reply has View > Token Probabilities on (each token's probability
// and top 5 alternatives from the logits) instead of running iwb bench: the cost of turning it on.
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/message_view.h"
#include "store/conversation_store.h"
#include "worker/engine_controller.h"

#include "iwb/engine/profile/bench.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/kernels/thread_pool.h"

#include <QApplication>
#include <QDoubleSpinBox>
#include <QEventLoop>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <tuple>
#include <vector>

using namespace iwb;
using namespace iwb::ui;

namespace {

// CPU time of the calling (GUI) thread: what painting and the models cost while the engine's
// threads decode on the same cores.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The q-quantile (0..1) of v, between neighbours as numpy's default does.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t below = static_cast<size_t>(at);
  const size_t above = std::min(below + 1, v.size() - 1);
  return v[below] + (at - static_cast<double>(below)) * (v[above] - v[below]);
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM",
          qgetenv("QT_QPA_PLATFORM").isEmpty() ? QByteArray("offscreen") : qgetenv("QT_QPA_PLATFORM"));
  QApplication app(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [-n TOKENS] [-r ROUNDS] [-t THREADS]\n", argv[0]);
    return 2;
  }
  const QString model = QString::fromLocal8Bit(argv[1]);
  int tokens = 64, rounds = 3, threads = 2;
  bool isProbabilityRun = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-n") == 0) tokens = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "-r") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "-t") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "-p") == 0) isProbabilityRun = std::atoi(argv[i + 1]) != 0;
  }
  QTemporaryDir dir;
  auto store = ConversationStore::open(dir.filePath(QStringLiteral("conversations.sqlite")));
  if (!store) {
    std::fprintf(stderr, "conversation store: %s\n", store.error_message().c_str());
    return 1;
  }
  EngineController controller;
  ChatPanel panel(&controller, store->get());
  panel.resize(1100, 750);
  if (qEnvironmentVariableIsEmpty("IWB_BENCH_HIDDEN")) panel.show();  // hidden: nothing painted
  // IWB_BENCH_RAW_TEXT=1: replies as raw text (View > Show Raw Text), not rendered from Markdown.
  panel.messageView()->setShowsRawText(!qEnvironmentVariableIsEmpty("IWB_BENCH_RAW_TEXT"));
  EngineLoadOptions load;
  load.numThreads = threads;
  load.device = QStringLiteral("cpu");
  controller.loadModel(model, load);
  QSignalSpy loaded(&controller, &EngineController::modelLoaded);
  QSignalSpy failed(&controller, &EngineController::modelLoadFailed);
  while (loaded.isEmpty() && failed.isEmpty()) QTest::qWait(50);
  if (!failed.isEmpty()) {
    std::fprintf(stderr, "load failed: %s\n", qPrintable(failed.first().at(1).toString()));
    return 1;
  }
  panel.settingsPanel()->temperatureBox()->setValue(0);
  panel.settingsPanel()->maxTokensBox()->setValue(tokens);

  EngineOptions options;
  options.num_threads = threads;
  options.device = "cpu";
  options.context_length = 4 + tokens + 1;
  auto engine = Engine::load(model.toStdString(), options);
  if (!engine) {
    std::fprintf(stderr, "engine: %s\n", engine.error_message().c_str());
    return 1;
  }
  BenchOptions bench;
  bench.num_prompt_tokens = 0;
  bench.num_generated_tokens = tokens;
  bench.num_repetitions = 1;

  std::printf("model %s, %d threads, %d tokens, thread pool spin %d us\n", qPrintable(model), threads, tokens,
              thread_pool_spin_us());
  std::vector<double> app_rates, bench_rates;
  // One greedy reply through the panel: its tok/s, tokens and the GUI thread's CPU ms. (The
  // question's greedy answer is long, so the reply reaches the token limit.)
  // The GUI thread waits in an event loop, as the application's does (QTest::qWait would poll
  // every 10 ms instead of waking for each token).
  int num_updates = 0;
  QObject::connect(panel.messageView(), &MessageView::streamingChangesShown, [&num_updates] { ++num_updates; });
  const auto reply = [&panel, &num_updates] {
    panel.newConversation();
    QSignalSpy finished(&panel, &ChatPanel::replyFinished);
    QEventLoop loop;
    QObject::connect(&panel, &ChatPanel::replyFinished, &loop, &QEventLoop::quit);
    panel.input()->setPlainText(
        QStringLiteral("Write a Python program that prints a multiplication table from 1 to 12, "
                       "with comments explaining each line."));
    num_updates = 0;
    const double gui_before = thread_seconds();
    panel.send();
    if (finished.isEmpty()) loop.exec();
    const auto stats = finished.first().at(1).value<GenerationStats>();
    return std::tuple(stats.tokensPerSecond(), stats.numGeneratedTokens, 1e3 * (thread_seconds() - gui_before));
  };
  if (isProbabilityRun) {
    std::printf("round  probabilities off tok/s (tokens, GUI ms)  on tok/s (tokens, GUI ms)\n");
    for (int r = 0; r < rounds; ++r) {
      panel.setShowsTokenProbabilities(false);
      const auto [off, off_tokens, off_ms] = reply();
      panel.setShowsTokenProbabilities(true);
      const auto [on, on_tokens, on_ms] = reply();
      app_rates.push_back(off);
      bench_rates.push_back(on);
      std::printf("%5d  %8.2f (%d, %.0f ms)  %8.2f (%d, %.0f ms)\n", r + 1, off, off_tokens, off_ms, on, on_tokens, on_ms);
    }
    const double a = median(app_rates), b = median(bench_rates);
    std::printf("median off %.2f tok/s, on %.2f tok/s: %.3f ms more per token\n", a, b,
                a > 0 && b > 0 ? 1e3 / b - 1e3 / a : 0);
    return 0;
  }
  std::printf("round  application tok/s (tokens, GUI thread CPU ms)  iwb bench tok/s\n");
  for (int r = 0; r < rounds; ++r) {
    // The order alternates, so neither side always runs on a core just warmed (or heated) by
    // the other.
    double rate = 0, gui_ms = 0;
    int num_tokens = 0;
    if (r % 2 == 0) std::tie(rate, num_tokens, gui_ms) = reply();
    auto result = run_bench(**engine, bench, std::nullopt);
    if (r % 2 == 1) std::tie(rate, num_tokens, gui_ms) = reply();
    if (!result || result->empty()) {
      std::fprintf(stderr, "bench: %s\n", result ? "no result" : result.error_message().c_str());
      return 1;
    }
    app_rates.push_back(rate);
    bench_rates.push_back(result->front().tokens_per_s_mean);
    std::printf("%5d  %8.2f (%d, %.0f ms, %d updates of %.2f ms)  %12.2f\n", r + 1, rate, num_tokens, gui_ms,
                num_updates, panel.messageView()->streamCostMs(), bench_rates.back());
  }
  const double a = median(app_rates), b = median(bench_rates);
  std::printf("median application %.2f tok/s, iwb bench %.2f tok/s: application / bench %.3f\n", a, b,
              b > 0 ? a / b : 0);
  // Each round's two figures ran within seconds of each other, so their ratio is paired against
  // the memory bandwidth's drift, which moves single figures by 20-30% over minutes.
  std::vector<double> ratios;
  for (size_t r = 0; r < app_rates.size(); ++r) {
    if (bench_rates[r] > 0) ratios.push_back(app_rates[r] / bench_rates[r]);
  }
  std::printf("per-round application / bench: median %.3f, quartiles %.3f-%.3f, %zu rounds\n", median(ratios),
              quantile(ratios, 0.25), quantile(ratios, 0.75), ratios.size());
  // Whether the pool found its workers held back (the GUI thread taking a core) and ran
  // regions on fewer threads: on an idle machine it should not.
  const iwb::ThreadPoolStats pool = iwb::thread_pool_stats();
  std::printf("thread pool: %lld regions on %d workers, %lld times a thread cut for contention (%lld regions)\n",
              static_cast<long long>(pool.regions), pool.num_workers, static_cast<long long>(pool.contention_events),
              static_cast<long long>(pool.contended_regions));
  return 0;
}
