// The mirror's added latency (mirror_latency.h): pairs of single streaming
// requests, direct and mirrored in alternating order, then percentiles.
#include "client/mirror_latency.h"

#include <cstdio>
#include <thread>

namespace twinscope::demo {
namespace {

using Clock = std::chrono::steady_clock;

ChatResult One(const MirrorLatencyOptions& o, const std::string& url, const std::string& kind, int i) {
  ChatLoadOptions c = o.request;
  c.url = url;
  c.requests = 1;
  c.first_index = i;
  c.id_prefix = o.id_prefix + kind + "-";
  ChatLoadReport rep = RunChatLoad(c);
  return rep.results.empty() ? ChatResult{} : rep.results[0];
}

std::string Signed(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f ms", ms);
  return buf;
}

}  // namespace

nlohmann::json LatencyStats::ToJson() const {
  return {{"requests", requests},         {"ok", ok},
          {"ttft_ms_p50", ttft_ms_p50},   {"ttft_ms_p99", ttft_ms_p99},
          {"total_ms_p50", total_ms_p50}, {"total_ms_p99", total_ms_p99}};
}

LatencyStats SummarizeLatency(const std::vector<ChatResult>& results) {
  LatencyStats s;
  std::vector<double> ttft, total;
  for (const auto& r : results) {
    ++s.requests;
    if (!r.ok()) continue;
    ++s.ok;
    if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
    if (r.total_ms >= 0) total.push_back(r.total_ms);
  }
  s.ttft_ms_p50 = Percentile(ttft, 50);
  s.ttft_ms_p99 = Percentile(ttft, 99);
  s.total_ms_p50 = Percentile(total, 50);
  s.total_ms_p99 = Percentile(total, 99);
  return s;
}

void ComputeMirrorLatency(MirrorLatencyReport* r) {
  r->direct_stats = SummarizeLatency(r->direct);
  r->mirror_stats = SummarizeLatency(r->mirror);
  const LatencyStats &d = r->direct_stats, &m = r->mirror_stats;
  const bool both = d.ok > 0 && m.ok > 0;
  r->added_ttft_ms_p50 = both ? m.ttft_ms_p50 - d.ttft_ms_p50 : 0;
  r->added_ttft_ms_p99 = both ? m.ttft_ms_p99 - d.ttft_ms_p99 : 0;
  r->added_total_ms_p50 = both ? m.total_ms_p50 - d.total_ms_p50 : 0;
  r->added_total_ms_p99 = both ? m.total_ms_p99 - d.total_ms_p99 : 0;
  std::vector<double> dt, dl;
  for (size_t i = 0; i < r->direct.size() && i < r->mirror.size(); ++i) {
    const ChatResult &a = r->direct[i], &b = r->mirror[i];
    if (!a.ok() || !b.ok() || a.ttft_ms < 0 || b.ttft_ms < 0) continue;
    dt.push_back(b.ttft_ms - a.ttft_ms);
    dl.push_back(b.total_ms - a.total_ms);
  }
  r->paired = static_cast<int>(dt.size());
  r->paired_ttft_diff_ms_p50 = dt.empty() ? 0 : Percentile(dt, 50);
  r->paired_total_diff_ms_p50 = dl.empty() ? 0 : Percentile(dl, 50);
}

MirrorLatencyReport RunMirrorLatency(const MirrorLatencyOptions& o) {
  MirrorLatencyReport r;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.pairs; ++i) {
    auto direct = [&] {
      if (o.shadow_url.empty()) {
        r.direct.push_back(One(o, o.direct_url, "direct", i));
        return;
      }
      // The shadow's copy, sent at the same moment under the same id, as the mirror would.
      ChatResult copy;
      std::thread shadow([&] { copy = One(o, o.shadow_url, "direct", i); });
      r.direct.push_back(One(o, o.direct_url, "direct", i));
      shadow.join();
      ++r.shadow_copies;
      if (!copy.ok()) ++r.shadow_copies_failed;
    };
    if (i % 2 == 0) {
      direct();
      r.mirror.push_back(One(o, o.mirror_url, "mirror", i));
    } else {
      r.mirror.push_back(One(o, o.mirror_url, "mirror", i));
      direct();
    }
  }
  r.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ComputeMirrorLatency(&r);
  return r;
}

nlohmann::json MirrorLatencyReport::ToJson() const {
  auto results = [](const std::vector<ChatResult>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : v) {
      nlohmann::json j = {{"request_id", x.request_id},
                          {"status", x.status},
                          {"tokens", x.tokens()},
                          {"ttft_ms", x.ttft_ms},
                          {"total_ms", x.total_ms}};
      if (!x.ok()) j["error"] = x.error;
      a.push_back(std::move(j));
    }
    return a;
  };
  return {{"pairs", direct.size()},
          {"order", "pair i: direct then mirror for even i, mirror then direct for odd i; one request at a time"},
          {"direct", direct_stats.ToJson()},
          {"mirror", mirror_stats.ToJson()},
          {"added_ms",
           {{"ttft_p50", added_ttft_ms_p50},
            {"ttft_p99", added_ttft_ms_p99},
            {"total_p50", added_total_ms_p50},
            {"total_p99", added_total_ms_p99}}},
          {"paired",
           {{"pairs", paired},
            {"ttft_diff_ms_p50", paired_ttft_diff_ms_p50},
            {"total_diff_ms_p50", paired_total_diff_ms_p50}}},
          {"shadow_copies", shadow_copies},
          {"shadow_copies_failed", shadow_copies_failed},
          {"wall_ms", wall_ms},
          {"direct_results", results(direct)},
          {"mirror_results", results(mirror)}};
}

std::string MirrorLatencyReport::Describe() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "mirror added latency (%d pairs): TTFT p50 %s, p99 %s; total p50 %s, p99 %s (direct TTFT p50 %.2f / "
                "p99 %.2f ms, through the mirror %.2f / %.2f ms)",
                static_cast<int>(direct.size()), Signed(added_ttft_ms_p50).c_str(), Signed(added_ttft_ms_p99).c_str(),
                Signed(added_total_ms_p50).c_str(), Signed(added_total_ms_p99).c_str(), direct_stats.ttft_ms_p50,
                direct_stats.ttft_ms_p99, mirror_stats.ttft_ms_p50, mirror_stats.ttft_ms_p99);
  std::string s = buf;
  if (failed()) s += "; " + std::to_string(failed()) + " requests FAILED";
  return s;
}

}  // namespace twinscope::demo
