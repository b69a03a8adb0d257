// Name: a launch's kernel, demangled or key-path name held once per distinct string (interned), 8 bytes a launch.
#pragma once

#include <compare>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

namespace twinscope::join {

// An immutable string shared by every Name of the same value: the strings live in one process-wide table that
// only grows (one copy per distinct name; a join holds its traces' kernel names and key paths, not one copy a
// launch: docs/join.md, "Reads"). Reads like a const std::string; thread-safe.
class Name {
 public:
  Name() : s_(&Empty()) {}
  Name(std::string_view s) : s_(Intern(s)) {}  // NOLINT: implicit, as a std::string is
  Name(const std::string& s) : s_(Intern(s)) {}
  Name(const char* s) : s_(Intern(s)) {}

  const std::string& str() const { return *s_; }
  operator const std::string&() const { return *s_; }  // NOLINT
  operator std::string_view() const { return *s_; }    // NOLINT

  bool empty() const { return s_->empty(); }
  size_t size() const { return s_->size(); }
  size_t length() const { return s_->size(); }
  const char* c_str() const { return s_->c_str(); }
  const char* data() const { return s_->data(); }
  char operator[](size_t i) const { return (*s_)[i]; }
  char front() const { return s_->front(); }
  char back() const { return s_->back(); }
  std::string::const_iterator begin() const { return s_->begin(); }
  std::string::const_iterator end() const { return s_->end(); }
  size_t find(std::string_view v, size_t pos = 0) const { return s_->find(v, pos); }
  size_t find(char c, size_t pos = 0) const { return s_->find(c, pos); }
  size_t rfind(std::string_view v, size_t pos = std::string::npos) const { return s_->rfind(v, pos); }
  size_t rfind(char c, size_t pos = std::string::npos) const { return s_->rfind(c, pos); }
  size_t find_first_of(std::string_view v, size_t pos = 0) const { return s_->find_first_of(v, pos); }
  size_t find_last_of(std::string_view v, size_t pos = std::string::npos) const { return s_->find_last_of(v, pos); }
  std::string substr(size_t pos = 0, size_t n = std::string::npos) const { return s_->substr(pos, n); }
  int compare(std::string_view v) const { return std::string_view(*s_).compare(v); }
  bool starts_with(std::string_view v) const { return std::string_view(*s_).starts_with(v); }
  bool ends_with(std::string_view v) const { return std::string_view(*s_).ends_with(v); }

  // Equal values are one table entry: equality is the pointer's.
  friend bool operator==(const Name& a, const Name& b) { return a.s_ == b.s_; }
  friend std::strong_ordering operator<=>(const Name& a, const Name& b) { return *a.s_ <=> *b.s_; }
  friend bool operator==(const Name& a, const std::string& b) { return *a.s_ == b; }
  friend bool operator==(const Name& a, std::string_view b) { return *a.s_ == b; }
  friend bool operator==(const Name& a, const char* b) { return *a.s_ == b; }
  friend std::strong_ordering operator<=>(const Name& a, const std::string& b) { return *a.s_ <=> b; }
  friend std::string operator+(const Name& a, const std::string& b) { return *a.s_ + b; }
  friend std::string operator+(const std::string& a, const Name& b) { return a + *b.s_; }
  friend std::string operator+(const Name& a, const char* b) { return *a.s_ + b; }
  friend std::string operator+(const char* a, const Name& b) { return a + *b.s_; }
  friend std::string operator+(const Name& a, char b) { return *a.s_ + b; }
  friend std::string operator+(char a, const Name& b) { return a + *b.s_; }

  friend std::ostream& operator<<(std::ostream& o, const Name& n) { return o << *n.s_; }

  // Distinct names in the table (tests, benches).
  static size_t TableSize();

 private:
  static const std::string& Empty();
  static const std::string* Intern(std::string_view s);
  const std::string* s_;
};

inline void to_json(nlohmann::json& j, const Name& n) { j = n.str(); }
inline void from_json(const nlohmann::json& j, Name& n) { n = Name(j.get<std::string>()); }

}  // namespace twinscope::join

template <>
struct std::hash<twinscope::join::Name> {
  size_t operator()(const twinscope::join::Name& n) const { return std::hash<std::string>()(n.str()); }
};
