// The joined model saved beside join.json (DIR/join.model, CBOR), so that
// `twinscope stats DIR` and `twinscope export DIR` of a joined run read it
// instead of joining again (docs/join.md, "The saved model"). It holds every
// field of the model except the shadow launches' block durations (used only
// while the join is built), and each trace's size and modification time, so
// that a model older than its traces is known as stale. CUDA-free.
#pragma once

#include <string>

#include "base/status.h"
#include "join/join_model.h"

namespace twinscope::join {

inline constexpr const char* kModelFile = "join.model";

// Writes `m` to `path` (replaced if it exists).
Status SaveModel(const JoinedModel& m, const std::string& path);

// Why a saved model was not taken, for one line that says so.
enum class ModelUnusable { kNone, kMissing, kStale, kDamaged };

// Reads a saved model of the traces `primary` and `shadow` (as the caller
// found them now; the model's paths become these). Fails with kMissing (no
// file), kStale (a trace's size or modification time differs from when it was
// joined: the message names it) or kDamaged (not a saved model of this
// version, or cut short: the message says what).
StatusOr<JoinedModel> LoadModel(const std::string& path, const std::string& primary, const std::string& shadow,
                                ModelUnusable* why = nullptr);

}  // namespace twinscope::join
