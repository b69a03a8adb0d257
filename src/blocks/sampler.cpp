// Sampling decisions of the block probe (see sampler.h).
#include "blocks/sampler.h"

#include <algorithm>

namespace twinscope::blocks {
namespace {

// Idle program time buys at most this much budget credit (ns, before the
// budget fraction), so a long stretch without target launches cannot pay
// for a burst of samples later.
constexpr double kCreditWindowNs = 100e6;

}  // namespace

Sampler::Sampler(SamplingOptions o) : o_(o) {
  if (o_.every == 0) o_.every = 1;
}

uint64_t Sampler::program_ns(uint64_t now_ns) const {
  if (!started_ || now_ns <= start_ns_) return 0;
  const uint64_t wall = now_ns - start_ns_;
  return wall > cost_ns_ ? wall - cost_ns_ : 0;
}

double Sampler::Credit(uint64_t now_ns) const {
  const double rate = o_.budget_pct / 100.0;
  const uint64_t p = program_ns(now_ns);
  const double grown = credit_ns_ + rate * static_cast<double>(p > credit_at_ns_ ? p - credit_at_ns_ : 0);
  return std::min(grown, rate * kCreditWindowNs);
}

bool Sampler::GatesOpen(uint64_t now_ns) const {
  if (o_.per_second > 0 && taken_any_) {
    const double gap = 1e9 / o_.per_second;
    if (static_cast<double>(now_ns - std::min(now_ns, last_taken_ns_)) < gap) return false;
  }
  if (o_.budget_pct > 0 && Credit(now_ns) < 0) return false;  // in debt: the last sample is not paid for yet
  return true;
}

bool Sampler::WantsNext(uint64_t now_ns) const {
  if (done()) return false;
  if (!pending_ && next_ % o_.every != 0) return false;
  return GatesOpen(now_ns);
}

uint32_t Sampler::OnLaunch(uint64_t now_ns, bool patched) {
  if (!started_) {
    started_ = true;
    start_ns_ = now_ns;
  }
  const bool own = next_ % o_.every == 0;
  ++next_;
  if (own) pending_ = true;
  if (!pending_ || done() || !GatesOpen(now_ns)) return kSampleNone;
  if (!patched) {
    ++met_unpatched_;
    return kSampleNone;
  }
  pending_ = false;
  ++traced_;
  last_taken_ns_ = now_ns;
  taken_any_ = true;
  uint32_t why = kSampleTaken;
  if (!own) why |= kSampleCatchUp;
  if (o_.per_second > 0) why |= kSampleRate;
  if (o_.budget_pct > 0) why |= kSampleBudget;
  return why;
}

void Sampler::AddCost(uint64_t ns, uint64_t now_ns) {
  ++costs_seen_;
  max_cost_ns_ = std::max(max_cost_ns_, ns);
  // Running average, weighted towards recent samples (1/4 each); the first one as is.
  estimate_ns_ = costs_seen_ == 1 ? ns : (3 * estimate_ns_ + ns) / 4;
  // The cost's own interval is not program time: take it out, then bring the
  // credit up to date and spend it (it may go below zero: later samples wait).
  cost_ns_ += ns;
  const uint64_t p = program_ns(now_ns);
  credit_ns_ = Credit(now_ns) - static_cast<double>(ns);
  credit_at_ns_ = p;
}

}  // namespace twinscope::blocks
