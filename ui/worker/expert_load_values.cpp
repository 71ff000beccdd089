// Registers the expert-load metatype for queued signals between the worker and the GUI.
#include "worker/expert_load_values.h"

namespace iwb::ui {

void registerExpertLoadMetaTypes() { qRegisterMetaType<iwb::ExpertLoadSnapshot>(); }

}  // namespace iwb::ui
