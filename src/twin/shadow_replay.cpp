// Sequential serving's shadow: start it, wait for its health, replay the request log to it, stop it.
#include "twin/shadow_replay.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "twin/autotune_env.h"
#ifdef TWINSCOPE_HAVE_MIRROR
#include "mirror/replay.h"
#endif

namespace twinscope::twin {

ShadowReplayOutcome RunShadowReplay(const ShadowReplayRequest& r) {
  ShadowReplayOutcome out;
#ifndef TWINSCOPE_HAVE_MIRROR
  out.error = "this build has no HTTP mirror (TWINSCOPE_WITH_MIRROR=OFF): the replay needs it";
  return out;
#else
  auto log = r.follow_schedule ? StatusOr<mirror::RequestLogContents>(mirror::RequestLogContents{})
                               : mirror::ReadRequestLog(r.request_log);
  if (!log.ok()) {
    out.error = log.status().message();
    return out;
  }
  out.logged = log->requests.size();
  out.replayable = log->replayable();
  if (log->end_lines_without_request)
    std::fprintf(stderr,
                 "twinscope twin: %llu requests in %s have no request line (an older log, or a line lost): they "
                 "cannot be replayed\n",
                 static_cast<unsigned long long>(log->end_lines_without_request), r.request_log.c_str());
  for (const auto& q : log->requests)
    if (!q.replayable)
      std::fprintf(stderr, "twinscope twin: request %s is not replayable: %s\n", q.id.c_str(),
                   q.not_replayable.c_str());

  out.shadow_port = FreeLoopbackPort();
  if (!out.shadow_port) {
    out.error = "no free TCP port on 127.0.0.1 for the shadow server";
    return out;
  }
  const std::string shadow_dir = SideDir(r.out_dir, "shadow");
  ChildSpec spec;
  for (const auto& a : r.command)
    spec.argv.push_back(ExpandPlaceholders(a, out.shadow_port, r.primary_port, r.out_dir));
  for (const auto& a : r.shadow_args)
    spec.argv.push_back(ExpandPlaceholders(a, out.shadow_port, r.primary_port, r.out_dir));
  spec.env = SideEnv(r.shadow_library, shadow_dir, "shadow", r.shadow_env);
  spec.env.emplace_back("TWINSCOPE_PORT", std::to_string(out.shadow_port));
  // The primary has filled the autotune caches by now: the shadow reuses its choices.
  for (const auto& kv : ShareAutotuneCaches(r.out_dir, nullptr, /*at_once=*/false).env) spec.env.push_back(kv);
  if (r.shadow_device >= 0) spec.env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(r.shadow_device));
  spec.new_process_group = true;

  ChildGroup group(/*forward=*/false);
  const size_t si = group.Start(spec);
  auto stop = [&] {
    if (group.exit(si).running) {
      out.stop_request = RequestStopAndWait({shadow_dir}, r.stop_request_wait);
      group.Signal(si, SIGTERM);
      if (!group.WaitFor(si, r.stop_grace)) {
        std::fprintf(stderr, "twinscope twin: the shadow did not stop within %lld s of SIGTERM: SIGKILL\n",
                     static_cast<long long>(r.stop_grace.count() / 1000));
        group.Stop(si, std::chrono::milliseconds(0));
      }
    }
    out.shadow = group.exit(si);
  };
  if (!group.exit(si).started) {
    out.error = "the shadow server could not run: " + group.exit(si).error;
    stop();
    return out;
  }
  if (r.follow_schedule) {
    while (group.exit(si).running) {
      if (ChildGroup::ForwardedSignal()) {
        out.aborted = true;
        std::fprintf(stderr, "twinscope twin: stopped by a signal: the shadow stops before the schedule's end\n");
        break;
      }
      group.WaitFor(si, std::chrono::milliseconds(200));
    }
    stop();
    return out;
  }
  std::fprintf(stderr, "twinscope twin: the shadow server starts on port %d (block probe); waiting for GET %s\n",
               out.shadow_port, r.health_path.c_str());
  std::vector<HealthTarget> targets = {{"shadow", si, out.shadow_port, true}};
  const HealthWaitEnd health = WaitForHealth(group, &targets, r.health_path, r.health_timeout);
  out.healthy = targets[0].healthy;
  if (health.kind != HealthWaitEnd::kHealthy) {
    out.aborted = health.kind == HealthWaitEnd::kSignal;
    out.error = out.aborted ? "stopped by a signal while waiting for the shadow server to answer " + r.health_path
                            : health.message;
    stop();
    return out;
  }

  std::fprintf(stderr, "twinscope twin: replaying %zu logged requests to the shadow %s\n", out.replayable,
               r.all_at_once ? "all at once, in arrival order (the adapter holds each step until its requests came)"
                             : "at their logged arrival times");
  mirror::ReplayOptions ro;
  ro.port = out.shadow_port;
  ro.keep_arrival_offsets = !r.all_at_once;
  ro.request_timeout = r.request_timeout;
  const bool tty = r.progress;
  auto last_line = std::chrono::steady_clock::now();
  ro.progress = [&](const mirror::ReplayProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty && now - last_line < std::chrono::seconds(5)) return;
    last_line = now;
    char eta[32] = "ETA ?";
    if (p.eta_s >= 0) std::snprintf(eta, sizeof eta, "ETA %.0fs", p.eta_s);
    std::fprintf(stderr, "%stwinscope twin: replay %.0fs: %zu of %zu requests ended (%zu failed), %zu sent, %s%s",
                 tty ? "\r\033[K" : "", p.elapsed_s, p.ended, p.total, p.failed, p.sent, eta, tty ? "" : "\n");
    std::fflush(stderr);
  };
  ro.abort = [&] {
    if (ChildGroup::ForwardedSignal()) return true;
    group.Poll();
    if (!group.exit(si).running) {
      out.shadow_died = true;
      return true;
    }
    return false;
  };
  mirror::ReplayOutcome rep = mirror::Replay(*log, ro);
  if (tty) std::fputs("\r\033[K", stderr);
  out.aborted = rep.aborted && !out.shadow_died;
  out.ok = rep.ok;
  out.cancelled = rep.cancelled;
  out.failed = rep.failed;
  out.not_sent = rep.not_sent;
  out.replay = rep.ToJson();
  for (const auto& res : rep.results) {
    if (res.state == "failed" || res.state == "timeout")
      std::fprintf(stderr, "twinscope twin: the shadow could not serve request %s: %s%s\n", res.id.c_str(),
                   res.state.c_str(), res.error.empty() ? "" : (": " + res.error).c_str());
  }
  std::fprintf(stderr,
               "twinscope twin: replay: %zu of %zu requests ok, %zu cancelled as their clients cancelled, %zu failed, "
               "%zu not sent, %zu not replayable (%.1fs)%s\n",
               rep.ok, out.logged, rep.cancelled, rep.failed, rep.not_sent, rep.not_replayable, rep.elapsed_s,
               rep.status_differs ? (", " + std::to_string(rep.status_differs) +
                                     " with another status than the "
                                     "primary's")
                                        .c_str()
                                  : "");
  if (out.shadow_died)
    std::fprintf(stderr,
                 "twinscope twin: the shadow server exited during the replay (code %d): joined as far as it got\n",
                 group.exit(si).exit_code);
  if (out.aborted) std::fprintf(stderr, "twinscope twin: the replay was stopped by a signal\n");
  stop();
  return out;
#endif
}

}  // namespace twinscope::twin
