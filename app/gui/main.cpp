// inference-workbench: the desktop application's entry point — application identity, command
// line (an optional model to open, kernel profiling, the tab to show), and the main window.
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "main_window/app_info.h"
#include "main_window/main_window.h"
#include "main_window/window_capture.h"
#include "quantlab/quant_lab_panel.h"
#include "roofline/machine_ceilings.h"
#include "serve/server_panel.h"
#include "spec/spec_panel.h"
#include "worker/engine_controller.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>

#include <cstdio>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("Inference Workbench"));
  QApplication::setApplicationName(QStringLiteral("Inference Workbench"));
  QApplication::setApplicationVersion(iwb::ui::applicationVersion());
  // Matches packaging/inference-workbench.desktop, so desktops group windows under its icon.
  QApplication::setDesktopFileName(QStringLiteral("inference-workbench"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/inference-workbench.svg")));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Desktop workbench for running and understanding LLM inference."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(QStringLiteral("model"), QStringLiteral("GGUF model file to open at start."),
                               QStringLiteral("[model.gguf]"));
  const QCommandLineOption profileOption(QStringLiteral("profile"),
                                         QStringLiteral("Start with kernel profiling on (the Roofline tab's points)."));
  const QCommandLineOption tabOption(
      QStringLiteral("tab"),
      QStringLiteral("Tab to show first: chat, model, roofline, metrics, memory, kv-cache, speculative, ..."),
      QStringLiteral("name"));
  const QCommandLineOption promptOption(QStringLiteral("prompt"),
                                        QStringLiteral("Send this chat message as soon as the model has loaded "
                                                       "(demonstrations, screenshots)."),
                                        QStringLiteral("text"));
  const QCommandLineOption jsonSchemaOption(
      QStringList{QStringLiteral("j"), QStringLiteral("json-schema")},
      QStringLiteral("Hold chat replies to this JSON Schema (the chat's Reply format; llama.cpp's -j)."),
      QStringLiteral("schema"));
  const QCommandLineOption regexOption(
      QStringLiteral("regex"),
      QStringLiteral("Hold chat replies to this regex, the whole reply matching it (the chat's Reply format; vLLM's "
                     "guided_regex)."),
      QStringLiteral("regex"));
  const QCommandLineOption specRunOption(
      QStringLiteral("spec-run"),
      QStringLiteral(
          "Turn speculative decoding on with this drafter (lookup, self, mtp, or draft with --draft-model) and "
          "run the Speculative tab's comparison once the model has loaded (demonstrations, screenshots)."),
      QStringLiteral("drafter"));
  const QCommandLineOption draftModelOption(
      QStringLiteral("draft-model"), QStringLiteral("The draft model for --spec-run draft."), QStringLiteral("file"));
  const QCommandLineOption serveOption(
      QStringLiteral("serve"),
      QStringLiteral("Serve the open model over the OpenAI API on 127.0.0.1:<port> from the "
                     "start (the Server tab's switch)."),
      QStringLiteral("port"));
  const QCommandLineOption labRunOption(
      QStringLiteral("lab-run"),
      QStringLiteral("Run the Quantization tab's queue on the opened model once it has loaded, with these weight "
                     "types (comma-separated, e.g. Q8_0,Q4_0; demonstrations, screenshots)."),
      QStringLiteral("types"));
  const QCommandLineOption labKvOption(
      QStringLiteral("lab-kv"),
      QStringLiteral("With --lab-run: also these KV cache types on the base (comma-separated, e.g. q8_0,q4_0/q8_0)."),
      QStringLiteral("types"));
  const QCommandLineOption labKvEveryOption(
      QStringLiteral("lab-kv-every-type"),
      QStringLiteral("With --lab-kv: the KV cache types on every weight type too."));
  const QCommandLineOption captureOption(
      QStringLiteral("capture"),
      QStringLiteral(
          "Once the model has loaded (with --prompt: once the reply has ended; with --spec-run or --lab-run: "
          "once those runs have ended too), save a PNG of each tab of --capture-tabs into this folder and "
          "quit; works without a display (QT_QPA_PLATFORM=offscreen)."),
      QStringLiteral("folder"));
  const QCommandLineOption captureTabsOption(
      QStringLiteral("capture-tabs"),
      QStringLiteral("With --capture: the tabs, comma-separated (default: chat,memory,roofline)."),
      QStringLiteral("names"), QStringLiteral("chat,memory,roofline"));
  const QCommandLineOption deviceOption(
      QStringLiteral("device"),
      QStringLiteral("Where models run in this session: auto (a CUDA GPU when one works, else the CPU), cpu or cuda:N "
                     "(default: the saved engine setting)."),
      QStringLiteral("device"));
  parser.addOption(captureOption);
  parser.addOption(captureTabsOption);
  parser.addOption(deviceOption);
  parser.addOption(labKvEveryOption);
  parser.addOption(labRunOption);
  parser.addOption(labKvOption);
  parser.addOption(serveOption);
  parser.addOption(profileOption);
  parser.addOption(tabOption);
  parser.addOption(promptOption);
  parser.addOption(jsonSchemaOption);
  parser.addOption(regexOption);
  parser.addOption(specRunOption);
  parser.addOption(draftModelOption);
  parser.process(app);  // handles --help and --version, and rejects unknown options
  const QStringList arguments = parser.positionalArguments();
  if (arguments.size() > 1) {
    std::fprintf(stderr, "inference-workbench: expected at most one model file, got %lld\n%s",
                 static_cast<long long>(arguments.size()), qPrintable(parser.helpText()));
    return 2;
  }

  iwb::ui::MainWindow window;
  if (parser.isSet(deviceOption)) {
    const QString device = parser.value(deviceOption);
    if (device != QLatin1String("auto") && device != QLatin1String("cpu") &&
        !device.startsWith(QLatin1String("cuda"))) {
      std::fprintf(stderr, "inference-workbench: --device takes auto, cpu or cuda:N, not \"%s\"\n", qPrintable(device));
      return 2;
    }
    window.setSessionDevice(device);
  }
  if (parser.isSet(tabOption) && !window.showTab(parser.value(tabOption))) {
    std::fprintf(stderr, "inference-workbench: no tab named \"%s\" (the tabs: %s)\n",
                 qPrintable(parser.value(tabOption)), qPrintable(window.tabNames().join(QStringLiteral(", "))));
    return 2;
  }
  if (parser.isSet(profileOption)) window.engine()->setProfiling(true);
  if (parser.isSet(serveOption)) {
    bool isNumber = false;
    const int port = parser.value(serveOption).toInt(&isNumber);
    if (!isNumber || port < 0 || port > 65535) {
      std::fprintf(stderr, "inference-workbench: --serve needs a port number, not \"%s\"\n",
                   qPrintable(parser.value(serveOption)));
      return 2;
    }
    window.serverPanel()->setPort(port);
    if (!window.serverPanel()->setServing(true)) {
      std::fprintf(stderr, "inference-workbench: %s\n", qPrintable(window.serverPanel()->statusText()));
      return 1;
    }
  }
  // -j / --regex: the chat's reply format, checked as the side panel checks it.
  const auto startWithReplyFormat = [&](const QCommandLineOption& option, const QString& format) {
    iwb::ui::ChatSettingsPanel* settings = window.chatPanel()->settingsPanel();
    iwb::ui::SamplingSettings sampling = settings->sampling();
    sampling.replyFormat = format;
    (format == QLatin1String("regex") ? sampling.regex : sampling.jsonSchema) = parser.value(option);
    if (const auto grammar = sampling.replyGrammar(); !grammar) {
      std::fprintf(stderr, "inference-workbench: --%s: %s\n", qPrintable(option.names().last()),
                   grammar.error_message().c_str());
      return false;
    }
    settings->setValues(settings->systemPrompt(), sampling);
    return true;
  };
  if (parser.isSet(jsonSchemaOption) && !startWithReplyFormat(jsonSchemaOption, QStringLiteral("json_schema")))
    return 2;
  if (parser.isSet(regexOption) && !startWithReplyFormat(regexOption, QStringLiteral("regex"))) return 2;
  if (parser.isSet(promptOption)) {
    // Once, on the first model that loads: the chat panel has seen modelLoaded by then (it
    // connected first), so sending goes through its usual path and is saved like any message.
    const QString prompt = parser.value(promptOption);
    auto* connection = new QMetaObject::Connection;
    *connection = QObject::connect(window.engine(), &iwb::ui::EngineController::modelLoaded, &window,
                                   [&window, prompt, connection] {
                                     QObject::disconnect(*connection);
                                     delete connection;
                                     window.chatPanel()->input()->setPlainText(prompt);
                                     window.chatPanel()->send();
                                   });
  }
  if (parser.isSet(specRunOption)) {
    iwb::ui::SpeculationSettings settings = window.specPanel()->settings();
    settings.kind = parser.value(specRunOption);
    settings.draftModelPath = parser.value(draftModelOption);
    window.specPanel()->setSettings(settings);
    window.specPanel()->apply();
    auto* connection = new QMetaObject::Connection;
    *connection = QObject::connect(window.engine(), &iwb::ui::EngineController::speculationChanged, &window,
                                   [&window, connection](const iwb::ui::SpeculationSettings& s) {
                                     if (!s.isEnabled() || !window.engine()->hasModel()) return;
                                     QObject::disconnect(*connection);
                                     delete connection;
                                     window.specPanel()->runComparison();
                                   });
    // Settings applied before the model loaded are confirmed at once; the run then waits for it.
    QObject::connect(
        window.engine(), &iwb::ui::EngineController::modelLoaded, window.specPanel(),
        [&window] { window.specPanel()->apply(); }, Qt::SingleShotConnection);
  }
  if (parser.isSet(labRunOption)) {
    const QStringList types = parser.value(labRunOption).split(QLatin1Char(','), Qt::SkipEmptyParts);
    const QStringList kv = parser.value(labKvOption).split(QLatin1Char(','), Qt::SkipEmptyParts);
    QObject::connect(
        window.engine(), &iwb::ui::EngineController::modelLoaded, window.quantLabPanel(),
        [&window, types, kv, everyType = parser.isSet(labKvEveryOption)](const iwb::ui::LoadedModel& model) {
          iwb::ui::QuantLabPanel* lab = window.quantLabPanel();
          lab->setSourcePath(model.path);
          lab->setCheckedTypes(types, false);
          lab->setKvTypes(kv, everyType);
          lab->startQueue();
        },
        Qt::SingleShotConnection);
  }
  if (parser.isSet(captureOption)) {
    iwb::ui::WindowCapture::Options options;
    options.directory = parser.value(captureOption);
    options.tabs = parser.value(captureTabsOption).split(QLatin1Char(','), Qt::SkipEmptyParts);
    options.afterReply = parser.isSet(promptOption);
    auto* capture = new iwb::ui::WindowCapture(&window, options, &window);
    // The demonstration runs started with the model are on their tabs when the PNGs are taken.
    if (parser.isSet(specRunOption)) capture->waitAlsoFor(window.specPanel(), &iwb::ui::SpecPanel::comparisonFinished);
    if (parser.isSet(labRunOption))
      capture->waitAlsoFor(window.quantLabPanel(), &iwb::ui::QuantLabPanel::queueFinished);
    QObject::connect(capture, &iwb::ui::WindowCapture::finished, &app, [&window](bool isOk, const QString& message) {
      std::fprintf(isOk ? stdout : stderr, "inference-workbench: capture: %s (model on %s)\n", qPrintable(message),
                   qPrintable(window.engine()->model().deviceId.isEmpty() ? QStringLiteral("-")
                                                                          : window.engine()->model().deviceId));
      QCoreApplication::exit(isOk ? 0 : 1);
    });
    capture->start();
  }
  window.show();
  const auto openModel = [&window, &arguments] {
    if (!arguments.isEmpty())
      window.openModel(QFileInfo(arguments.first()).absoluteFilePath());
    else
      window.openDefaultModel();
  };
  // First start on this machine: measure its ceilings so the roofline has roofs. The model
  // opens after (or at Cancel): a load reading its weights meanwhile would lower the bandwidth
  // measured, and that figure is stored for good.
  if (window.startFirstRunProbe()) {
    QObject::connect(
        window.ceilings(), &iwb::ui::MachineCeilings::measuringChanged, &window,
        [openModel](bool isMeasuring) {
          if (!isMeasuring) openModel();
        },
        Qt::SingleShotConnection);
  } else {
    openModel();
  }
  return app.exec();
}
