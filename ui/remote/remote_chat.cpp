// RemoteChat: the worker thread, the request built from the chat's values, and the streamed
// completion turned into the statistics the chat shows under local replies.
#include "remote/remote_chat.h"

#include "iwb/engine/remote/openai_client.h"
#include "iwb/engine/runtime/engine.h"
#include "remote/remote_endpoints.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QThread>

namespace iwb::ui {
namespace {

using iwb::remote::RemoteErrorKind;

// Remote request ids live far above the engine's (which count up from 1).
constexpr quint64 kFirstRemoteId = quint64(1) << 62;
// When the chat asks for "until the model stops" (max tokens <= 0): the API needs a number.
constexpr int64_t kUnboundedMaxTokens = 4096;

QString tr(const char* text) { return QCoreApplication::translate("RemoteChat", text); }

// OpenAI's response_format for the reply format chosen; the server checks the schema itself
// (it may take keywords the local engine does not), so only its JSON is checked here.
QString responseFormatFrom(const SamplingSettings& sampling, QString* problem) {
  if (sampling.replyFormat == QLatin1String("json_object")) return QStringLiteral(R"({"type":"json_object"})");
  if (sampling.replyFormat != QLatin1String("json_schema")) return {};
  QJsonParseError error{};
  const QJsonDocument schema = QJsonDocument::fromJson(sampling.jsonSchema.toUtf8(), &error);
  if (error.error != QJsonParseError::NoError || !schema.isObject()) {
    *problem = tr("The reply format's JSON schema is not a JSON object: %1").arg(error.errorString());
    return {};
  }
  const QJsonObject format{
      {QStringLiteral("type"), QStringLiteral("json_schema")},
      {QStringLiteral("json_schema"),
       QJsonObject{{QStringLiteral("name"), QStringLiteral("reply")}, {QStringLiteral("schema"), schema.object()}}}};
  return QString::fromUtf8(QJsonDocument(format).toJson(QJsonDocument::Compact));
}

iwb::remote::RemoteRequest requestFrom(const RemoteChatInput& input) {
  iwb::remote::RemoteRequest r;
  r.model = input.model.toStdString();
  r.is_chat = true;
  for (const ChatTurn& turn : input.messages)
    r.messages.push_back({turn.role.toStdString(), turn.content.toStdString()});
  r.max_tokens = input.sampling.maxTokens > 0 ? input.sampling.maxTokens : kUnboundedMaxTokens;
  r.temperature = input.sampling.temperature;
  r.top_p = input.sampling.topP;
  if (input.sampling.seed >= 0) r.seed = input.sampling.seed;
  return r;
}

// The server's finish_reason in the words local replies use.
QString finishReasonText(const std::string& reason) {
  if (reason == "stop") return QLatin1String(iwb::finish_reason_name(FinishReason::EndOfGeneration));
  if (reason == "length") return QLatin1String(iwb::finish_reason_name(FinishReason::MaxTokens));
  return reason.empty() ? QLatin1String(iwb::finish_reason_name(FinishReason::EndOfGeneration))
                        : QString::fromStdString(reason);
}

QString errorText(const iwb::remote::RemoteError& error) {
  const QString message = QString::fromStdString(error.message);
  switch (error.kind) {
    case RemoteErrorKind::Dropped: return tr("the connection broke mid-reply: %1").arg(message);
    case RemoteErrorKind::Timeout: return tr("the server went silent: %1").arg(message);
    case RemoteErrorKind::HttpError:
      if (error.http_status == 401 || error.http_status == 403) {
        return tr("the server refused the API key; enter it again with File › Connect to Server… (%1)").arg(message);
      }
      return tr("the server answered with an error: %1").arg(message);
    case RemoteErrorKind::Malformed:
      return tr("the server sent something that is not an OpenAI stream: %1").arg(message);
    case RemoteErrorKind::ConnectFailed: return tr("could not reach the server: %1").arg(message);
    default: return message;
  }
}

GenerationStats statsFrom(const iwb::remote::StreamedCompletion& out, const RemoteChatInput& input) {
  GenerationStats stats;
  if (out.error.kind == RemoteErrorKind::Cancelled) {
    stats.finishReason = QLatin1String(iwb::finish_reason_name(FinishReason::Aborted));
  } else if (!out.is_ok()) {
    stats.finishReason = QLatin1String(iwb::finish_reason_name(FinishReason::Error));
    stats.errorMessage = errorText(out.error);
  } else {
    stats.finishReason = finishReasonText(out.finish_reason);
  }
  // The server's count when it sends usage; else the content chunks seen (one token each with
  // the servers we know, a lower bound otherwise).
  stats.numGeneratedTokens = out.completion_tokens >= 0 ? int(out.completion_tokens) : int(out.token_seconds.size());
  stats.numPromptTokens = out.prompt_tokens >= 0 ? int(out.prompt_tokens) : 0;
  stats.timeToFirstTokenSeconds = out.ttft_seconds.value_or(0);
  if (out.token_seconds.size() >= 2) stats.generationSeconds = out.token_seconds.back() - out.token_seconds.front();
  if (input.sampling.seed >= 0) stats.seed = quint64(input.sampling.seed);
  stats.ranOn = RemoteEndpoints::ranOnLabel(input.baseUrl, input.model);
  return stats;
}

}  // namespace

void RemoteChatWorker::run(quint64 requestId, const RemoteChatInput& input, std::shared_ptr<std::atomic<bool>> cancel) {
  QString problem;
  iwb::remote::RemoteRequest request = requestFrom(input);
  request.response_format = responseFormatFrom(input.sampling, &problem).toStdString();
  // A regex goes as vLLM's guided_regex; a server that does not know it says so (OpenAI) or
  // ignores it (llama-server).
  if (input.sampling.replyFormat == QLatin1String("regex")) request.guided_regex = input.sampling.regex.toStdString();
  if (!input.sampling.thinking.isEmpty()) request.enable_thinking = input.sampling.thinking == QLatin1String("on");
  request.reasoning_effort = input.sampling.reasoningEffort.toStdString();
  if (!problem.isEmpty()) {
    emit generationFailed(requestId, problem);
    return;
  }
  iwb::remote::Endpoint endpoint;
  endpoint.base_url = input.baseUrl.toStdString();
  endpoint.api_key = input.apiKey.toStdString();
  endpoint.connect_timeout_seconds = input.connectTimeoutSeconds;
  endpoint.read_timeout_seconds = input.readTimeoutSeconds;
  const iwb::remote::OpenAiClient client(endpoint);
  bool isTextSeen = false;
  const iwb::remote::StreamedCompletion out = client.stream(
      request,
      [&](std::string_view delta, double) {
        isTextSeen = true;
        emit tokensReady(requestId, QString::fromUtf8(delta.data(), qsizetype(delta.size())));
        return true;
      },
      cancel.get());
  if (!out.is_ok() && out.error.kind != RemoteErrorKind::Cancelled && !isTextSeen) {
    emit generationFailed(requestId, errorText(out.error));
    return;
  }
  emit generationFinished(requestId, statsFrom(out, input));
}

RemoteChat::RemoteChat(QObject* parent) : QObject(parent), m_thread(new QThread(this)), m_worker(new RemoteChatWorker) {
  registerGenerationMetaTypes();
  m_thread->setObjectName(QStringLiteral("iwb-remote-chat"));
  m_worker->moveToThread(m_thread);
  connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(m_worker, &RemoteChatWorker::tokensReady, this, &RemoteChat::tokensReady, Qt::QueuedConnection);
  auto ended = [this](quint64 requestId) {
    if (requestId == m_currentId) m_currentId = 0;
  };
  // The id is cleared before the panel hears of the end, so it may start the next reply at once.
  connect(
      m_worker, &RemoteChatWorker::generationFinished, this,
      [this, ended](quint64 id, const GenerationStats& stats) {
        ended(id);
        emit generationFinished(id, stats);
      },
      Qt::QueuedConnection);
  connect(
      m_worker, &RemoteChatWorker::generationFailed, this,
      [this, ended](quint64 id, const QString& message) {
        ended(id);
        emit generationFailed(id, message);
      },
      Qt::QueuedConnection);
  m_thread->start();
}

RemoteChat::~RemoteChat() {
  // The client notices the flag within a few milliseconds and closes its socket.
  if (m_cancel) m_cancel->store(true);
  m_thread->quit();
  m_thread->wait();
}

quint64 RemoteChat::generate(const RemoteEndpointInfo& endpoint, const QString& model, const GenerationInput& input) {
  RemoteChatInput request;
  request.baseUrl = endpoint.baseUrl;
  request.apiKey = QString::fromStdString(endpoint.endpoint.api_key);
  request.model = model;
  request.messages = input.messages;
  request.sampling = input.sampling;
  request.connectTimeoutSeconds = endpoint.endpoint.connect_timeout_seconds;
  request.readTimeoutSeconds = m_readTimeoutSeconds;
  const quint64 id = kFirstRemoteId + m_nextId++;
  m_cancel = std::make_shared<std::atomic<bool>>(false);
  m_currentId = id;
  QMetaObject::invokeMethod(
      m_worker, [worker = m_worker, id, request, cancel = m_cancel] { worker->run(id, request, cancel); },
      Qt::QueuedConnection);
  return id;
}

void RemoteChat::stop() {
  if (m_cancel) m_cancel->store(true);
}

}  // namespace iwb::ui
