// The legacy (v1) CUPTI entry points the guard serves for the program (at the
// least every one Kineto, torch.profiler's CUPTI client, calls), with CUPTI's
// own prototypes (the 13.0 headers). In serve mode (CUPTI >= 13.5) each maps to
// the per-subscriber call of the guard's subscribers:
//   cuptiSubscribe            -> cuptiSubscribe_v2(allowMultipleSubscribers=1) with the program's callback,
//                                so CUPTI calls the program's function with its userdata, unchanged;
//                                cuptiEnableCallback/Domain and cuptiUnsubscribe take that handle as is;
//   activity calls            -> the `_v2` call on the guard's activity subscriber; buffers reach the
//                                program's v1 callbacks (context NULL and stream 0: CUPTI 6+ buffers are
//                                global anyway);
//   cuptiActivityEnable*(u8)  -> cuptiActivitySetAttribute_v2 with the attribute of the same meaning;
//   cuptiActivityEnableContext-> cuptiActivityEnable_v2 (13.5 has no per-context call: every context);
//   cuptiActivityFlushAll     -> as is (it flushes every subscriber's buffers);
//   the program's timestamp   -> the per-subscriber attribute; where CUPTI refuses it (13.5 does beside
//   callback                     twinscope's subscriber) the guard translates the records' timestamps into
//                                the program's clock (guard_timestamps.h);
//   cuptiFinalize             -> the program's subscribers are dropped; CUPTI itself is not finalized
//                                (that would end the collector's session too).
// In floor mode the calls that would take or disturb the collector's seat are
// refused (guard.h); queries that cannot (record iteration, timestamps) go to
// CUPTI.
#include <cupti.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>

#include "base/log.h"
#include "guard/guard.h"
#include "guard/guard_timestamps.h"

#define GUARD_EXPORT extern "C" __attribute__((visibility("default")))

namespace twinscope::guard {
namespace {

namespace v2 = cupti::v2;

std::atomic<CUpti_SubscriberHandle> g_program{nullptr};  // the program's callback subscriber
std::mutex g_kinds_mu;
std::set<CUpti_ActivityKind> g_kinds;  // enabled by the program, for cuptiFinalize

enum class Floor { kRefuse, kPassV1 };

// Runs one served call: `serve(lib)` in serve mode; in floor mode refuses it
// or, for queries, runs `v1(lib)`. Counts it; never lets an exception out.
template <typename Serve, typename V1>
CUptiResult Run(CallSlot& slot, Floor floor, Serve serve, V1 v1) {
  CUptiResult r = CUPTI_ERROR_UNKNOWN;
  Firewall(slot.name, [&] {
    const Library& l = Lib();
    if (l.mode == Mode::kNoCupti) {
      r = Note(slot, CUPTI_ERROR_NOT_INITIALIZED);
    } else if (l.mode == Mode::kFloor) {
      r = floor == Floor::kRefuse ? Refuse(slot) : Note(slot, v1(l));
    } else {
      r = Note(slot, serve(l));
    }
  });
  return r;
}

CUptiResult NoV1(const Library&) { return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; }

template <typename Serve>
CUptiResult Serve1(CallSlot& slot, Serve serve) {
  return Run(slot, Floor::kRefuse, serve, NoV1);
}

// The activity subscriber, or return CUPTI's refusal of it.
#define ACTIVITY_SUBSCRIBER(var)                                 \
  CUptiResult var##_error = CUPTI_ERROR_UNKNOWN;                 \
  CUpti_SubscriberHandle var = ActivitySubscriber(&var##_error); \
  if (!var) return var##_error

#define SLOT(name) static CallSlot slot_(name, "served")

// A v1 switch (cuptiActivityEnable*(uint8_t)) as the per-subscriber attribute.
CUptiResult SetFlag(const Library& l, int attr, uint8_t value) {
  ACTIVITY_SUBSCRIBER(sub);
  size_t size = sizeof value;
  return l.v2.ActivitySetAttribute(sub, static_cast<CUpti_ActivityAttribute>(attr), &size, &value);
}

#define SERVE_FLAG(fn, attr)                                                              \
  GUARD_EXPORT CUptiResult fn(uint8_t enable) {                                           \
    SLOT(#fn);                                                                            \
    return Serve1(slot_, [&](const Library& l) { return SetFlag(l, v2::attr, enable); }); \
  }

CUptiResult EnableKind(const Library& l, CUpti_ActivityKind kind, bool dump) {
  ACTIVITY_SUBSCRIBER(sub);
  auto fn = dump && l.v2.ActivityEnableAndDump ? l.v2.ActivityEnableAndDump : l.v2.ActivityEnable;
  CUptiResult r = fn(sub, kind, nullptr);
  if (r == CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_kinds_mu);
    g_kinds.insert(kind);
  }
  return r;
}

CUptiResult DisableKind(const Library& l, CUpti_ActivityKind kind) {
  ACTIVITY_SUBSCRIBER(sub);
  CUptiResult r = l.v2.ActivityDisable(sub, kind, nullptr);
  if (r == CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(g_kinds_mu);
    g_kinds.erase(kind);
  }
  return r;
}

// An activity attribute on the guard's activity subscriber; the program's
// timestamp callback (attribute 22) is served even where CUPTI refuses it.
CUptiResult SetAttribute(const Library& l, CUpti_SubscriberHandle sub, CUpti_ActivityAttribute attr, size_t* size,
                         void* value) {
  CUptiResult r = l.v2.ActivitySetAttribute(sub, attr, size, value);
  if (static_cast<int>(attr) != v2::kAttrTimestampCallback || !size || *size != sizeof(CUpti_TimestampCallbackFunc) ||
      !value)
    return r;
  CUpti_TimestampCallbackFunc fn;
  std::memcpy(&fn, value, sizeof fn);
  return ServeTimestampCallback(sub, fn, r);
}

}  // namespace
}  // namespace twinscope::guard

using namespace twinscope::guard;

// ---- Callbacks ---------------------------------------------------------------

GUARD_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                        void* userdata) {
  SLOT("cuptiSubscribe");
  return Serve1(slot_, [&](const Library& l) {
    if (!subscriber) return CUPTI_ERROR_INVALID_PARAMETER;
    if (g_program.load()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;  // v1: one subscriber
    char other[v2::kOldSubscriberNameMinLen + 64] = {};
    v2::SubscriberParams params;
    v2::MultiSubscriberParams(&params, "the program (twinscope guard)", other, sizeof other);
    CUptiResult r = l.v2.Subscribe(subscriber, callback, userdata, &params);
    if (r == CUPTI_SUCCESS) g_program.store(*subscriber);
    return r;
  });
}

GUARD_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  SLOT("cuptiUnsubscribe");
  return Serve1(slot_, [&](const Library& l) {
    CUptiResult r = l.Unsubscribe(subscriber);
    CUpti_SubscriberHandle mine = subscriber;
    if (r == CUPTI_SUCCESS) g_program.compare_exchange_strong(mine, nullptr);
    return r;
  });
}

GUARD_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                             CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  SLOT("cuptiEnableCallback");
  return Serve1(slot_, [&](const Library& l) { return l.EnableCallback(enable, subscriber, domain, cbid); });
}

GUARD_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain) {
  SLOT("cuptiEnableDomain");
  return Serve1(slot_, [&](const Library& l) {
    return l.EnableDomain ? l.EnableDomain(enable, subscriber, domain) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

GUARD_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  SLOT("cuptiEnableAllDomains");
  return Serve1(slot_, [&](const Library& l) {
    return l.EnableAllDomains ? l.EnableAllDomains(enable, subscriber) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

GUARD_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  SLOT("cuptiGetCallbackState");
  return Serve1(slot_, [&](const Library& l) {
    return l.GetCallbackState ? l.GetCallbackState(enable, subscriber, domain, cbid) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

// ---- Activity ------------------------------------------------------------------

GUARD_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  SLOT("cuptiActivityEnable");
  return Serve1(slot_, [&](const Library& l) { return EnableKind(l, kind, false); });
}

GUARD_EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  SLOT("cuptiActivityEnableAndDump");
  return Serve1(slot_, [&](const Library& l) { return EnableKind(l, kind, true); });
}

GUARD_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  SLOT("cuptiActivityDisable");
  return Serve1(slot_, [&](const Library& l) { return DisableKind(l, kind); });
}

GUARD_EXPORT CUptiResult cuptiActivityEnableContext(CUcontext, CUpti_ActivityKind kind) {
  SLOT("cuptiActivityEnableContext");
  return Serve1(slot_, [&](const Library& l) { return EnableKind(l, kind, false); });
}

GUARD_EXPORT CUptiResult cuptiActivityDisableContext(CUcontext, CUpti_ActivityKind kind) {
  SLOT("cuptiActivityDisableContext");
  return Serve1(slot_, [&](const Library& l) { return DisableKind(l, kind); });
}

GUARD_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                        CUpti_BuffersCallbackCompleteFunc completed) {
  SLOT("cuptiActivityRegisterCallbacks");
  return Serve1(slot_, [&](const Library& l) {
    if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
    ACTIVITY_SUBSCRIBER(sub);
    return RegisterProgramBuffers(l, sub, requested, completed);
  });
}

GUARD_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  SLOT("cuptiActivityFlushAll");
  return Serve1(slot_, [&](const Library& l) { return l.ActivityFlushAll(flag); });
}

GUARD_EXPORT CUptiResult cuptiActivityFlush(CUcontext, uint32_t, uint32_t flag) {
  SLOT("cuptiActivityFlush");
  return Serve1(slot_, [&](const Library& l) { return l.ActivityFlushAll(flag); });
}

GUARD_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  SLOT("cuptiActivityGetNextRecord");
  auto v1 = [&](const Library& l) {
    return l.ActivityGetNextRecord ? l.ActivityGetNextRecord(buffer, valid, record) : CUPTI_ERROR_NOT_INITIALIZED;
  };
  CUptiResult r = Run(
      slot_, Floor::kPassV1,
      [&](const Library& l) {
        CUptiResult error = CUPTI_SUCCESS;
        CUpti_SubscriberHandle sub = ActivitySubscriber(&error);
        return sub ? l.v2.ActivityGetNextRecord(sub, buffer, valid, record) : v1(l);
      },
      v1);
  if (r == CUPTI_SUCCESS) CountRecord();
  return r;
}

// Floor: refused, since on a CUPTI of one client it would read (and reset)
// the collector's drop count.
GUARD_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t* dropped) {
  SLOT("cuptiActivityGetNumDroppedRecords");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityGetNumDroppedRecords(sub, ctx, stream, dropped);
  });
}

GUARD_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  SLOT("cuptiActivitySetAttribute");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return SetAttribute(l, sub, attr, size, value);
  });
}

GUARD_EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  SLOT("cuptiActivityGetAttribute");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityGetAttribute ? l.v2.ActivityGetAttribute(sub, attr, size, value) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

GUARD_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  SLOT("cuptiActivityPushExternalCorrelationId");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityPushExternalCorrelationId ? l.v2.ActivityPushExternalCorrelationId(sub, kind, id)
                                                  : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

GUARD_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  SLOT("cuptiActivityPopExternalCorrelationId");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityPopExternalCorrelationId ? l.v2.ActivityPopExternalCorrelationId(sub, kind, last)
                                                 : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

SERVE_FLAG(cuptiActivityEnableLatencyTimestamps, kAttrEnableKernelLatencyTimestamps)
SERVE_FLAG(cuptiActivityEnableLaunchAttributes, kAttrEnableKernelLaunchAttributes)
SERVE_FLAG(cuptiActivityEnableCudaEventDeviceTimestamps, kAttrEnableCudaEventDeviceTimestamps)
SERVE_FLAG(cuptiActivityEnableAllSyncRecords, kAttrEnableAllSyncRecords)
SERVE_FLAG(cuptiActivityEnableDeviceGraph, kAttrEnableDeviceGraphTrace)
SERVE_FLAG(cuptiActivityEnableAllocationSource, kAttrEnableAllocationSourceTracking)

GUARD_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  SLOT("cuptiActivityEnableDriverApi");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityEnableDriverApi ? l.v2.ActivityEnableDriverApi(sub, cbid, enable) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

GUARD_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  SLOT("cuptiActivityEnableRuntimeApi");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    return l.v2.ActivityEnableRuntimeApi ? l.v2.ActivityEnableRuntimeApi(sub, cbid, enable) : CUPTI_ERROR_NOT_SUPPORTED;
  });
}

// The per-subscriber attribute first; if CUPTI refuses it, the guard
// translates (guard_timestamps.h). NULL is refused, as the legacy call does.
GUARD_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  SLOT("cuptiActivityRegisterTimestampCallback");
  return Serve1(slot_, [&](const Library& l) {
    if (!fn) return CUPTI_ERROR_INVALID_PARAMETER;
    ACTIVITY_SUBSCRIBER(sub);
    size_t size = sizeof fn;
    return SetAttribute(l, sub, static_cast<CUpti_ActivityAttribute>(v2::kAttrTimestampCallback), &size, &fn);
  });
}

GUARD_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  SLOT("cuptiSetThreadIdType");
  return Serve1(slot_, [&](const Library& l) {
    ACTIVITY_SUBSCRIBER(sub);
    size_t size = sizeof type;
    return l.v2.ActivitySetAttribute(sub, static_cast<CUpti_ActivityAttribute>(v2::kAttrThreadIdType), &size, &type);
  });
}

GUARD_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  SLOT("cuptiGetThreadIdType");
  auto v1 = [&](const Library& l) { return l.GetThreadIdType ? l.GetThreadIdType(type) : CUPTI_ERROR_NOT_SUPPORTED; };
  return Run(
      slot_, Floor::kPassV1,
      [&](const Library& l) {
        ACTIVITY_SUBSCRIBER(sub);
        size_t size = sizeof *type;
        return l.v2.ActivityGetAttribute
                   ? l.v2.ActivityGetAttribute(sub, static_cast<CUpti_ActivityAttribute>(v2::kAttrThreadIdType), &size,
                                               type)
                   : v1(l);
      },
      v1);
}

GUARD_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  SLOT("cuptiGetTimestamp");
  auto v1 = [&](const Library& l) { return l.GetTimestamp ? l.GetTimestamp(timestamp) : CUPTI_ERROR_NOT_SUPPORTED; };
  return Run(
      slot_, Floor::kPassV1,
      [&](const Library& l) {
        if (ProgramTimestamp(timestamp)) return CUPTI_SUCCESS;  // the program's own clock, once registered
        ACTIVITY_SUBSCRIBER(sub);
        return l.v2.GetTimestamp(sub, timestamp);
      },
      v1);
}

GUARD_EXPORT CUptiResult cuptiFinalize(void) {
  SLOT("cuptiFinalize");
  return Serve1(slot_, [&](const Library& l) {
    CUptiResult error = CUPTI_SUCCESS;
    if (CUpti_SubscriberHandle sub = ActivitySubscriber(&error)) {
      std::lock_guard<std::mutex> lock(g_kinds_mu);
      for (CUpti_ActivityKind kind : g_kinds) l.v2.ActivityDisable(sub, kind, nullptr);
      g_kinds.clear();
    }
    ForgetTimestampCallback();
    ResetActivitySubscriber();
    if (CUpti_SubscriberHandle program = g_program.exchange(nullptr)) l.Unsubscribe(program);
    return CUPTI_SUCCESS;
  });
}
