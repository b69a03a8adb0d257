// `twinscope mirror`: an HTTP front that sends every request to a primary and
// a shadow server and answers with the primary's reply (src/mirror,
// docs/mirror.md).
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#if defined(TWINSCOPE_HAVE_MIRROR)
#include "mirror/mirror.h"
#endif

namespace twinscope::cli {
namespace {

#if defined(TWINSCOPE_HAVE_MIRROR)
std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0 + 0.5));
}

CommandRegistration kMirror(
    "mirror", "HTTP mirror: send each request to a primary and a shadow server, answer with the primary's reply",
    [](CLI::App* sub) -> CommandRun {
      struct Flags {
        mirror::MirrorOptions o;
        double connect_timeout = 5, primary_timeout = 300, shadow_timeout = 300, client_timeout = 60,
               keepalive_timeout = 60, upstream_idle = 4, drain_timeout = 30;
      };
      auto f = std::make_shared<Flags>();
      auto& o = f->o;
      sub->add_option("--listen", o.listen, "HOST:PORT to listen on (loopback unless told otherwise)")
          ->capture_default_str();
      sub->add_option("--primary", o.primary, "URL of the primary server, whose replies clients get (http://HOST:PORT)")
          ->required();
      sub->add_option("--shadow", o.shadow, "URL of the shadow server, whose replies are read and dropped")->required();
      sub->add_option("--log", o.log_path, "append one JSON line per request to FILE");
      sub->add_option("--threads", o.threads, "I/O threads (0: min(cores, 4))")->capture_default_str();
      sub->add_option("--max-body", o.max_body_bytes, "largest request body accepted, bytes (else 413)")
          ->capture_default_str()
          ->transform(CLI::AsSizeValue(false));
      sub->add_option("--max-header", o.max_header_bytes, "largest request/response header, bytes (else 431/502)")
          ->capture_default_str()
          ->transform(CLI::AsSizeValue(false));
      sub->add_option("--shadow-max-inflight", o.shadow_max_inflight,
                      "shadow copies in flight at most; past it copies are skipped and counted")
          ->capture_default_str();
      sub->add_option("--max-connections", o.max_connections, "client connections open at most")->capture_default_str();
      sub->add_option("--pool-size", o.pool_size, "idle keep-alive connections kept per upstream and thread")
          ->capture_default_str();
      sub->add_option("--connect-timeout", f->connect_timeout, "seconds to connect to an upstream")
          ->capture_default_str();
      sub->add_option("--primary-timeout", f->primary_timeout,
                      "seconds the primary may stay silent (before its reply or between two pieces of it)")
          ->capture_default_str();
      sub->add_option("--shadow-timeout", f->shadow_timeout, "seconds for a whole shadow exchange")
          ->capture_default_str();
      sub->add_option("--client-timeout", f->client_timeout,
                      "seconds to read one request from a client, or to write one piece to it")
          ->capture_default_str();
      sub->add_option("--keepalive-timeout", f->keepalive_timeout, "seconds an idle client connection is kept")
          ->capture_default_str();
      sub->add_option("--upstream-idle", f->upstream_idle,
                      "seconds an idle upstream connection is reused (keep it below the servers' keep-alive)")
          ->capture_default_str();
      sub->add_option("--drain-timeout", f->drain_timeout,
                      "seconds to wait for requests in flight on SIGINT/SIGTERM before cutting them")
          ->capture_default_str();
      sub->add_option("--health-path", o.health_path, "path answered by the mirror itself")->capture_default_str();
      return [f]() {
        auto o = f->o;
        o.connect_timeout = Ms(f->connect_timeout);
        o.primary_timeout = Ms(f->primary_timeout);
        o.shadow_timeout = Ms(f->shadow_timeout);
        o.client_timeout = Ms(f->client_timeout);
        o.keepalive_timeout = Ms(f->keepalive_timeout);
        o.upstream_idle = Ms(f->upstream_idle);
        o.drain_timeout = Ms(f->drain_timeout);
        return mirror::RunMirror(o);
      };
    });
#else
CommandRegistration kMirror("mirror", "HTTP mirror (not built: TWINSCOPE_WITH_MIRROR=OFF or no coroutine support)",
                            [](CLI::App* sub) -> CommandRun {
                              sub->allow_extras();
                              return [] {
                                std::fprintf(
                                    stderr,
                                    "twinscope mirror: this build has no mirror; rebuild with "
                                    "-DTWINSCOPE_WITH_MIRROR=ON (Boost.Beast headers, g++ or Boost >= 1.77)\n");
                                return 1;
                              };
                            });
#endif

}  // namespace
}  // namespace twinscope::cli
