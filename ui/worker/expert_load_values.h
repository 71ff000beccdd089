// The engine's expert-load snapshot (iwb::ExpertLoadSnapshot, a plain copy) as a Qt metatype,
// so the worker thread can send it to the GUI beside each KV snapshot.
#pragma once

#include "iwb/engine/runtime/expert_load.h"

#include <QMetaType>

namespace iwb::ui {
void registerExpertLoadMetaTypes();
}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ExpertLoadSnapshot)
