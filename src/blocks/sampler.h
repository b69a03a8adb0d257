// Which launches of the selected kernels the block probe traces: every Nth
// (TWINSCOPE_EVERY), at most R a second (TWINSCOPE_PER_SECOND), within an
// overhead budget (TWINSCOPE_BUDGET), at most M in all (TWINSCOPE_MAX_LAUNCHES).
//
// The matching launches are numbered 0, 1, 2, ... in the order their
// LAUNCH_BEGIN arrives. Index n with n % every == 0 makes a *candidate*; a
// candidate is taken by the first launch (itself or a later one) that passes
// the time gates (rate, budget) while its module is patched; until then it
// stays pending. So without gates and with the module patched, exactly the
// launches 0, N, 2N, ... are traced (as in always-patched mode); a candidate
// that met an unpatched module or a closed gate is traced late (flagged as a
// catch-up), never silently dropped.
//
// Budget: the probe reports what each sample cost the program (host time it
// blocked: toggling, syncs, drain); credit accrues at budget% of the program's
// own time (wall time since the first matching launch, minus what sampling
// cost), capped at budget% of 100 ms so idle time cannot buy a long burst; a
// candidate is taken only while the credit is not negative, and each sample's
// measured cost is then spent from it. Over a run the cost so spent stays
// within budget% of the program's time plus one sample.
//
// Not thread-safe: the probe calls it under its lock. Time is passed in (ns),
// so tests drive it with a fake clock.
#pragma once

#include <cstdint>

namespace twinscope::blocks {

struct SamplingOptions {
  uint64_t every = 1;         // trace every Nth matching launch (1 = all)
  uint64_t max_launches = 0;  // stop after this many traced launches (0 = no limit)
  double per_second = 0;      // at most this many traced launches per second (0 = no limit)
  double budget_pct = 0;      // keep the estimated overhead within this % of program time (0 = no budget)
  bool any() const { return every > 1 || max_launches != 0 || per_second > 0 || budget_pct > 0; }
};

// Why a launch was traced: bits, stored in the launch record's flags
// (kFlagSample* in include/twinscope/records.h use the same values).
enum SampleWhy : uint32_t {
  kSampleNone = 0,
  kSampleTaken = 1u << 0,    // traced
  kSampleCatchUp = 1u << 1,  // its candidate came from an earlier launch (module unpatched or gate closed then)
  kSampleRate = 1u << 2,     // passed the --per-second gate
  kSampleBudget = 1u << 3,   // passed the --budget gate
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions o);

  // One matching launch at `now_ns`; `patched`: its module runs the patch now.
  // Returns kSampleNone (not traced) or kSampleTaken | reasons.
  uint32_t OnLaunch(uint64_t now_ns, bool patched);
  // Would the next matching launch be traced if it came at `now_ns` with its
  // module patched? (Toggle mode arms the module when this is true.)
  bool WantsNext(uint64_t now_ns) const;
  // What a sample cost the program (ns of host time the probe blocked), reported at `now_ns`.
  void AddCost(uint64_t ns, uint64_t now_ns);

  const SamplingOptions& options() const { return o_; }
  uint64_t matching() const { return next_; }
  uint64_t traced() const { return traced_; }
  // Candidates that met an unpatched module (traced later, if at all).
  uint64_t met_unpatched() const { return met_unpatched_; }
  uint64_t cost_ns() const { return cost_ns_; }          // all costs reported
  uint64_t program_ns(uint64_t now_ns) const;            // since the first matching launch, minus cost_ns
  uint64_t estimate_ns() const { return estimate_ns_; }  // running average of reported costs
  uint64_t max_cost_ns() const { return max_cost_ns_; }  // the largest one: the most a budget can be overdrawn
  bool done() const { return o_.max_launches != 0 && traced_ >= o_.max_launches; }

 private:
  bool GatesOpen(uint64_t now_ns) const;
  double Credit(uint64_t now_ns) const;  // budget credit at now_ns, capped

  SamplingOptions o_;
  uint64_t next_ = 0;  // index of the next matching launch
  uint64_t traced_ = 0;
  bool pending_ = false;  // a candidate waits for a launch that can take it
  uint64_t met_unpatched_ = 0;
  bool started_ = false;
  uint64_t start_ns_ = 0;       // first matching launch
  uint64_t last_taken_ns_ = 0;  // rate gate
  bool taken_any_ = false;
  // Budget: credit in ns at credit_at_ns_ (program time), spent by costs.
  double credit_ns_ = 0;
  uint64_t credit_at_ns_ = 0;  // program_ns when credit_ns_ was last brought up to date
  uint64_t cost_ns_ = 0;
  uint64_t estimate_ns_ = 0;
  uint64_t max_cost_ns_ = 0;
  uint64_t costs_seen_ = 0;
};

}  // namespace twinscope::blocks
