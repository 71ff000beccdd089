// ConversationStore over Qt's QSQLITE driver: schema creation and migration, durability
// pragmas, and one short transaction per operation.
#include "store/conversation_store.h"

#include <QAtomicInteger>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QThread>
#include <QVariant>

namespace iwb::ui {
namespace {

// Version 1: the first schema. A later version adds a step to migrate() and bumps
// kSchemaVersion; old files are upgraded in place when opened.
const char* const kSchemaV1[] = {
    "CREATE TABLE conversations ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  title TEXT NOT NULL,"
    "  model_path TEXT NOT NULL DEFAULT '',"
    "  system_prompt TEXT NOT NULL DEFAULT '',"
    "  sampling_json TEXT NOT NULL DEFAULT '{}',"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL)",
    "CREATE TABLE messages ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    "  position INTEGER NOT NULL,"
    "  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),"
    "  content TEXT NOT NULL,"
    "  stats_json TEXT NOT NULL DEFAULT '{}',"
    "  is_complete INTEGER NOT NULL DEFAULT 1,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  UNIQUE (conversation_id, position))",
    "CREATE INDEX conversations_by_update ON conversations(updated_at DESC)",
};

QString nowText() { return QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs); }

// Written with a trailing "Z", so the parsed time is UTC.
QDateTime dateFromText(const QString& text) { return QDateTime::fromString(text, Qt::ISODateWithMs); }

QString toJsonText(const QJsonObject& json) { return QString::fromUtf8(QJsonDocument(json).toJson(QJsonDocument::Compact)); }
QJsonObject fromJsonText(const QString& text) { return QJsonDocument::fromJson(text.toUtf8()).object(); }

iwb::Status sqlError(const QString& what, const QSqlError& error) {
  return iwb::make_error(iwb::ErrorCode::IoError, (what + QStringLiteral(": ") + error.text()).toStdString());
}

// Prepares and runs a statement; the error names what was being done.
iwb::Status run(QSqlQuery& query, const QString& sql, const QVariantList& values, const QString& what) {
  if (!query.prepare(sql)) return sqlError(what, query.lastError());
  for (const QVariant& v : values) {
    // A null QString binds as SQL NULL, which the NOT NULL text columns refuse; it means "".
    const bool isNullText = v.typeId() == QMetaType::QString && v.toString().isNull();
    query.addBindValue(isNullText ? QVariant(QStringLiteral("")) : v);
  }
  if (!query.exec()) return sqlError(what, query.lastError());
  return {};
}

Conversation conversationFromRow(const QSqlQuery& q) {
  Conversation c;
  c.id = q.value(0).toLongLong();
  c.title = q.value(1).toString();
  c.modelPath = q.value(2).toString();
  c.systemPrompt = q.value(3).toString();
  c.sampling = SamplingSettings::fromJson(fromJsonText(q.value(4).toString()));
  c.created = dateFromText(q.value(5).toString());
  c.updated = dateFromText(q.value(6).toString());
  return c;
}

const char* const kConversationColumns =
    "SELECT id, title, model_path, system_prompt, sampling_json, created_at, updated_at FROM conversations ";

}  // namespace

QString ConversationStore::defaultPath() {
  return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation))
      .filePath(QStringLiteral("conversations.sqlite"));
}

ConversationStore::ConversationStore(QString path, QString connectionName)
    : m_path(std::move(path)), m_connectionName(std::move(connectionName)) {}

ConversationStore::~ConversationStore() {
  {
    QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
    db.close();
  }  // no handle may be alive when the connection is removed
  QSqlDatabase::removeDatabase(m_connectionName);
}

iwb::Result<std::unique_ptr<ConversationStore>> ConversationStore::open(const QString& path) {
  if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE"))) {
    return iwb::make_error(iwb::ErrorCode::Unsupported,
                           "Qt's SQLite driver (QSQLITE) is not installed; conversations cannot be saved");
  }
  const QFileInfo info(path);
  if (!QDir().mkpath(info.absolutePath())) {
    return iwb::make_error(iwb::ErrorCode::IoError, ("cannot create the folder " + info.absolutePath()).toStdString());
  }
  // Each store gets its own connection: connections are per thread and per object.
  static QAtomicInteger<quint64> s_nextConnection{1};
  const QString name = QStringLiteral("iwb-conversations-%1").arg(s_nextConnection.fetchAndAddRelaxed(1));
  std::unique_ptr<ConversationStore> store(new ConversationStore(info.absoluteFilePath(), name));
  {
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
    db.setDatabaseName(store->m_path);
    db.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=5000"));
    if (!db.open()) {
      return sqlError(QStringLiteral("cannot open the conversation database %1").arg(store->m_path), db.lastError());
    }
    QSqlQuery q(db);
    // WAL: a commit appends to the log and readers never block the writer. FULL: the log is
    // synced on every commit, so a finished message is on disk before the call returns.
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      if (!q.exec(QLatin1String(pragma))) {
        return sqlError(QStringLiteral("cannot configure %1 (%2)").arg(store->m_path, QLatin1String(pragma)),
                        q.lastError());
      }
    }
  }
  IWB_RETURN_IF_ERROR(store->migrate());
  return store;
}

int ConversationStore::schemaVersion() const {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  if (!q.exec(QStringLiteral("PRAGMA user_version")) || !q.next()) return -1;
  return q.value(0).toInt();
}

iwb::Status ConversationStore::migrate() {
  const int version = schemaVersion();
  if (version < 0) return iwb::make_error(iwb::ErrorCode::CorruptFile, (m_path + " is not a SQLite database").toStdString());
  if (version > kSchemaVersion) {
    return iwb::make_error(iwb::ErrorCode::Unsupported,
                           QStringLiteral("%1 was written by a newer version of Inference Workbench (schema %2; this "
                                          "version knows up to %3)")
                               .arg(m_path)
                               .arg(version)
                               .arg(kSchemaVersion)
                               .toStdString());
  }
  if (version == kSchemaVersion) return {};
  QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
  if (!db.transaction()) return sqlError(QStringLiteral("cannot start the schema migration"), db.lastError());
  QSqlQuery q(db);
  if (version < 1) {
    for (const char* statement : kSchemaV1) {
      if (!q.exec(QLatin1String(statement))) {
        const QSqlError error = q.lastError();
        db.rollback();
        return sqlError(QStringLiteral("cannot create the conversation tables"), error);
      }
    }
  }
  // PRAGMA takes no bound parameters; the version is our own constant.
  if (!q.exec(QStringLiteral("PRAGMA user_version=%1").arg(kSchemaVersion)) || !db.commit()) {
    const QSqlError error = q.lastError().isValid() ? q.lastError() : db.lastError();
    db.rollback();
    return sqlError(QStringLiteral("cannot record the schema version"), error);
  }
  return {};
}

iwb::Result<QList<Conversation>> ConversationStore::listConversations() const {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  IWB_RETURN_IF_ERROR(run(q, QLatin1String(kConversationColumns) + QStringLiteral("ORDER BY updated_at DESC, id DESC"),
                          {}, QStringLiteral("cannot list conversations")));
  QList<Conversation> list;
  while (q.next()) list << conversationFromRow(q);
  return list;
}

iwb::Result<Conversation> ConversationStore::conversation(qint64 id) const {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  IWB_RETURN_IF_ERROR(run(q, QLatin1String(kConversationColumns) + QStringLiteral("WHERE id = ?"), {id},
                          QStringLiteral("cannot read conversation %1").arg(id)));
  if (!q.next()) return iwb::make_error(iwb::ErrorCode::NotFound, "no conversation with id " + std::to_string(id));
  return conversationFromRow(q);
}

iwb::Result<Conversation> ConversationStore::createConversation(const Conversation& info) {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  const QString now = nowText();
  IWB_RETURN_IF_ERROR(run(q,
                          QStringLiteral("INSERT INTO conversations (title, model_path, system_prompt, sampling_json, "
                                         "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"),
                          {info.title, info.modelPath, info.systemPrompt, toJsonText(info.sampling.toJson()), now, now},
                          QStringLiteral("cannot create a conversation")));
  return conversation(q.lastInsertId().toLongLong());
}

iwb::Result<Conversation> ConversationStore::importConversation(const Conversation& info,
                                                               const QList<StoredMessage>& messages) {
  QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
  if (!db.transaction()) return sqlError(QStringLiteral("cannot import a conversation"), db.lastError());
  QSqlQuery q(db);
  const QString now = nowText();
  const QString created = info.created.isValid() ? info.created.toUTC().toString(Qt::ISODateWithMs) : now;
  const QString updated = info.updated.isValid() ? info.updated.toUTC().toString(Qt::ISODateWithMs) : now;
  iwb::Status status = run(q,
                           QStringLiteral("INSERT INTO conversations (title, model_path, system_prompt, sampling_json, "
                                          "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)"),
                           {info.title, info.modelPath, info.systemPrompt, toJsonText(info.sampling.toJson()), created,
                            updated},
                           QStringLiteral("cannot import a conversation"));
  const qint64 id = q.lastInsertId().toLongLong();
  for (qsizetype i = 0; status && i < messages.size(); ++i) {
    const StoredMessage& m = messages.at(i);
    status = run(q,
                 QStringLiteral("INSERT INTO messages (conversation_id, position, role, content, stats_json, "
                                "is_complete, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
                 {id, int(i), m.role, m.content, toJsonText(m.stats.isValid() ? m.stats.toJson() : QJsonObject()),
                  m.isComplete ? 1 : 0, updated, updated},
                 QStringLiteral("cannot import message %1").arg(i + 1));
  }
  if (!status || !db.commit()) {
    db.rollback();
    return status ? sqlError(QStringLiteral("cannot import a conversation"), db.lastError()) : status;
  }
  return conversation(id);
}

iwb::Status ConversationStore::renameConversation(qint64 id, const QString& title) {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  IWB_RETURN_IF_ERROR(run(q, QStringLiteral("UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?"),
                          {title, nowText(), id}, QStringLiteral("cannot rename conversation %1").arg(id)));
  if (q.numRowsAffected() != 1) return iwb::make_error(iwb::ErrorCode::NotFound, "no conversation with id " + std::to_string(id));
  return {};
}

iwb::Status ConversationStore::updateConversationSettings(const Conversation& info) {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  // Settings changes do not move the conversation to the top of the list.
  IWB_RETURN_IF_ERROR(run(q,
                          QStringLiteral("UPDATE conversations SET model_path = ?, system_prompt = ?, sampling_json = ? "
                                         "WHERE id = ?"),
                          {info.modelPath, info.systemPrompt, toJsonText(info.sampling.toJson()), info.id},
                          QStringLiteral("cannot save the settings of conversation %1").arg(info.id)));
  if (q.numRowsAffected() != 1) {
    return iwb::make_error(iwb::ErrorCode::NotFound, "no conversation with id " + std::to_string(info.id));
  }
  return {};
}

iwb::Status ConversationStore::deleteConversation(qint64 id) {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  // The messages go with it (ON DELETE CASCADE; foreign_keys is on for this connection).
  IWB_RETURN_IF_ERROR(run(q, QStringLiteral("DELETE FROM conversations WHERE id = ?"), {id},
                          QStringLiteral("cannot delete conversation %1").arg(id)));
  if (q.numRowsAffected() != 1) return iwb::make_error(iwb::ErrorCode::NotFound, "no conversation with id " + std::to_string(id));
  return {};
}

iwb::Result<QList<StoredMessage>> ConversationStore::messages(qint64 conversationId) const {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  IWB_RETURN_IF_ERROR(run(q,
                          QStringLiteral("SELECT id, conversation_id, position, role, content, stats_json, is_complete "
                                         "FROM messages WHERE conversation_id = ? ORDER BY position"),
                          {conversationId}, QStringLiteral("cannot read the messages of conversation %1").arg(conversationId)));
  QList<StoredMessage> list;
  while (q.next()) {
    StoredMessage m;
    m.id = q.value(0).toLongLong();
    m.conversationId = q.value(1).toLongLong();
    m.position = q.value(2).toInt();
    m.role = q.value(3).toString();
    m.content = q.value(4).toString();
    m.stats = GenerationStats::fromJson(fromJsonText(q.value(5).toString()));
    m.isComplete = q.value(6).toInt() != 0;
    list << m;
  }
  return list;
}

iwb::Result<StoredMessage> ConversationStore::appendMessage(qint64 conversationId, const QString& role,
                                                            const QString& content, bool isComplete,
                                                            const GenerationStats& stats) {
  QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
  if (!db.transaction()) return sqlError(QStringLiteral("cannot save a message"), db.lastError());
  QSqlQuery q(db);
  const QString now = nowText();
  iwb::Status status = run(q,
                           QStringLiteral("INSERT INTO messages (conversation_id, position, role, content, stats_json, "
                                          "is_complete, created_at, updated_at) VALUES (?, (SELECT COALESCE(MAX(position) "
                                          "+ 1, 0) FROM messages WHERE conversation_id = ?), ?, ?, ?, ?, ?, ?)"),
                           {conversationId, conversationId, role, content,
                            toJsonText(stats.isValid() ? stats.toJson() : QJsonObject()), isComplete ? 1 : 0, now, now},
                           QStringLiteral("cannot save a message in conversation %1").arg(conversationId));
  const qint64 id = q.lastInsertId().toLongLong();
  if (status) status = touch(conversationId);
  if (!status || !db.commit()) {
    db.rollback();
    return status ? sqlError(QStringLiteral("cannot save a message"), db.lastError()) : status;
  }
  IWB_RETURN_IF_ERROR(run(q, QStringLiteral("SELECT position FROM messages WHERE id = ?"), {id},
                          QStringLiteral("cannot read back message %1").arg(id)));
  if (!q.next()) return iwb::make_error(iwb::ErrorCode::NotFound, "message " + std::to_string(id) + " vanished");
  StoredMessage m;
  m.id = id;
  m.conversationId = conversationId;
  m.position = q.value(0).toInt();
  m.role = role;
  m.content = content;
  m.stats = stats;
  m.isComplete = isComplete;
  return m;
}

iwb::Status ConversationStore::updateMessage(qint64 messageId, const QString& content, const GenerationStats& stats,
                                             bool isComplete) {
  QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
  QSqlQuery q(db);
  IWB_RETURN_IF_ERROR(run(q, QStringLiteral("SELECT conversation_id FROM messages WHERE id = ?"), {messageId},
                          QStringLiteral("cannot find message %1").arg(messageId)));
  if (!q.next()) return iwb::make_error(iwb::ErrorCode::NotFound, "no message with id " + std::to_string(messageId));
  const qint64 conversationId = q.value(0).toLongLong();
  if (!db.transaction()) return sqlError(QStringLiteral("cannot update a message"), db.lastError());
  iwb::Status status = run(q,
                           QStringLiteral("UPDATE messages SET content = ?, stats_json = ?, is_complete = ?, updated_at = ? "
                                          "WHERE id = ?"),
                           {content, toJsonText(stats.isValid() ? stats.toJson() : QJsonObject()), isComplete ? 1 : 0,
                            nowText(), messageId},
                           QStringLiteral("cannot update message %1").arg(messageId));
  if (status) status = touch(conversationId);
  if (!status || !db.commit()) {
    db.rollback();
    return status ? sqlError(QStringLiteral("cannot update a message"), db.lastError()) : status;
  }
  return {};
}

iwb::Status ConversationStore::truncateMessages(qint64 conversationId, int numToKeep) {
  QSqlDatabase db = QSqlDatabase::database(m_connectionName, false);
  if (!db.transaction()) return sqlError(QStringLiteral("cannot shorten a conversation"), db.lastError());
  QSqlQuery q(db);
  iwb::Status status = run(q, QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position >= ?"),
                           {conversationId, qMax(0, numToKeep)},
                           QStringLiteral("cannot shorten conversation %1").arg(conversationId));
  if (status) status = touch(conversationId);
  if (!status || !db.commit()) {
    db.rollback();
    return status ? sqlError(QStringLiteral("cannot shorten a conversation"), db.lastError()) : status;
  }
  return {};
}

iwb::Status ConversationStore::touch(qint64 conversationId) {
  QSqlQuery q(QSqlDatabase::database(m_connectionName, false));
  IWB_RETURN_IF_ERROR(run(q, QStringLiteral("UPDATE conversations SET updated_at = ? WHERE id = ?"),
                          {nowText(), conversationId}, QStringLiteral("cannot update conversation %1").arg(conversationId)));
  if (q.numRowsAffected() != 1) {
    return iwb::make_error(iwb::ErrorCode::NotFound, "no conversation with id " + std::to_string(conversationId));
  }
  return {};
}

}  // namespace iwb::ui
