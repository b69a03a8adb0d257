// Messages from injected collectors to the watched program's stderr, always
// prefixed "twinscope: " so users can tell them from their program's output.
#pragma once

#include <cstdarg>
#include <exception>
#include <string>

namespace twinscope {

void LogInfo(const char* fmt, ...) __attribute__((format(printf, 1, 2)));   // silenced by TWINSCOPE_QUIET=1
void LogError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // always printed

// Runs `fn` and swallows every exception: the firewall for entry points that
// the driver, CUPTI or the Sanitizer call. The first failure at each `where`
// is reported once on stderr; `*disabled` (if given) is set so the caller can
// stop collecting and leave the program running.
template <typename Fn>
void Firewall(const char* where, Fn&& fn, bool* disabled = nullptr) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    static thread_local bool reported = false;
    if (!reported) LogError("internal error in %s: %s; collection stops, the program continues", where, e.what());
    reported = true;
    if (disabled) *disabled = true;
  } catch (...) {
    static thread_local bool reported = false;
    if (!reported) LogError("unknown internal error in %s; collection stops, the program continues", where);
    reported = true;
    if (disabled) *disabled = true;
  }
}

// Integer environment variable, or `fallback` if unset or malformed (a
// malformed value is reported once).
long long EnvInt(const char* name, long long fallback);
std::string EnvString(const char* name, const std::string& fallback = "");

}  // namespace twinscope
