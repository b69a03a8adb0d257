// The guard's state: the one libcupti (claimed with the collector), the mode,
// the per-entry-point accounting and the report the collector reads.
#include "guard/guard.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "abi/cupti_versions.h"
#include "abi/guard_abi.h"
#include "base/env_names.h"
#include "base/log.h"
#include "guard/guard_timestamps.h"

namespace twinscope::guard {
namespace {

constexpr const auto& kCuptiLibraryEnv = env::kCuptiLibrary;
constexpr int kMaxFailureMessages = 4;

std::mutex g_path_mu;
std::string g_claimed;  // under g_path_mu

Library g_lib;
std::once_flag g_load_once;
std::atomic<bool> g_loaded{false};

std::atomic<CallSlot*> g_slots{nullptr};
std::atomic<uint64_t> g_records{0};
std::atomic<int> g_failure_messages{0};
std::atomic<bool> g_refusal_said{false}, g_serving_said{false};

std::mutex g_sub_mu;
CUpti_SubscriberHandle g_activity = nullptr;  // under g_sub_mu

void CUPTIAPI NoCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// CUPTI clients expect CUDA to be initialized by the time they subscribe; in
// a `record` process that is also when the collector is injected, so the
// collector subscribes first and the guard's subscribers join it.
void InitCuda() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // CUPTI would load it now anyway
  if (!cuda) return;
  if (auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(cuda, "cuInit"))) init(0);
}

void Load() {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(g_path_mu);
    if (g_claimed.empty()) {
      const char* env = std::getenv(kCuptiLibraryEnv);
      g_claimed = env && *env ? env : "libcupti.so.13";
    }
    path = g_claimed;
  }
  Library& l = g_lib;
  l.path = path;
  l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.handle) {
    const char* e = dlerror();
    l.mode = Mode::kNoCupti;
    l.why_floor = "could not load " + path + ": " + (e ? e : "not found");
    LogError("the program calls CUPTI, but %s; its CUPTI calls fail (set %s to a libcupti.so.13)", l.why_floor.c_str(),
             kCuptiLibraryEnv);
    return;
  }
  auto get = [&](const char* name, auto* fn) {
    *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(l.handle, name));
  };
  get("cuptiSubscribe", &l.Subscribe);
  get("cuptiUnsubscribe", &l.Unsubscribe);
  get("cuptiEnableCallback", &l.EnableCallback);
  get("cuptiEnableDomain", &l.EnableDomain);
  get("cuptiEnableAllDomains", &l.EnableAllDomains);
  get("cuptiGetCallbackState", &l.GetCallbackState);
  get("cuptiActivityFlushAll", &l.ActivityFlushAll);
  get("cuptiActivityGetNextRecord", &l.ActivityGetNextRecord);
  get("cuptiGetTimestamp", &l.GetTimestamp);
  get("cuptiActivityGetAttribute", &l.ActivityGetAttribute);
  get("cuptiGetThreadIdType", &l.GetThreadIdType);
  l.v2.Resolve([&](const char* name) { return dlsym(l.handle, name); });
  decltype(&cuptiGetVersion) version = nullptr;
  get("cuptiGetVersion", &version);
  if (!version || version(&l.version) != CUPTI_SUCCESS) l.version = 0;
  if (l.version < cupti::v2::kMinVersion) {
    l.mode = Mode::kFloor;
    l.why_floor = "CUPTI " + CuptiVersionText(l.version) + " (API " + std::to_string(l.version) + ") at " + path +
                  " cannot hold two clients (multi-subscriber mode needs CUPTI 13.5)";
  } else if (!l.v2.complete() || !l.Subscribe || !l.EnableCallback || !l.ActivityFlushAll) {
    l.mode = Mode::kFloor;
    l.why_floor = "the CUPTI at " + path + " lacks the per-subscriber (_v2) calls of multi-subscriber mode";
  } else {
    l.mode = Mode::kServe;
  }
  InitCuda();
}

void Link(CallSlot& slot) {
  if (slot.linked.load(std::memory_order_acquire) || slot.linked.exchange(true)) return;
  CallSlot* head = g_slots.load();
  do {
    slot.next = head;
  } while (!g_slots.compare_exchange_weak(head, &slot));
}

// Results that end an iteration or an empty stack, not failures.
bool NormalEnd(CUptiResult r) { return r == CUPTI_ERROR_MAX_LIMIT_REACHED || r == CUPTI_ERROR_QUEUE_EMPTY; }

void JsonString(std::string* out, const std::string& s) {
  *out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      *out += c;
    }
  }
  *out += '"';
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kServe:
      return "served";
    case Mode::kFloor:
      return "floor";
    case Mode::kNoCupti:
      return "no_cupti";
  }
  return "?";
}

}  // namespace

const Library& Lib() {
  std::call_once(g_load_once, [] {
    Firewall("the guard's CUPTI loading", Load);
    g_loaded.store(true, std::memory_order_release);
  });
  return g_lib;
}

void* Symbol(const char* name) {
  const Library& l = Lib();
  return l.handle ? dlsym(l.handle, name) : nullptr;
}

bool HaveCupti() { return Lib().mode != Mode::kNoCupti; }

std::string ResultName(CUptiResult r) {
  const char* s = nullptr;
  auto fn = reinterpret_cast<decltype(&cuptiGetResultString)>(Symbol("cuptiGetResultString"));
  if (fn && fn(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

int NoteResult(CallSlot& slot, int result) {
  const auto r = static_cast<CUptiResult>(result);
  Link(slot);
  slot.calls.fetch_add(1, std::memory_order_relaxed);
  if (r == CUPTI_SUCCESS || NormalEnd(r)) return r;
  slot.last_failure.store(r, std::memory_order_relaxed);
  if (slot.failed.fetch_add(1, std::memory_order_relaxed) == 0 &&
      g_failure_messages.fetch_add(1) < kMaxFailureMessages) {
    const Library& l = Lib();
    const bool served = std::strcmp(slot.how, "served") == 0;
    LogError(
        "the program's CUPTI call %s returned %s (%d) %s; its own profile may be incomplete, twinscope's trace is "
        "not affected (details in the trace's tool_state.program_cupti and `twinscope stats`)",
        slot.name, ResultName(r).c_str(), static_cast<int>(r),
        served ? ("though the guard serves it from CUPTI " + CuptiVersionText(l.version)).c_str()
               : "(the guard does not serve this entry point: it went to CUPTI unchanged; report it, or run the "
                 "program's profiler without `twinscope record`)");
  }
  return r;
}

CUptiResult Refuse(CallSlot& slot) {
  Link(slot);
  slot.calls.fetch_add(1, std::memory_order_relaxed);
  slot.refused.fetch_add(1, std::memory_order_relaxed);
  if (!g_refusal_said.exchange(true)) {
    const Library& l = Lib();
    LogError(
        "the program uses CUPTI itself (first call: %s; e.g. torch.profiler), but %s: its CUPTI calls get "
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39) and its own profile stays empty; twinscope's trace is "
        "complete. To have both: install CUPTI 13.5 (pip install nvidia-cuda-cupti==13.5.25; `twinscope record` "
        "uses the newest CUPTI it finds), or run the program's profiler without `twinscope record`",
        slot.name, l.why_floor.c_str());
  }
  return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

void CountRecord() { g_records.fetch_add(1, std::memory_order_relaxed); }

CUpti_SubscriberHandle ActivitySubscriber(CUptiResult* error) {
  const Library& l = Lib();
  std::lock_guard<std::mutex> lock(g_sub_mu);
  if (g_activity) return g_activity;
  char other[cupti::v2::kOldSubscriberNameMinLen + 64] = {};
  cupti::v2::SubscriberParams params;
  cupti::v2::MultiSubscriberParams(&params, "the program (twinscope guard, activity)", other, sizeof other);
  CUpti_SubscriberHandle h = nullptr;
  CUptiResult r = l.v2.Subscribe(&h, NoCallback, nullptr, &params);
  if (r != CUPTI_SUCCESS) {
    *error = r;
    return nullptr;
  }
  g_activity = h;
  if (!g_serving_said.exchange(true))
    LogInfo(
        "the program's own CUPTI client is served by its own CUPTI subscriber beside twinscope's (CUPTI %s "
        "multi-subscriber mode, %s)",
        CuptiVersionText(l.version).c_str(), l.path.c_str());
  return h;
}

void ResetActivitySubscriber() {
  const Library& l = Lib();
  std::lock_guard<std::mutex> lock(g_sub_mu);
  if (g_activity && l.Unsubscribe) l.Unsubscribe(g_activity);
  g_activity = nullptr;
}

}  // namespace twinscope::guard

using namespace twinscope::guard;

extern "C" __attribute__((visibility("default"))) const char* twinscope_guard_claim_cupti(const char* path) {
  std::lock_guard<std::mutex> lock(g_path_mu);
  if (g_claimed.empty() && path && *path) g_claimed = path;
  return g_claimed.empty() ? nullptr : g_claimed.c_str();  // set once, never changed after
}

// Read by the collector every flush period: also when the guard, translating
// the program's timestamps, takes a fresh clock pair (clock_map.h).
extern "C" __attribute__((visibility("default"))) size_t twinscope_guard_report(char* buf, size_t size) {
  std::string j = "{";
  bool loaded = g_loaded.load(std::memory_order_acquire);
  if (loaded) ResampleProgramClock();
  if (loaded) {
    const Library& l = g_lib;
    j += "\"mode\":";
    JsonString(&j, ModeName(l.mode));
    j += ",\"cupti_library\":";
    JsonString(&j, l.path);
    j += ",\"cupti_version\":" + std::to_string(l.version);
    if (!l.why_floor.empty()) {
      j += ",\"why_not_served\":";
      JsonString(&j, l.why_floor);
    }
  }
  uint64_t refused = 0, failed = 0;
  j += loaded ? ",\"calls\":{" : "\"calls\":{";
  bool first = true;
  for (CallSlot* s = g_slots.load(); s; s = s->next) {
    if (!first) j += ',';
    first = false;
    JsonString(&j, s->name);
    const uint64_t r = s->refused.load(), f = s->failed.load();
    refused += r;
    failed += f;
    j += ":{\"how\":";
    JsonString(&j, r ? "refused" : s->how);
    j += ",\"calls\":" + std::to_string(s->calls.load());
    if (f) j += ",\"failed\":" + std::to_string(f) + ",\"last_result\":" + std::to_string(s->last_failure.load());
    if (r) j += ",\"refused\":" + std::to_string(r);
    j += '}';
  }
  j += "},\"refused\":" + std::to_string(refused) + ",\"failed\":" + std::to_string(failed) +
       ",\"records_read\":" + std::to_string(g_records.load());
  if (std::string ts = TimestampReportJson(); !ts.empty()) j += ",\"timestamps\":" + ts;
  if (loaded && (refused || failed)) {
    j += ",\"what_to_do\":";
    JsonString(&j, refused ? "install CUPTI 13.5 (pip install nvidia-cuda-cupti==13.5.25) and record again, or run "
                             "the program's profiler without `twinscope record`"
                           : "run the program's profiler without `twinscope record` for its complete profile, and "
                             "report the failing CUPTI call");
  }
  j += '}';
  if (j.size() < size) std::memcpy(buf, j.c_str(), j.size() + 1);
  return j.size();
}
