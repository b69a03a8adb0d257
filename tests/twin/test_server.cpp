// A tiny HTTP server for the `twin --serve` tests: answers GET /health (200,
// or 503 with --never-healthy) and any other request with 200 and a body that
// names its role (TWINSCOPE_ROLE) and port. Port from --port or
// TWINSCOPE_PORT. Writes its pid to --pid-file. Exits 0 on SIGTERM; with
// --exit-after-requests N it exits 3 after answering N non-health requests.
// --record FILE appends a JSON line per non-health request (role, method, path, X-Request-Id, body and the
// engine adapter variables twin sets, and its own arguments); --life FILE appends "start|exit ROLE REALTIME_NS".
// --fake-adapter plays an engine adapter: writes TWINSCOPE_ADAPTER_STATUS (record in the primary, force in a shadow
// given TWINSCOPE_SCHEDULE_FOLLOW) and TWINSCOPE_SCHEDULE_OUT; --fake-adapter-raises writes the status of an adapter
// that raised (disabled). --follow FILE --exit-after-schedule writes "follow FILE 0" to --life and exits 0 at once (a
// demo server's shadow that ran its schedule).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace {

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A JSON string literal of `s` (printable ASCII kept, the rest escaped).
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The value of header `name` in a raw request ("" if absent); names compared as sent.
std::string HeaderValue(const std::string& req, const std::string& name) {
  const size_t at = req.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const size_t from = at + 4 + name.size();
  return req.substr(from, req.find("\r\n", from) - from);
}

volatile sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

std::string Arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}
bool Flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_port = std::getenv("TWINSCOPE_PORT");
  const int port = std::atoi(Arg(argc, argv, "--port", env_port ? env_port : "0").c_str());
  const bool never_healthy = Flag(argc, argv, "--never-healthy");
  const int exit_after = std::atoi(Arg(argc, argv, "--exit-after-requests", "0").c_str());
  const char* role = std::getenv("TWINSCOPE_ROLE");
  const std::string pid_file = Arg(argc, argv, "--pid-file", "");
  if (!pid_file.empty()) std::ofstream(pid_file) << getpid() << "\n";
  const std::string record = Arg(argc, argv, "--record", "");
  const std::string life = Arg(argc, argv, "--life", "");
  const std::string role_name = role ? role : "?";
  std::string args;  // its arguments after the program, space-separated (for --record)
  for (int i = 1; i < argc; ++i) args += (i > 1 ? " " : "") + std::string(argv[i]);
  if (!life.empty()) std::ofstream(life, std::ios::app) << "start " << role_name << " " << RealtimeNs() << "\n";
  const bool fake_adapter = Flag(argc, argv, "--fake-adapter");
  const bool adapter_raises = Flag(argc, argv, "--fake-adapter-raises");
  const std::string status_file = Env("TWINSCOPE_ADAPTER_STATUS");
  auto write_status = [&](int steps) {
    if (status_file.empty() || (!fake_adapter && !adapter_raises)) return;
    std::ofstream st(status_file, std::ios::trunc);
    if (adapter_raises) {
      st << R"({"engine":"fake","version":"1.0","supported":true,"mode":"disabled","message":"twinscope adapter: )"
         << R"(ValueError in schedule_batch: disabled","steps":0,"forced_steps":0,"timeouts":0,"errors":["ValueError"]})";
      return;
    }
    const bool force = role_name == "shadow" && !Env("TWINSCOPE_SCHEDULE_FOLLOW").empty();
    st << R"({"engine":"fake","version":"1.0","supported":true,"mode":")" << (force ? "force" : "record")
       << R"(","message":"","steps":)" << steps << R"(,"forced_steps":)" << (force ? steps : 0)
       << R"(,"timeouts":0,"errors":[],"warnings":["fake: kv_blocks 10 < 20"],"capacity":{"kv_blocks":10}})";
  };
  write_status(0);
  // A demo server's shadow that follows a schedule file runs it by itself and exits at its end.
  if (Flag(argc, argv, "--exit-after-schedule") && !Arg(argc, argv, "--follow", "").empty()) {
    if (!life.empty()) std::ofstream(life, std::ios::app) << "follow " << Arg(argc, argv, "--follow", "") << " 0\n";
    return 0;
  }
  if (fake_adapter && !Env("TWINSCOPE_SCHEDULE_OUT").empty())
    std::ofstream(Env("TWINSCOPE_SCHEDULE_OUT")) << R"({"type":"header","version":2,"engine":"fake"})"
                                                 << "\n";
  struct sigaction sa {};
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0) {
    std::perror("test_server: bind/listen");
    return 2;
  }
  int served = 0;
  while (!g_stop) {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) continue;  // EINTR on SIGTERM: the loop checks g_stop
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    // Read a body of Content-Length bytes, if any.
    size_t head = req.find("\r\n\r\n");
    size_t want = 0;
    if (auto cl = req.find("Content-Length: "); cl != std::string::npos)
      want = std::strtoul(req.c_str() + cl + 16, nullptr, 10);
    while (head != std::string::npos && req.size() < head + 4 + want) {
      ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    if (req.empty()) {  // a connect probe (the mirror's /health): no request
      close(c);
      continue;
    }
    const bool health = req.rfind("GET /health", 0) == 0;
    std::string body = health ? (never_healthy ? "starting" : "ok")
                              : std::string("role=") + (role ? role : "?") + " port=" + std::to_string(port);
    const int status = health && never_healthy ? 503 : 200;
    std::string resp = "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Service Unavailable") +
                       "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body;
    send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
    close(c);
    if (!health && !record.empty()) {
      const std::string first_line = req.substr(0, req.find("\r\n"));
      const size_t sp1 = first_line.find(' '), sp2 = first_line.rfind(' ');
      std::ofstream(record, std::ios::app)
          << "{\"role\":" << Quoted(role_name) << ",\"method\":" << Quoted(first_line.substr(0, sp1))
          << ",\"path\":" << Quoted(first_line.substr(sp1 + 1, sp2 - sp1 - 1))
          << ",\"id\":" << Quoted(HeaderValue(req, "X-Request-Id"))
          << ",\"hint\":" << Quoted(HeaderValue(req, "X-Hint"))
          << ",\"body\":" << Quoted(head == std::string::npos ? "" : req.substr(head + 4))
          << ",\"adapter\":" << Quoted(Env("TWINSCOPE_ENGINE_ADAPTER"))
          << ",\"pythonpath\":" << Quoted(Env("PYTHONPATH"))
          << ",\"follow\":" << Quoted(Env("TWINSCOPE_SCHEDULE_FOLLOW")) << ",\"argv\":" << Quoted(args)
          << ",\"at_ns\":" << RealtimeNs() << "}\n";
    }
    if (!health) write_status(served + 1);
    if (!health && exit_after && ++served >= exit_after) return 3;
    if (!health && !exit_after) ++served;
  }
  if (!life.empty()) std::ofstream(life, std::ios::app) << "exit " << role_name << " " << RealtimeNs() << "\n";
  return 0;
}
