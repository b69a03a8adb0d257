#include "launchkey/launch_key.h"

#include <atomic>

namespace twinscope {

namespace {
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
  return h;
}
}  // namespace

uint64_t LaunchKeyHash(std::string_view path, std::string_view kernel, uint32_t ordinal, Dim3 grid, Dim3 block) {
  uint64_t h = Fnv(kFnvOffset, path);
  h = Fnv(h, "|");
  h = Fnv(h, kernel);
  h = Fnv(h, "|");
  const uint32_t tail[7] = {ordinal, grid.x, grid.y, grid.z, block.x, block.y, block.z};
  unsigned char bytes[sizeof tail];
  for (size_t i = 0; i < 7; ++i)
    for (size_t b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<unsigned char>(tail[i] >> (8 * b));
  return Fnv(h, std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

namespace {
// Whether path[0, end) ends an element: "...#<digits>".
bool EndsAnElement(std::string_view path, size_t end) {
  size_t d = end;
  while (d > 0 && path[d - 1] >= '0' && path[d - 1] <= '9') --d;
  return d < end && d > 0 && path[d - 1] == '#';
}
}  // namespace

std::string_view TopLevelRange(std::string_view path) {
  for (size_t i = path.find('/'); i != std::string_view::npos; i = path.find('/', i + 1))
    if (EndsAnElement(path, i)) return path.substr(0, i);
  return EndsAnElement(path, path.size()) ? path : path.substr(0, path.find('/'));
}

uint64_t RangeStack::NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

RangeStack::RangeStack() { frames_.push_back(Frame{}); }
RangeStack::~RangeStack() = default;

void RangeStack::Push(std::string_view domain, std::string_view name) {
  std::string label = domain.empty() ? std::string(name) : std::string(domain) + "::" + std::string(name);
  uint32_t occurrence = frames_.back().child_counts[label]++;
  Frame f;
  f.domain = domain;
  f.name = name;
  f.path = frames_.back().path;
  if (!f.path.empty()) f.path += '/';
  f.path += label;
  f.path += '#';
  f.path += std::to_string(occurrence);
  frames_.push_back(std::move(f));
}

bool RangeStack::Pop(std::string_view domain) {
  for (size_t i = frames_.size(); i-- > 1;) {
    if (frames_[i].domain == domain) {
      // Ranges of other domains opened inside it close with it.
      frames_.resize(i);
      return true;
    }
  }
  return false;
}

std::string_view RangeStack::InnermostName(std::string_view domain) const {
  for (size_t i = frames_.size(); i-- > 1;)
    if (frames_[i].domain == domain) return frames_[i].name;
  return {};
}

LaunchKeyParts RangeStack::NextLaunch(std::string_view kernel, Dim3 grid, Dim3 block) {
  Frame& f = frames_.back();
  LaunchKeyParts k;
  k.path = f.path;
  auto it = f.kernel_counts.find(kernel);
  if (it == f.kernel_counts.end()) it = f.kernel_counts.emplace(std::string(kernel), 0).first;
  k.ordinal = it->second++;
  k.hash = LaunchKeyHash(k.path, kernel, k.ordinal, grid, block);
  return k;
}

namespace {
// The thread's stack lives on the heap behind trivially destructible
// thread_locals, so a call after this thread's thread_local destructors have
// run (glibc runs the main thread's before atexit handlers, where collectors
// flush) finds a null pointer, never a destroyed object.
thread_local bool t_stack_gone = false;
struct StackOwner {
  ~StackOwner() {
    delete range_stack_detail::t_stack;
    range_stack_detail::t_stack = nullptr;
    t_stack_gone = true;
  }
};
thread_local StackOwner t_owner;
}  // namespace

namespace range_stack_detail {
thread_local constinit RangeStack* t_stack = nullptr;

RangeStack& MakeThreadRangeStack() {
  if (t_stack) return *t_stack;
  if (t_stack_gone) {
    // Past this thread's destructors (process exit): an empty stack that is
    // never destroyed. Keys made here have an empty path.
    static RangeStack* const late = new RangeStack();
    return *late;
  }
  (void)&t_owner;  // odr-use: registers the owner's destructor for this thread
  t_stack = new RangeStack();
  return *t_stack;
}
}  // namespace range_stack_detail

}  // namespace twinscope
