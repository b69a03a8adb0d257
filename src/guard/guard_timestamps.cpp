// The program's timestamp callback served by translation (guard_timestamps.h):
// the guard's buffer bridge, the clock pairs and the counts of the report.
#include "guard/guard_timestamps.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "base/log.h"
#include "guard/clock_map.h"
#include "guard/record_timestamps.h"

namespace twinscope::guard {
namespace {

namespace v2 = cupti::v2;

constexpr size_t kKinds = 128;  // CUpti_ActivityKind values counted one by one (13.5 ends at 59)
constexpr int kMaxKindMessages = 4;

struct State {
  std::atomic<CUpti_TimestampCallbackFunc> fn{nullptr};  // the program's, while registered
  std::atomic<bool> translating{false};                  // CUPTI refused it: the guard translates
  std::atomic<CUpti_SubscriberHandle> sub{nullptr};      // the guard's activity subscriber
  std::atomic<int> cupti_result{0};                      // CUPTI's answer at the last registration
  std::atomic<uint64_t> registrations{0};

  std::mutex mu;
  ClockMap map;  // under mu
  uint64_t clock_resets = 0, pairs_failed = 0, pairs_taken = 0, worst_uncertainty_ns = 0;

  std::atomic<uint64_t> translated{0}, without_timestamps{0}, before_clock{0}, untranslated_other{0};
  std::array<std::atomic<uint64_t>, kKinds> untranslated{};
  std::atomic<int> kind_messages{0};
  std::atomic<bool> said_translating{false};

  std::atomic<CUpti_BuffersCallbackRequestFunc> request{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> complete{nullptr};
};

State& St() {
  static State* s = new State();  // never freed: CUPTI may call in until exit
  return *s;
}

// One clock pair, sampled without the lock: CUPTI is called here, and CUPTI
// may hold its own locks while it calls the guard's buffer callbacks.
bool Sample(State& s, ClockPair* pair) {
  const Library& l = Lib();
  CUpti_SubscriberHandle sub = s.sub.load();
  CUpti_TimestampCallbackFunc fn = s.fn.load();
  if (!sub || !fn || !l.v2.GetTimestamp) return false;
  return SamplePair([&](uint64_t* t) { return l.v2.GetTimestamp(sub, t) == CUPTI_SUCCESS; },
                    [&] { return static_cast<uint64_t>(fn()); }, pair);
}

// The pair into the map (mu held).
void AddLocked(State& s, bool sampled, const ClockPair& pair) {
  if (!sampled) {
    s.pairs_failed++;
    return;
  }
  s.pairs_taken++;
  s.worst_uncertainty_ns = std::max(s.worst_uncertainty_ns, pair.uncertainty_ns);
  if (s.map.Add(pair) == ClockMap::Added::kReset && s.clock_resets++ == 0)
    LogError("a clock stepped back while the guard translates the program's CUPTI timestamps; it starts afresh");
}

void CountUntranslated(State& s, uint32_t kind) {
  if (kind < kKinds) {
    if (s.untranslated[kind].fetch_add(1, std::memory_order_relaxed) == 0 &&
        s.kind_messages.fetch_add(1) < kMaxKindMessages)
      LogError(
          "the program's CUPTI records of activity kind %u reach it in CUPTI's clock, not its own: the guard does "
          "not know where that kind keeps its timestamps (counted in `twinscope stats`)",
          kind);
  } else {
    s.untranslated_other.fetch_add(1, std::memory_order_relaxed);
  }
}

// Rewrites the timestamps of every record in a buffer bound for the program.
void TranslateBuffer(uint8_t* buffer, size_t valid) {
  State& s = St();
  if (!s.translating.load(std::memory_order_acquire) || !buffer || valid == 0) return;
  const Library& l = Lib();
  CUpti_SubscriberHandle sub = s.sub.load();
  if (!sub || !l.v2.ActivityGetNextRecord) return;
  ClockPair pair;
  const bool sampled = Sample(s, &pair);  // CUPTI completes a buffer after its records: they lie before this pair
  ClockMap map;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    AddLocked(s, sampled, pair);
    map = s.map;  // a copy to read without the lock (at most ClockMap::kMaxPairs points)
  }
  const bool ready = map.Ready();
  CUpti_Activity* r = nullptr;
  while (l.v2.ActivityGetNextRecord(sub, buffer, valid, &r) == CUPTI_SUCCESS && r) {
    const TimestampFields* f = TimestampFieldsOf(static_cast<uint32_t>(r->kind));
    if (!f) {
      CountUntranslated(s, static_cast<uint32_t>(r->kind));
    } else if (f->count == 0) {
      s.without_timestamps.fetch_add(1, std::memory_order_relaxed);
    } else if (!ready) {
      s.before_clock.fetch_add(1, std::memory_order_relaxed);
    } else if (reinterpret_cast<uint8_t*>(r) + f->min_size > buffer + valid) {
      CountUntranslated(s, static_cast<uint32_t>(r->kind));  // cut short: not ours to guess at
    } else {
      RewriteTimestamps(*f, r, [&](uint64_t v) { return map.Map(v); });
      s.translated.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void Resample() {
  State& s = St();
  if (!s.translating.load(std::memory_order_acquire)) return;
  ClockPair pair;
  const bool sampled = Sample(s, &pair);
  std::lock_guard<std::mutex> lock(s.mu);
  AddLocked(s, sampled, pair);
}

// The guard's v2 buffer callbacks for the program's v1 pair.
// No clock pair here: CUPTI may ask for a buffer from deep inside a CUDA call.
void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records, v2::BufferRequestInfo*) {
  if (auto fn = St().request.load(std::memory_order_acquire)) {
    fn(buffer, size, max_records);
  } else {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
  }
}

void CUPTIAPI Completed(uint8_t* buffer, size_t size, size_t valid, v2::BufferCompleteInfo*) {
  Firewall("the guard's timestamp translation", [&] { TranslateBuffer(buffer, valid); });
  // Context NULL and stream 0: CUPTI's buffers are global since 6.0.
  if (auto fn = St().complete.load(std::memory_order_acquire)) fn(nullptr, 0, buffer, size, valid);
}

}  // namespace

CUptiResult ServeTimestampCallback(CUpti_SubscriberHandle sub, CUpti_TimestampCallbackFunc fn,
                                   CUptiResult cupti_result) {
  State& s = St();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!fn) {  // unregistered: CUPTI's clock again, as CUPTI answered
      s.translating.store(false);
      s.fn.store(nullptr);
      s.map.Reset();
      return cupti_result;
    }
    s.registrations.fetch_add(1);
    s.cupti_result.store(cupti_result);
    const bool same = s.fn.exchange(fn) == fn;
    s.sub.store(sub);
    if (cupti_result == CUPTI_SUCCESS) {  // CUPTI stamps the program's records itself
      s.translating.store(false, std::memory_order_release);
      s.map.Reset();
      return CUPTI_SUCCESS;
    }
    if (!same || !s.translating.load()) s.map.Reset();  // a new clock: earlier pairs say nothing of it
    s.translating.store(true, std::memory_order_release);
  }
  Resample();  // the first pair
  if (!s.said_translating.exchange(true))
    LogInfo(
        "CUPTI refused the program's own timestamp clock beside twinscope's subscriber (%s (%d)); the guard serves it "
        "instead: the program's cuptiGetTimestamp and the timestamps of its records are in its own clock, translated "
        "by the guard",
        ResultName(cupti_result).c_str(), static_cast<int>(cupti_result));
  return CUPTI_SUCCESS;
}

bool ProgramTimestamp(uint64_t* timestamp) {
  CUpti_TimestampCallbackFunc fn = St().fn.load(std::memory_order_acquire);
  if (!fn || !timestamp) return false;
  *timestamp = fn();
  return true;
}

CUptiResult RegisterProgramBuffers(const Library& l, CUpti_SubscriberHandle sub,
                                   CUpti_BuffersCallbackRequestFunc requested,
                                   CUpti_BuffersCallbackCompleteFunc completed) {
  State& s = St();
  s.request.store(requested, std::memory_order_release);
  s.complete.store(completed, std::memory_order_release);
  s.sub.store(sub);
  return l.v2.ActivityRegisterCallbacks(sub, &Requested, &Completed);
}

void ResampleProgramClock() { Firewall("the guard's timestamp translation (resample)", Resample); }

void ForgetTimestampCallback() {
  State& s = St();
  std::lock_guard<std::mutex> lock(s.mu);
  s.translating.store(false);
  s.fn.store(nullptr);
  s.map.Reset();
}

std::string TimestampReportJson() {
  State& s = St();
  if (s.registrations.load() == 0) return "";
  const int result = s.cupti_result.load();
  std::string j = "{\"how\":";
  j += result == CUPTI_SUCCESS ? "\"cupti\"" : "\"translated\"";
  j += ",\"cupti_result\":" + std::to_string(result) + ",\"registrations\":" + std::to_string(s.registrations.load());
  uint64_t untranslated = s.untranslated_other.load();
  std::string kinds;
  for (size_t k = 0; k < kKinds; ++k) {
    const uint64_t n = s.untranslated[k].load();
    if (!n) continue;
    untranslated += n;
    kinds += (kinds.empty() ? "\"" : ",\"") + std::to_string(k) + "\":" + std::to_string(n);
  }
  if (s.untranslated_other.load())
    kinds += (kinds.empty() ? "" : ",") + std::string("\"other\":") + std::to_string(s.untranslated_other.load());
  j += ",\"records_translated\":" + std::to_string(s.translated.load()) +
       ",\"records_without_timestamps\":" + std::to_string(s.without_timestamps.load()) +
       ",\"records_before_clock\":" + std::to_string(s.before_clock.load()) +
       ",\"untranslated_records\":" + std::to_string(untranslated) + ",\"untranslated_kinds\":{" + kinds + "}";
  {
    std::lock_guard<std::mutex> lock(s.mu);
    j += ",\"clock_pairs\":" + std::to_string(s.pairs_taken) +
         ",\"clock_pairs_failed\":" + std::to_string(s.pairs_failed) +
         ",\"clock_points\":" + std::to_string(s.map.count()) + ",\"clock_resets\":" + std::to_string(s.clock_resets) +
         ",\"max_pair_uncertainty_ns\":" + std::to_string(s.worst_uncertainty_ns);
  }
  return j + "}";
}

}  // namespace twinscope::guard
