#include "base/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace twinscope {

static bool Quiet() {
  const char* q = std::getenv("TWINSCOPE_QUIET");
  return q && std::strcmp(q, "1") == 0;
}

static void VLog(const char* fmt, va_list ap) {
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  if (n < 0) return;
  std::fprintf(stderr, "twinscope: %s\n", buf);
}

void LogInfo(const char* fmt, ...) {
  if (Quiet()) return;
  va_list ap;
  va_start(ap, fmt);
  VLog(fmt, ap);
  va_end(ap);
}

void LogError(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VLog(fmt, ap);
  va_end(ap);
}

long long EnvInt(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0') {
    LogError("ignoring %s=%s: not an integer; using %lld", name, v, fallback);
    return fallback;
  }
  return x;
}

std::string EnvString(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

}  // namespace twinscope
