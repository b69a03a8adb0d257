// What the HTTP mirror adds to a client's latency, measured in one run: the
// same streaming chat requests sent one at a time straight to the primary
// server and through the mirror in front of it, interleaved (pair i goes
// direct then mirrored for even i, mirrored then direct for odd i, so a drift
// of the server's speed over the run falls on both alike), with time to first
// token and total time per request; p50/p99 of each path and the difference.
// In a lockstep twin the shadow follows the primary's schedule and waits for
// each request's copy, so a direct request can also be sent to the shadow
// (its answer dropped), as the mirror would have. Used by `twinscope demo
// --mirror-latency N`. CUDA-free; no Boost in this header; blocks until done.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/chat_client.h"

namespace twinscope::demo {

struct MirrorLatencyOptions {
  ChatLoadOptions request;         // what each request sends (max_tokens, prompt, seed, stream); url/requests ignored
  std::string mirror_url;          // the mirror in front of the primary
  std::string direct_url;          // the primary itself
  std::string shadow_url;          // non-empty: each direct request is also sent here, at once, its answer dropped
  int pairs = 20;                  // N requests each way
  std::string id_prefix = "lat-";  // ids <prefix>direct-<i> and <prefix>mirror-<i>
};

struct LatencyStats {
  int requests = 0, ok = 0;
  double ttft_ms_p50 = -1, ttft_ms_p99 = -1;    // over the ok requests
  double total_ms_p50 = -1, total_ms_p99 = -1;  // send to the last byte
  nlohmann::json ToJson() const;
};

// Summary statistics of a path's results.
LatencyStats SummarizeLatency(const std::vector<ChatResult>& results);

struct MirrorLatencyReport {
  std::vector<ChatResult> direct, mirror;  // pair i at index i
  LatencyStats direct_stats, mirror_stats;
  // The mirror's addition: mirrored minus direct, of each percentile, and of
  // the pairs' own differences (pairs where both requests succeeded).
  double added_ttft_ms_p50 = 0, added_ttft_ms_p99 = 0, added_total_ms_p50 = 0, added_total_ms_p99 = 0;
  int paired = 0;
  double paired_ttft_diff_ms_p50 = 0, paired_total_diff_ms_p50 = 0;
  int shadow_copies = 0, shadow_copies_failed = 0;  // direct requests also sent to the shadow
  double wall_ms = 0;
  int failed() const { return (direct_stats.requests - direct_stats.ok) + (mirror_stats.requests - mirror_stats.ok); }
  nlohmann::json ToJson() const;
  // "mirror added latency: TTFT p50 +0.12 ms, p99 ..." (one line, no newline).
  std::string Describe() const;
};

MirrorLatencyReport RunMirrorLatency(const MirrorLatencyOptions& options);

// Fills the derived fields of `r` from r.direct and r.mirror (RunMirrorLatency
// does; for tests and for reports made from other results).
void ComputeMirrorLatency(MirrorLatencyReport* r);

}  // namespace twinscope::demo
