// Names of the TWINSCOPE_* environment variables, as constants
// (twinscope::env::kFlushMs == "TWINSCOPE_FLUSH_MS"), generated from the one
// settings table (base/settings_table.h); base/settings.h reads them with
// their types, defaults and ranges. Documented in README.md ("Configuration").
#pragma once

namespace twinscope::env {

#define TWINSCOPE_SETTING(constant, name, ...) inline constexpr char constant[] = name;
#include "base/settings_table.h"
#undef TWINSCOPE_SETTING

}  // namespace twinscope::env
