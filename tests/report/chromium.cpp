// Headless Chromium over the DevTools protocol pipe (chromium.h): Chromium reads commands on fd 3 and
// writes answers and events on fd 4, each a JSON message ended by a NUL byte.
#include "chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace twinscope::testing_report {

using nlohmann::json;

std::string ChromiumPath() {
  if (const char* env = std::getenv("TWINSCOPE_CHROMIUM"); env && *env) return env;
#ifdef TWINSCOPE_CHROMIUM_PATH
  return TWINSCOPE_CHROMIUM_PATH;
#else
  return "";
#endif
}

std::string InstallHint() {
  return "headless Chromium was not found: install Debian's chromium-headless-shell (scripts/setup-deps.sh does, "
         "as root) and re-run cmake, or set TWINSCOPE_CHROMIUM to a chromium binary";
}

std::string FileUrl(const std::string& path) {
  std::string abs = std::filesystem::absolute(path).lexically_normal().string();
  std::string url = "file://";
  for (char c : abs) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      url.push_back(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      url += buf;
    }
  }
  return url;
}

std::string DecodeBase64(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A console API call or exception as one line of text.
std::string RemoteText(const json& v) {
  if (v.contains("value")) return v["value"].is_string() ? v["value"].get<std::string>() : v["value"].dump();
  if (v.contains("description")) return v["description"].get<std::string>();
  return v.value("type", "?");
}

}  // namespace

Browser::~Browser() {
  if (to_ >= 0) close(to_);
  if (from_ >= 0) close(from_);
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!profile_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(profile_, ec);
  }
}

std::string Browser::LogTail() const {
  std::ifstream f(profile_ + "/chromium.log");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > 3000 ? s.substr(s.size() - 3000) : s;
}

double Browser::CpuSeconds() const {
  if (pid_ <= 0) return 0;
  double ticks = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::vector<std::string> v;
    for (std::string x; fields >> x && v.size() < 15;) v.push_back(x);
    // After the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    if (v.size() < 15 || std::stol(v[2]) != pid_) continue;
    ticks += std::stod(v[11]) + std::stod(v[12]) + std::stod(v[13]) + std::stod(v[14]);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

bool Browser::Start(int width, int height) {
  std::string bin = ChromiumPath();
  if (bin.empty()) {
    error_ = InstallHint();
    return false;
  }
  if (access(bin.c_str(), X_OK) != 0) {
    error_ = bin + ": " + std::strerror(errno) + "; " + InstallHint();
    return false;
  }
  char tmpl[] = "/tmp/twinscope-chromium-XXXXXX";
  if (!mkdtemp(tmpl)) {
    error_ = "mkdtemp failed";
    return false;
  }
  profile_ = tmpl;
  std::vector<std::string> args = {bin,
                                   "--headless",
                                   "--no-sandbox",  // CI runs as root
                                   "--disable-gpu",
                                   "--no-first-run",
                                   "--no-default-browser-check",
                                   "--disable-extensions",
                                   "--disable-dev-shm-usage",
                                   "--hide-scrollbars",
                                   "--mute-audio",
                                   "--remote-debugging-pipe",
                                   "--window-size=" + std::to_string(width) + "," + std::to_string(height),
                                   "--user-data-dir=" + profile_,
                                   "about:blank"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0) {
    error_ = "pipe failed";
    return false;
  }
  std::string log = profile_ + "/chromium.log";
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group, so the destructor ends the browser's helper processes too
    int r = fcntl(to[0], F_DUPFD, 10), w = fcntl(from[1], F_DUPFD, 10);
    dup2(r, 3);
    dup2(w, 4);
    int l = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (l >= 0) {
      dup2(l, 1);
      dup2(l, 2);
    }
    for (int fd = 5; fd < 1024; ++fd) close(fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  to_ = to[1];
  from_ = from[0];
  signal(SIGPIPE, SIG_IGN);

  json targets = Call("Target.getTargets", json::object(), 30, false);
  if (targets.is_null()) return false;
  std::string target;
  for (const auto& t : targets.value("targetInfos", json::array()))
    if (t.value("type", "") == "page") target = t.value("targetId", "");
  if (target.empty()) {
    error_ = "Chromium shows no page target";
    return false;
  }
  json attached = Call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, 30, false);
  if (attached.is_null()) return false;
  session_ = attached.value("sessionId", "");
  for (const char* domain : {"Runtime.enable", "Log.enable", "Page.enable"})
    if (Call(domain, json::object(), 30).is_null()) return false;
  return true;
}

bool Browser::ReadMessage(double timeout_s, json* out) {
  auto start = std::chrono::steady_clock::now();
  while (true) {
    size_t nul = buffer_.find('\0');
    if (nul != std::string::npos) {
      *out = json::parse(buffer_.substr(0, nul), nullptr, false);
      buffer_.erase(0, nul + 1);
      return true;
    }
    double left = timeout_s - Since(start);
    if (left <= 0) {
      error_ = "Chromium did not answer within " + std::to_string(static_cast<int>(timeout_s)) + " s";
      return false;
    }
    pollfd p = {from_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    char buf[1 << 16];
    ssize_t n = read(from_, buf, sizeof buf);
    if (n <= 0) {
      error_ = "Chromium closed the DevTools pipe (it exited?)";
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void Browser::HandleEvent(const json& m) {
  std::string method = m.value("method", "");
  const json& p = m.contains("params") ? m["params"] : json::object();
  if (method == "Runtime.consoleAPICalled") {
    std::string type = p.value("type", "");
    if (type == "error" || type == "assert") {
      std::string text = "console." + type + ":";
      for (const auto& a : p.value("args", json::array())) text += " " + RemoteText(a);
      console_errors_.push_back(text);
    }
  } else if (method == "Runtime.exceptionThrown") {
    const json& d = p.value("exceptionDetails", json::object());
    std::string text = "uncaught: " + d.value("text", "");
    if (d.contains("exception")) text += " " + RemoteText(d["exception"]);
    console_errors_.push_back(text);
  } else if (method == "Log.entryAdded") {
    const json& e = p.value("entry", json::object());
    if (e.value("level", "") == "error") console_errors_.push_back("log: " + e.value("text", ""));
  } else if (method == "Page.loadEventFired") {
    loaded_ = true;
  }
}

json Browser::Call(const std::string& method, json params, double timeout_s, bool session) {
  int id = next_id_++;
  json msg = {{"id", id}, {"method", method}, {"params", std::move(params)}};
  if (session && !session_.empty()) msg["sessionId"] = session_;
  std::string text = msg.dump() + '\0';
  for (size_t off = 0; off < text.size();) {
    ssize_t n = write(to_, text.data() + off, text.size() - off);
    if (n <= 0) {
      error_ = method + ": cannot write to Chromium (it exited?)";
      return nullptr;
    }
    off += static_cast<size_t>(n);
  }
  auto start = std::chrono::steady_clock::now();
  while (true) {
    json m;
    if (!ReadMessage(timeout_s - Since(start), &m)) {
      error_ = method + ": " + error_;
      return nullptr;
    }
    if (m.is_discarded()) continue;
    if (m.contains("id") && m["id"] == id) {
      if (m.contains("error")) {
        error_ = method + ": " + m["error"].dump();
        return nullptr;
      }
      return m.value("result", json::object());
    }
    if (m.contains("method")) HandleEvent(m);
  }
}

bool Browser::Navigate(const std::string& url, double timeout_s) {
  loaded_ = false;
  auto start = std::chrono::steady_clock::now();
  json r = Call("Page.navigate", {{"url", url}}, timeout_s);
  if (r.is_null()) return false;
  if (r.contains("errorText")) {
    error_ = "navigating to " + url + ": " + r["errorText"].get<std::string>();
    return false;
  }
  while (!loaded_) {
    json m;
    if (!ReadMessage(timeout_s - Since(start), &m)) {
      error_ = "waiting for the load event of " + url + ": " + error_;
      return false;
    }
    if (!m.is_discarded() && m.contains("method")) HandleEvent(m);
  }
  return true;
}

json Browser::Evaluate(const std::string& expression, double timeout_s) {
  json r =
      Call("Runtime.evaluate",
           {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}, {"timeout", timeout_s * 1000}},
           timeout_s + 5);
  if (r.is_null()) return nullptr;
  if (r.contains("exceptionDetails")) {
    const json& d = r["exceptionDetails"];
    error_ = "evaluate threw: " + d.value("text", "") +
             (d.contains("exception") ? " " + RemoteText(d["exception"]) : std::string());
    return nullptr;
  }
  const json& v = r.value("result", json::object());
  return v.contains("value") ? v["value"] : json();
}

bool Browser::Screenshot(const std::string& png_path, double timeout_s) {
  json metrics = Call("Page.getLayoutMetrics", json::object(), timeout_s);
  if (metrics.is_null()) return false;
  const json& size = metrics.contains("cssContentSize") ? metrics["cssContentSize"] : metrics["contentSize"];
  const json& view = metrics.contains("cssLayoutViewport") ? metrics["cssLayoutViewport"] : metrics["layoutViewport"];
  double width = view.value("clientWidth", 1400.0), height = size.value("height", 1000.0);
  json shot = Call("Page.captureScreenshot",
                   {{"format", "png"},
                    {"captureBeyondViewport", true},
                    {"clip", {{"x", 0}, {"y", 0}, {"width", width}, {"height", height}, {"scale", 1}}}},
                   timeout_s);
  if (shot.is_null()) return false;
  std::ofstream f(png_path, std::ios::binary | std::ios::trunc);
  std::string bytes = DecodeBase64(shot.value("data", ""));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f || bytes.empty()) {
    error_ = png_path + ": cannot write the screenshot";
    return false;
  }
  return true;
}

}  // namespace twinscope::testing_report
