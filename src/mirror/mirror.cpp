// The mirror's lifecycle: start, accept, drain and stop (Mirror::Impl), the Mirror facade and RunMirror.
#include "mirror/mirror.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>

#include "mirror/mirror_impl.h"

namespace twinscope::mirror {

// ---- Start / stop ------------------------------------------------------------

namespace {

StatusOr<std::vector<tcp::endpoint>> Resolve(const UpstreamUrl& url, const char* role) {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec || results.empty()) {
    return Status::Error(std::string(role) + " " + url.ToString() + ": cannot resolve host '" + url.host +
                         "': " + (ec ? ec.message() : "no addresses"));
  }
  std::vector<tcp::endpoint> eps;
  for (const auto& r : results) eps.push_back(r.endpoint());
  return eps;
}

}  // namespace

Status Mirror::Impl::Start() {
  auto listen = ParseListenAddress(opt_.listen);
  if (!listen.ok()) return listen.status();
  listen_ = *listen;
  if (opt_.primary.empty()) return Status::Error("--primary is required (e.g. --primary http://127.0.0.1:8000)");
  auto primary = ParseUpstreamUrl(opt_.primary);
  if (!primary.ok()) return Status::Error("--primary " + primary.status().message());
  primary_ = *primary;
  auto peps = Resolve(primary_, "--primary");
  if (!peps.ok()) return peps.status();
  primary_eps_ = *peps;
  if (!opt_.shadow.empty()) {
    auto shadow = ParseUpstreamUrl(opt_.shadow);
    if (!shadow.ok()) return Status::Error("--shadow " + shadow.status().message());
    shadow_ = *shadow;
    has_shadow_ = true;
    auto seps = Resolve(shadow_, "--shadow");
    if (!seps.ok()) return seps.status();
    shadow_eps_ = *seps;
  }
  if (opt_.max_body_bytes == 0 || opt_.max_header_bytes < 1024) {
    return Status::Error("--max-body must be > 0 and --max-header at least 1024 bytes");
  }
  if (!opt_.log_path.empty()) {
    RequestLogOptions lo;
    lo.max_body_bytes = opt_.log_max_body_bytes;
    Status s = log_.Open(opt_.log_path, lo);
    if (!s.ok()) return s;
  }

  int threads = opt_.threads;
  if (threads <= 0) threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  for (int i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(opt_.pool_size));

  beast::error_code ec;
  auto address = asio::ip::make_address(listen_.host, ec);
  if (ec) return Status::Error("--listen " + listen_.ToString() + ": " + ec.message());
  tcp::endpoint ep(address, listen_.port);
  acceptor_ = std::make_unique<tcp::acceptor>(*workers_[0]->ioc);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("cannot listen on " + listen_.ToString() + ": " + ec.message());
  port_ = acceptor_->local_endpoint().port();
  listen_.port = port_;
  started_ = Clock::now();

  asio::co_spawn(*workers_[0]->ioc, AcceptLoop(*acceptor_), asio::detached);
  for (auto& w : workers_) {
    w->guard.emplace(w->ioc->get_executor());
    asio::co_spawn(*w->ioc, SweepLoop(*w), asio::detached);
    w->thread = std::thread([io = w->ioc.get()] {
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "twinscope mirror: internal error on an I/O thread: %s (continuing)\n", e.what());
        }
      }
    });
  }
  started_ok_ = true;
  return Status::Ok();
}

void Mirror::Impl::Shutdown(bool now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now) hard_stop_ = true;
    if (shutdown_requested_) {
      cv_.notify_all();
      return;
    }
    shutdown_requested_ = true;
  }
  draining_.store(true, std::memory_order_release);
  if (started_ok_) {
    asio::post(*workers_[0]->ioc, [this] {
      beast::error_code ec;
      acceptor_->close(ec);
    });
    for (auto& w : workers_) {
      asio::post(*w->ioc, [wp = w.get()] {
        for (auto* c : wp->idle_clients) c->cancel();
        wp->primary_pool.Clear();
        wp->shadow_pool.Clear();
      });
    }
  }
  cv_.notify_all();
}

void Mirror::Impl::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return shutdown_requested_; });
  auto deadline = Clock::now() + opt_.drain_timeout;
  while (!hard_stop_ && Clock::now() < deadline) {
    if (c_.connections_open.load() == 0 && c_.shadow_inflight.load() == 0) break;
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  uint64_t left = c_.connections_open.load() + c_.shadow_inflight.load();
  lock.unlock();
  if (left) c_.drain_cut.fetch_add(left);
  StopWorkers();
}

void Mirror::Impl::StopWorkers() {
  if (stopped_.exchange(true)) return;
  for (auto& w : workers_) {
    w->guard.reset();
    w->ioc->stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  acceptor_.reset();
  // Pooled sockets first, then the io_contexts (which destroys any coroutine
  // still suspended, with its sockets), then the log: the traces of cut
  // requests are written as their frames go.
  for (auto& w : workers_) {
    w->primary_pool.Clear();
    w->shadow_pool.Clear();
  }
  for (auto& w : workers_) w->ioc.reset();
  log_.Close();
}

MirrorCounters Mirror::Impl::Snapshot() const {
  MirrorCounters s = c_.Load();
  s.log_written = log_.written();
  s.log_dropped = log_.dropped();
  s.log_not_replayable = log_.not_replayable();
  s.log_write_errors = log_.write_errors();
  s.log_syncs = log_.syncs();
  s.log_body_bytes = log_.body_bytes();
  return s;
}

// ---- Accepting -----------------------------------------------------------------

awaitable<void> Mirror::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  size_t next = 0;
  for (;;) {
    Worker& w = *workers_[next++ % workers_.size()];
    beast::error_code ec;
    auto socket = co_await acceptor.async_accept(*w.ioc, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open() || draining()) co_return;
      // Out of descriptors or similar: back off briefly instead of spinning.
      asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    Bump(c_.connections_accepted);
    if (c_.connections_open.load(std::memory_order_relaxed) >= opt_.max_connections) {
      Bump(c_.connections_refused);
      socket.close(ec);
      continue;
    }
    c_.connections_open.fetch_add(1, std::memory_order_relaxed);
    asio::co_spawn(*w.ioc, Session(w, tcp::socket(std::move(socket))), asio::detached);
  }
}

awaitable<void> Mirror::Impl::SweepLoop(Worker& w) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (;;) {
    t.expires_after(std::chrono::seconds(1));
    beast::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopped_) co_return;
    w.primary_pool.Sweep(opt_.upstream_idle);
    w.shadow_pool.Sweep(opt_.upstream_idle);
  }
}

// ---- Mirror ---------------------------------------------------------------------------

Mirror::Mirror(MirrorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Mirror::~Mirror() {
  impl_->Shutdown(false);
  impl_->Wait();
}
Status Mirror::Start() { return impl_->Start(); }
std::string Mirror::listen_address() const { return impl_->listen_.ToString(); }
uint16_t Mirror::port() const { return impl_->port_; }
bool Mirror::loopback_only() const { return impl_->listen_.loopback; }
std::string Mirror::primary_url() const { return impl_->primary_.ToString(); }
std::string Mirror::shadow_url() const { return impl_->has_shadow_ ? impl_->shadow_.ToString() : ""; }
void Mirror::Shutdown() { impl_->Shutdown(false); }
void Mirror::ShutdownNow() { impl_->Shutdown(true); }
void Mirror::Wait() { impl_->Wait(); }
MirrorCounters Mirror::counters() const { return impl_->Snapshot(); }
std::vector<std::string> Mirror::not_replayable_ids() const { return impl_->log_.not_replayable_ids(); }

int RunMirror(const MirrorOptions& options, const std::function<void(const Mirror&)>& on_listening) {
  // Asio catches SIGINT/SIGTERM on whichever thread they land and hands them
  // to this thread's io_context.
  asio::io_context sig_ioc(1);
  asio::signal_set signals(sig_ioc, SIGINT, SIGTERM);

  Mirror mirror(options);
  Status s = mirror.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "twinscope mirror: %s\n", s.message().c_str());
    mirror.ShutdownNow();
    return 1;
  }
  std::fprintf(stderr, "twinscope mirror: listening on http://%s%s\n", mirror.listen_address().c_str(),
               mirror.loopback_only() ? " (loopback only; pass --listen 0.0.0.0:PORT to accept other machines)"
                                      : " (NOT loopback: reachable from other machines)");
  std::fprintf(stderr, "twinscope mirror: primary %s (its replies go to clients), shadow %s\n",
               mirror.primary_url().c_str(),
               options.shadow.empty() ? "none" : (mirror.shadow_url() + " (replies dropped)").c_str());
  if (!options.log_path.empty()) std::fprintf(stderr, "twinscope mirror: request log %s\n", options.log_path.c_str());
  std::fflush(stderr);
  if (on_listening) on_listening(mirror);

  int signals_seen = 0;
  std::function<void(const beast::error_code&, int)> on_signal = [&](const beast::error_code& ec, int signo) {
    if (ec) return;
    if (++signals_seen == 1) {
      std::fprintf(stderr, "twinscope mirror: %s: finishing requests in flight (again to stop at once)\n",
                   signo == SIGINT ? "SIGINT" : "SIGTERM");
      mirror.Shutdown();
      signals.async_wait(on_signal);
    } else {
      std::fprintf(stderr, "twinscope mirror: stopping now\n");
      mirror.ShutdownNow();
    }
  };
  signals.async_wait(on_signal);
  std::thread waiter([&] {
    mirror.Wait();
    asio::post(sig_ioc, [&] { sig_ioc.stop(); });
  });
  sig_ioc.run();
  waiter.join();
  auto c = mirror.counters();
  std::fprintf(stderr,
               "twinscope mirror: stopped; %llu requests, %llu primary ok, %llu shadow ok, %llu shadow skipped, "
               "%llu shadow failed or timed out\n",
               static_cast<unsigned long long>(c.requests), static_cast<unsigned long long>(c.primary_ok),
               static_cast<unsigned long long>(c.shadow_ok), static_cast<unsigned long long>(c.shadow_skipped),
               static_cast<unsigned long long>(c.shadow_failed + c.shadow_timeouts));
  return 0;
}

}  // namespace twinscope::mirror
