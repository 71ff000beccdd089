// Plain values describing an opened GGUF model: its summary, one row per tensor and one per
// metadata key. Built on the loader thread and handed to the GUI by value; nothing here
// points into engine objects, so the GUI never touches the parsed file.
#pragma once

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/status.h"

#include <QList>
#include <QMetaType>
#include <QString>

namespace iwb::ui {

struct TensorRow {
  QString name;
  QString type;             // "Q4_K", as llama.cpp prints it
  QString shape;            // "4096 x 32000", ggml order (row length first)
  qint64 numElements = 0;
  quint64 numBytes = 0;
  quint64 offset = 0;       // from the start of the data section
};

struct MetadataRow {
  QString key;
  QString type;             // "u32", "string", "string[32000]"
  QString value;            // short form (Value::to_display_string)
  QString fullValue;        // longer form for tooltips: whole strings, more array items
};

struct ModelDetails {
  QString path;
  iwb::ModelSummary summary;
  QList<TensorRow> tensors;      // in file order
  QList<MetadataRow> metadata;   // in file order
};

// Opens, validates and summarizes a GGUF file. Blocking (maps and parses the file): call it
// off the GUI thread. The error message names the file and the problem.
iwb::Result<ModelDetails> readModelDetails(const QString& path);

// Rows for a parsed file; exposed separately so tests can build rows from in-memory files.
QList<TensorRow> tensorRows(const iwb::gguf::GgufFile& file);
QList<MetadataRow> metadataRows(const iwb::gguf::GgufFile& file);

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::ModelDetails)
