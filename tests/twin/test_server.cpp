// A tiny HTTP server for the `twin --serve` tests: answers GET /health (200,
// or 503 with --never-healthy) and any other request with 200 and a body that
// names its role (TWINSCOPE_ROLE) and port. Port from --port or
// TWINSCOPE_PORT. Writes its pid to --pid-file. Exits 0 on SIGTERM; with
// --exit-after-requests N it exits 3 after answering N non-health requests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

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
    if (!health && exit_after && ++served >= exit_after) return 3;
  }
  return 0;
}
