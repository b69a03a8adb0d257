// The serving twin: ports, health waits, the mirror, the stop sequence.
#include "twin/serve.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "base/count_text.h"
#include "format/stop_request.h"
#include "format/trace_tail.h"
#ifdef TWINSCOPE_HAVE_MIRROR
#include "mirror/mirror.h"
#include "twin/autotune_env.h"
#endif

namespace twinscope::twin {

std::string ExpandPlaceholders(const std::string& arg, int port, int primary_port, const std::string& dir) {
  std::string s = arg;
  auto replace = [&](const std::string& key, const std::string& value) {
    for (size_t p = 0; (p = s.find(key, p)) != std::string::npos; p += value.size()) s.replace(p, key.size(), value);
  };
  replace("{primary_port}", std::to_string(primary_port));
  replace("{port}", std::to_string(port));
  replace("{dir}", dir);
  return s;
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

int HttpGetStatus(int port, const std::string& path, std::chrono::milliseconds timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto wait = [&](short events) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    return poll(&p, 1, static_cast<int>(left.count())) == 1 && !(p.revents & (POLLERR | POLLNVAL));
  };
  int status = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 || errno == EINPROGRESS) {
    int err = 0;
    socklen_t len = sizeof err;
    if (wait(POLLOUT) && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
      if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        std::string got;
        char buf[512];
        while (got.find("\r\n") == std::string::npos && wait(POLLIN)) {
          ssize_t n = recv(fd, buf, sizeof buf, 0);
          if (n <= 0) break;
          got.append(buf, static_cast<size_t>(n));
        }
        // "HTTP/1.1 200 OK"
        if (got.rfind("HTTP/1.", 0) == 0 && got.size() >= 12) status = std::atoi(got.c_str() + 9);
      }
    }
  }
  close(fd);
  return status;
}

namespace {

std::string Count(uint64_t n) { return CountText(n); }

// The pid in a per-process trace name "<name>-<pid>.tsc" or "<name>-<pid>.<n>.tsc"; 0 if none.
int PidOfTraceName(const std::string& name) {
  if (name.size() < 5 || name.compare(name.size() - 4, 4, ".tsc") != 0) return 0;
  std::string stem = name.substr(0, name.size() - 4);
  const size_t dash = stem.rfind('-');
  if (dash == std::string::npos) return 0;
  std::string digits = stem.substr(dash + 1);
  digits = digits.substr(0, digits.find('.'));
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(digits.c_str());
}

// A process that can still answer (not gone, not a zombie).
bool Alive(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  return close == std::string::npos || close + 2 >= all.size() || all[close + 2] != 'Z';
}

ChildSpec SideSpec(const ServeRequest& r, const std::vector<std::string>& extra, const std::string& library,
                   const std::string& side_dir, const char* role, const EnvList& side_env, int port, int primary_port) {
  ChildSpec spec;
  for (const auto& a : r.command) spec.argv.push_back(ExpandPlaceholders(a, port, primary_port, r.out_dir));
  for (const auto& a : extra) spec.argv.push_back(ExpandPlaceholders(a, port, primary_port, r.out_dir));
  spec.env = SideEnv(library, side_dir, role, side_env);
  spec.env.emplace_back("TWINSCOPE_PORT", std::to_string(port));
  spec.new_process_group = true;  // stopped as a whole, after the mirror has drained
  return spec;
}

}  // namespace

HealthWaitEnd WaitForHealth(ChildGroup& group, std::vector<HealthTarget>* targets, const std::string& path,
                            std::chrono::milliseconds timeout) {
  HealthWaitEnd end;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Waited for: not healthy yet, and (if it may fail) still running.
  auto waiting = [&](const HealthTarget& t) { return !t.healthy && (t.required || group.exit(t.child).running); };
  for (;;) {
    if (ChildGroup::ForwardedSignal()) {
      end.kind = HealthWaitEnd::kSignal;
      return end;
    }
    group.Poll();
    for (size_t i = 0; i < targets->size(); ++i) {
      const HealthTarget& t = (*targets)[i];
      if (t.required && !group.exit(t.child).running) {
        end.kind = HealthWaitEnd::kExited;
        end.target = i;
        end.message = "the " + t.name + " server exited (code " + std::to_string(group.exit(t.child).exit_code) + ") " +
                      (t.healthy ? "after it answered GET " : "before it answered GET ") + path + " on port " +
                      std::to_string(t.port) + (t.healthy ? ", while the other server had not answered yet" : "");
        return end;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < targets->size(); ++i) {
        const HealthTarget& t = (*targets)[i];
        if (!waiting(t)) continue;
        end.kind = HealthWaitEnd::kTimedOut;
        end.target = i;
        end.message = "the " + t.name + " server did not answer GET " + path + " with 200 on port " +
                      std::to_string(t.port) + " within " + std::to_string(timeout.count() / 1000) +
                      " s: does it take its port from {port} or TWINSCOPE_PORT? (--health-timeout to wait longer)";
        return end;
      }
    }
    bool any = false;
    for (auto& t : *targets) {
      if (!waiting(t)) continue;
      t.healthy = HttpGetStatus(t.port, path, std::chrono::seconds(2)) == 200;
      any = any || waiting(t);
    }
    if (!any) return end;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

StopRequestOutcome RequestStopAndWait(const std::vector<std::string>& side_dirs, std::chrono::milliseconds timeout) {
  StopRequestOutcome o;
  for (const auto& side : side_dirs) {
    const std::string control = ControlDir(side);
    std::string error;
    if (!MakeDirs(control, &error)) {
      std::fprintf(stderr, "twinscope twin: stop request: %s\n", error.c_str());
      continue;
    }
    const int fd = ::open(StopRequest::StopFile(control).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
  }
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    o.asked = o.answered = 0;
    o.waiting.clear();
    for (const auto& side : side_dirs) {
      DIR* d = opendir(side.c_str());
      if (!d) continue;
      while (dirent* e = readdir(d)) {
        const int pid = PidOfTraceName(e->d_name);
        if (pid == 0) continue;
        const bool flushed = access(StopRequest::FlushedFile(ControlDir(side), pid).c_str(), F_OK) == 0;
        if (!flushed && !Alive(pid)) continue;  // ended already: its trace has its own end
        ++o.asked;
        if (flushed)
          ++o.answered;
        else
          o.waiting.push_back(pid);
      }
      closedir(d);
    }
    if (o.waiting.empty() || std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (o.asked) {
    std::string late;
    for (int pid : o.waiting) late += (late.empty() ? "" : ", ") + std::to_string(pid);
    std::fprintf(stderr, "twinscope twin: stop request: %d of %d traced processes wrote their summary%s%s\n",
                 o.answered, o.asked, late.empty() ? "" : "; no answer from pid ", late.c_str());
  }
  return o;
}

ServeOutcome RunServe(const ServeRequest& r) {
  ServeOutcome out;
#ifndef TWINSCOPE_HAVE_MIRROR
  out.error = "this build has no HTTP mirror (TWINSCOPE_WITH_MIRROR=OFF): twin --serve needs it";
  return out;
#else
  if (!PrepareTwinFolder(r.out_dir, &out.error)) return out;
  out.primary_dir = SideDir(r.out_dir, "primary");
  out.shadow_dir = SideDir(r.out_dir, "shadow");
  out.request_log = r.out_dir + "/requests.jsonl";
  for (const auto& p : {out.request_log}) {
    if (unlink(p.c_str()) != 0 && errno != ENOENT) {
      out.error = "cannot replace " + p + ": " + std::strerror(errno);
      return out;
    }
  }
  out.primary_port = FreeLoopbackPort();
  out.shadow_port = FreeLoopbackPort();
  while (out.shadow_port == out.primary_port && out.primary_port) out.shadow_port = FreeLoopbackPort();
  if (!out.primary_port || !out.shadow_port) {
    out.error = "no free TCP port on 127.0.0.1 for the two servers";
    return out;
  }

  ChildGroup group(/*forward=*/false);  // we stop the servers ourselves, in order
  ChildSpec primary = SideSpec(r, r.primary_args, r.primary_library, out.primary_dir, "primary", r.primary_env,
                               out.primary_port, out.primary_port);
  ChildSpec shadow = SideSpec(r, r.shadow_args, r.shadow_library, out.shadow_dir, "shadow", r.shadow_env,
                              out.shadow_port, out.primary_port);
  // The same autotune caches for both servers (together, or the shadow later: twin/shadow_replay.h).
  ShareAutotuneCaches(r.out_dir, nullptr, /*at_once=*/r.with_shadow).Apply(&primary.env, &shadow.env, &out.autotune);
  if (r.shadow_device >= 0) shadow.env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(r.shadow_device));
  const size_t pi = group.Start(primary);
  // Without a shadow, a placeholder child that is never started keeps the indices.
  const size_t si = r.with_shadow ? group.Start(shadow) : group.Start(ChildSpec{});
  auto stop_all = [&] {
    // Each traced process is asked to write its summary first: a server killed later still has it.
    std::vector<std::string> sides = {out.primary_dir};
    if (r.with_shadow) sides.push_back(out.shadow_dir);
    out.stop_request = RequestStopAndWait(sides, r.stop_request_wait);
    if (r.shadow_follows && group.exit(si).running && group.exit(pi).running) {
      // A follower runs the primary's schedule behind it: stop the primary (which ends the schedule),
      // then let the shadow finish the steps it still has and exit on its own.
      group.Signal(pi, SIGTERM);
      const auto end = std::chrono::steady_clock::now() + r.stop_grace;
      bool said = false;
      while (group.Poll() > 0 && std::chrono::steady_clock::now() < end) {
        if (!group.exit(pi).running && !said) {
          std::fprintf(stderr, "twinscope twin: the primary stopped; the shadow finishes the primary's schedule\n");
          said = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    for (size_t i : {pi, si}) group.Signal(i, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + r.stop_grace;
    while (group.Poll() > 0 && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (size_t i : {pi, si}) {
      if (group.exit(i).running) {
        std::fprintf(stderr, "twinscope twin: the %s did not stop within %lld s of SIGTERM: SIGKILL\n",
                     i == pi ? "primary" : "shadow", static_cast<long long>(r.stop_grace.count() / 1000));
        group.Stop(i, std::chrono::milliseconds(0));
      }
    }
    out.primary = group.exit(pi);
    out.shadow = group.exit(si);
  };
  if (!group.exit(pi).started) {
    out.error = "the primary server could not run: " + group.exit(pi).error;
    stop_all();
    return out;
  }

  // Both must answer GET health_path with 200 (the shadow is allowed to fail).
  std::vector<HealthTarget> targets = {{"primary", pi, out.primary_port, true}, {"shadow", si, out.shadow_port, false}};
  const HealthWaitEnd health = WaitForHealth(group, &targets, r.health_path, r.health_timeout);
  out.primary_healthy = targets[0].healthy;
  out.shadow_healthy = targets[1].healthy;
  if (health.kind == HealthWaitEnd::kSignal) {
    out.error = "stopped by a signal while waiting for the servers to answer " + r.health_path;
    stop_all();
    return out;
  }
  if (health.kind == HealthWaitEnd::kTimedOut && health.target == 1) {
    std::fprintf(stderr, "twinscope twin: %s; serving without it\n", health.message.c_str());
    group.Signal(si, SIGTERM);
  } else if (health.kind != HealthWaitEnd::kHealthy) {
    out.error = health.message;
    stop_all();
    return out;
  }
  if (!out.shadow_healthy && r.with_shadow)
    std::fprintf(stderr, "twinscope twin: the shadow server is not serving: requests go to the primary alone\n");

  mirror::MirrorOptions mo;
  mo.listen = r.listen;
  mo.primary = "http://127.0.0.1:" + std::to_string(out.primary_port);
  if (r.with_shadow) mo.shadow = "http://127.0.0.1:" + std::to_string(out.shadow_port);
  mo.log_path = out.request_log;
  mo.log_max_body_bytes = r.log_max_body_bytes;
  mirror::Mirror m(mo);
  Status st = m.Start();
  if (!st.ok()) {
    out.error = "the mirror could not start: " + st.message();
    stop_all();
    return out;
  }
  out.mirror_url = "http://" + m.listen_address();
  if (r.with_shadow) {
    std::fprintf(stderr,
                 "twinscope twin: serving: primary on port %d, shadow on port %d; send requests to %s "
                 "(Ctrl-C stops, then joins)\n",
                 out.primary_port, out.shadow_port, out.mirror_url.c_str());
  } else {
    std::fprintf(stderr, "twinscope twin: serving: primary on port %d; send requests to %s (Ctrl-C stops)\n",
                 out.primary_port, out.mirror_url.c_str());
  }

  RunTail ptail(out.primary_dir + "/"), stail(out.shadow_dir + "/");
  const auto serve_t0 = std::chrono::steady_clock::now();
  auto tick = [&] {
    if (!r.progress) return;
    ptail.Poll();
    stail.Poll();
    const auto c = m.counters();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - serve_t0).count();
    std::fprintf(stderr, "\r\033[Ktwinscope twin --serve: %.0fs, %s requests, primary %s launches%s%s", s,
                 Count(c.requests).c_str(), Count(ptail.launches()).c_str(), r.with_shadow ? ", shadow launches " : "",
                 r.with_shadow ? Count(stail.launches()).c_str() : "");
    std::fflush(stderr);
  };
  if (r.client) {
    ServeEndpoints ep;
    ep.mirror_url = out.mirror_url;
    ep.primary_url = "http://127.0.0.1:" + std::to_string(out.primary_port);
    if (r.with_shadow && out.shadow_healthy && group.exit(si).running)
      ep.shadow_url = "http://127.0.0.1:" + std::to_string(out.shadow_port);
    std::thread client([&] { r.client(ep); });
    client.join();
  } else {
    auto next = std::chrono::steady_clock::now();
    while (!ChildGroup::ForwardedSignal()) {
      if (r.duration_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - serve_t0).count() >= r.duration_s)
        break;
      if (r.max_requests > 0) {
        const auto c = m.counters();
        if (c.requests >= static_cast<uint64_t>(r.max_requests) && c.primary_inflight == 0) {
          std::fprintf(stderr, "%stwinscope twin: %d requests served (--requests)\n", r.progress ? "\n" : "",
                       r.max_requests);
          break;
        }
      }
      group.Poll();
      if (!group.exit(pi).running) {
        std::fprintf(stderr, "\ntwinscope twin: the primary server exited while serving (code %d)\n",
                     group.exit(pi).exit_code);
        break;
      }
      if (std::chrono::steady_clock::now() >= next) {
        tick();
        next += std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  out.stop_signal = ChildGroup::ForwardedSignal();
  if (r.progress) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "twinscope twin: stopping: mirror first (requests in flight finish), then %s\n",
               r.with_shadow ? "both servers" : "the server");
  m.Shutdown();
  m.Wait();
  out.mirror_counters = m.counters().ToJson();
  out.not_replayable = m.not_replayable_ids();
  stop_all();
  return out;
#endif
}

}  // namespace twinscope::twin
