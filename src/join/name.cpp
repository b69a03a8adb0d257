// The process-wide table of interned names (src/join/name.h).
#include "join/name.h"

#include <mutex>
#include <unordered_set>

namespace twinscope::join {

namespace {

struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct Table {
  std::mutex mu;
  std::unordered_set<std::string, Hash, std::equal_to<>> names;  // node-based: an element's address never changes
};

Table& TheTable() {
  static Table* t = new Table();  // never destroyed: Names may outlive static destructors
  return *t;
}

}  // namespace

const std::string& Name::Empty() {
  static const std::string* e = Intern("");
  return *e;
}

const std::string* Name::Intern(std::string_view s) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.names.find(s);
  if (it == t.names.end()) it = t.names.emplace(s).first;
  return &*it;
}

size_t Name::TableSize() {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.names.size();
}

}  // namespace twinscope::join
