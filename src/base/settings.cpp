// The settings table as data and the one validation policy (base/settings.h).
#include "base/settings.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "base/log.h"

namespace twinscope::settings {
namespace {

constexpr Setting kTable[] = {
#define TWINSCOPE_SETTING(constant, name, type, readers, def, min, max, choices, shown, help)            \
  {#constant, name,  Type::k##type, k##readers, def, static_cast<double>(min), static_cast<double>(max), \
   choices,   shown, help},
#include "base/settings_table.h"
#undef TWINSCOPE_SETTING
};

std::mutex g_mu;
std::set<std::string>& Warned() {
  static std::set<std::string> s;
  return s;
}

// Logs `warning` once per `key` and process.
void WarnOnce(const std::string& key, const std::string& warning) {
  if (warning.empty()) return;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!Warned().insert(key).second) return;
  }
  LogError("%s", warning.c_str());
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// Is `text` a valid value of `s`? Lists are checked item by item elsewhere.
bool Valid(const Setting& s, const std::string& text) {
  switch (s.type) {
    case Type::kText:
    case Type::kList:
      return true;
    case Type::kFlag:
      return text == "0" || text == "1";
    case Type::kInt: {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || errno == ERANGE) return false;
      return static_cast<double>(v) >= s.min && static_cast<double>(v) <= s.max;
    }
    case Type::kReal: {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !std::isfinite(v)) return false;
      return v >= s.min && v <= s.max;
    }
    case Type::kChoice:
      return Contains(Split(s.choices), text);
  }
  return false;
}

std::string DefaultText(const Setting& s) {
  if (*s.default_value == '\0' || (s.type == Type::kInt && std::strcmp(s.default_value, "-1") == 0 && s.min > -1))
    return *s.shown_default ? s.shown_default : "none";
  return s.default_value;
}

const Setting& Lookup(const char* name) {
  const Setting* s = Find(name);
  if (!s) throw std::logic_error(std::string("not in the settings table: ") + name);
  return *s;
}

// The raw environment text of `name` (nullptr when unset or empty: empty counts as unset).
const char* Raw(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

Parsed Read(const Setting& s) {
  Parsed p = Parse(s, Raw(s.name));
  WarnOnce(s.name, p.warning);
  return p;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const Setting> All() { return kTable; }

const Setting* Find(std::string_view name) {
  for (const Setting& s : kTable)
    if (name == s.name) return &s;
  return nullptr;
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kText:
      return "text";
    case Type::kFlag:
      return "flag";
    case Type::kInt:
      return "integer";
    case Type::kReal:
      return "number";
    case Type::kChoice:
      return "choice";
    case Type::kList:
      return "list";
  }
  return "?";
}

std::string ReadersText(unsigned r) {
  std::vector<std::string> parts;
  if ((r & kBoth) == kBoth) {
    parts.push_back("both");
  } else {
    if (r & kCupti) parts.push_back("cupti");
    if (r & kBlocks) parts.push_back("blocks");
  }
  if (r & kCli) parts.push_back("cli");
  if (r & kProgram) parts.push_back("program");
  if (r & kTools) parts.push_back("tools");
  return Join(parts, ", ");
}

std::string AcceptedText(const Setting& s) {
  switch (s.type) {
    case Type::kText:
      return "any text";
    case Type::kFlag:
      return "0 or 1";
    case Type::kInt:  // a bound of 1e15 or more is no bound a user meets
      return s.max >= 1e15 ? "an integer >= " + Number(s.min) : "an integer in " + Number(s.min) + ".." + Number(s.max);
    case Type::kReal:
      return s.max >= 1e15 ? "a number >= " + Number(s.min) : "a number in " + Number(s.min) + ".." + Number(s.max);
    case Type::kChoice:
      return "one of " + Join(Split(s.choices), ", ");
    case Type::kList:
      return "a comma list of " + Join(Split(s.choices), ", ");
  }
  return "";
}

Parsed Parse(const Setting& s, const char* raw) {
  Parsed p;
  p.text = s.default_value;
  if (!raw || !*raw) return p;
  const std::string text = raw;
  const std::string fallback = "; using the default (" + DefaultText(s) + ")";
  if (s.type == Type::kList) {
    const std::vector<std::string> known = Split(s.choices);
    std::vector<std::string> kept, unknown;
    for (const std::string& item : Split(text)) (Contains(known, item) ? kept : unknown).push_back(item);
    if (!unknown.empty()) {
      p.warning = std::string(s.name) + "=" + text + ": unknown item" + (unknown.size() > 1 ? "s " : " ") +
                  Join(unknown, ",") + " ignored (" + AcceptedText(s) + ")";
    }
    if (kept.empty()) {
      if (!unknown.empty()) p.warning += fallback;
      return p;
    }
    p.text = Join(kept, ",");
    p.from_environment = true;
    return p;
  }
  if (!Valid(s, text)) {
    p.warning = std::string(s.name) + "=" + text + " is not " + AcceptedText(s) + fallback;
    return p;
  }
  p.text = text;
  p.from_environment = true;
  return p;
}

std::string Text(const char* name) { return Read(Lookup(name)).text; }

bool Flag(const char* name) {
  const Setting& s = Lookup(name);
  if (s.type != Type::kFlag) throw std::logic_error(std::string(name) + " is not a flag");
  return Read(s).text == "1";
}

long long Int(const char* name) {
  const Setting& s = Lookup(name);
  if (s.type != Type::kInt) throw std::logic_error(std::string(name) + " is not an integer");
  const std::string t = Read(s).text;
  return t.empty() ? -1 : std::strtoll(t.c_str(), nullptr, 10);
}

double Real(const char* name) {
  const Setting& s = Lookup(name);
  if (s.type != Type::kReal) throw std::logic_error(std::string(name) + " is not a number");
  const std::string t = Read(s).text;
  return t.empty() ? 0 : std::strtod(t.c_str(), nullptr);
}

std::string Choice(const char* name) {
  const Setting& s = Lookup(name);
  if (s.type != Type::kChoice) throw std::logic_error(std::string(name) + " is not a choice");
  return Read(s).text;
}

std::vector<std::string> List(const char* name) {
  const Setting& s = Lookup(name);
  if (s.type != Type::kList) throw std::logic_error(std::string(name) + " is not a list");
  return Split(Read(s).text);
}

nlohmann::json HeaderJson(unsigned readers) {
  nlohmann::json j = nlohmann::json::object();
  nlohmann::json rejected = nlohmann::json::object();
  for (const Setting& s : kTable) {
    if (!(s.readers & readers)) continue;
    const char* raw = Raw(s.name);
    const Parsed p = Read(s);
    if (!p.warning.empty() && raw) rejected[s.name] = raw;
    nlohmann::json v;
    switch (s.type) {
      case Type::kFlag:
        v = p.text == "1";
        break;
      case Type::kInt:
        v = p.text.empty() || (p.text == "-1" && s.min > -1)
                ? nlohmann::json(nullptr)
                : nlohmann::json(std::strtoll(p.text.c_str(), nullptr, 10));
        break;
      case Type::kReal:
        v = p.text.empty() ? 0.0 : std::strtod(p.text.c_str(), nullptr);
        break;
      case Type::kList:
        v = Split(p.text);
        break;
      default:
        v = p.text.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.text);
    }
    j[s.name] = std::move(v);
  }
  if (!rejected.empty()) j["rejected"] = std::move(rejected);
  return j;
}

std::string ClosestName(std::string_view name) {
  constexpr std::string_view kPrefix = "TWINSCOPE_";
  std::string_view tail = name.substr(0, kPrefix.size()) == kPrefix ? name.substr(kPrefix.size()) : name;
  const Setting* best = nullptr;
  size_t best_d = 0;
  for (const Setting& s : kTable) {
    const size_t d = EditDistance(tail, std::string_view(s.name).substr(kPrefix.size()));
    if (!best || d < best_d) best = &s, best_d = d;
  }
  return best ? best->name : "";
}

std::vector<std::string> WarnUnknown(char** envp) {
  std::vector<std::string> out;
  for (char** e = envp; e && *e; ++e) {
    const std::string_view kv = *e;
    if (kv.rfind("TWINSCOPE_", 0) != 0) continue;
    const std::string name(kv.substr(0, kv.find('=')));
    if (Find(name)) continue;
    const std::string w = name + " is not a twinscope setting and is ignored; did you mean " + ClosestName(name) +
                          "? (the settings: README.md, \"Configuration\")";
    out.push_back(w);
    WarnOnce("unknown:" + name, w);
  }
  return out;
}

std::string ReadmeTable() {
  std::string t = "| variable | read by | meaning | values | default |\n|---|---|---|---|---|\n";
  for (const Setting& s : kTable) {
    std::string def = *s.shown_default ? s.shown_default : std::string("`") + s.default_value + "`";
    if (!*s.shown_default && !*s.default_value) def = "none";
    t += std::string("| `") + s.name + "` | " + ReadersText(s.readers) + " | " + s.help + " | " + AcceptedText(s) +
         " | " + def + " |\n";
  }
  return t;
}

void ResetWarningsForTest() {
  std::lock_guard<std::mutex> lock(g_mu);
  Warned().clear();
}

}  // namespace twinscope::settings
