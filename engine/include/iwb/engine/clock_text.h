// The current time as text, in a strftime format (C locale): one place for the clock readings
// that go into records (UTC timestamps) and prompts (Llama 3.1's local "Today Date").
#pragma once

#include <string>

namespace iwb {

enum class ClockZone { Utc, Local };

// Now, formatted by std::strftime (at most 63 bytes of text).
std::string now_as_text(const char* strftime_format, ClockZone zone);

}  // namespace iwb
