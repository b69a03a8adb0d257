// The processes of a run for the merged views (export.h, RunProcesses): who each one is, what it
// launched and lost, and how its clock maps onto CLOCK_REALTIME (docs/processes.md, "Several hosts").
#include <map>
#include <set>

#include "views/export/export.h"

namespace twinscope::exporters {
namespace {

uint64_t Counter(const RunTrace& t, const char* key) {
  auto c = t.last_status.find("counters");
  if (c == t.last_status.end() || !c->is_object()) return 0;
  auto v = c->find(key);
  return v != c->end() && v->is_number_unsigned() ? v->get<uint64_t>() : 0;
}

// CUPTI clock -> CLOCK_REALTIME from the header's clock pair (read together by the collector at
// start), as the join computes it (docs/join.md). False if the header has none.
bool ClockPair(const nlohmann::json& h, int64_t* offset) {
  auto c = h.find("clock");
  if (c == h.end() || !c->is_object()) return false;
  auto cupti = c->find("cupti_ns"), real = c->find("realtime_ns");
  if (cupti == c->end() || real == c->end() || !cupti->is_number_integer() || !real->is_number_integer()) return false;
  *offset = real->get<int64_t>() - cupti->get<int64_t>();
  return true;
}

}  // namespace

std::vector<RunProcess> RunProcesses(const RunSide& side, size_t* without_work, std::vector<std::string>* unreadable) {
  std::vector<RunProcess> out;
  std::set<std::string> hosts;
  for (const auto& t : side.traces)
    if (t.gpu_work()) hosts.insert(t.process.host);
  size_t skipped = 0;
  for (const auto& t : side.traces) {
    if (t.end == "unreadable") {
      if (unreadable) unreadable->push_back(t.error);
      continue;
    }
    if (!t.gpu_work()) {
      ++skipped;
      continue;
    }
    RunProcess p;
    p.trace = t.path;
    p.role = t.role;
    p.side = side.name;
    p.pid = t.process.pid;
    p.ppid = t.process.ppid;
    p.host = t.process.host;
    p.command = t.process.Command();
    p.rank = t.process.rank;
    p.local_rank = t.process.local_rank;
    p.world_size = t.process.world_size;
    p.top = t.process.top;
    p.start_realtime_ns = t.process.start_realtime_ns;
    p.aligned = ClockPair(t.header, &p.to_realtime_ns);
    p.launches = t.role == "shadow" ? 0 : t.Launches();
    p.traced_launches = t.role == "shadow" ? t.Launches() : 0;
    p.kernel_records = t.kernel_records;
    p.block_records = t.block_records;
    p.kernel_records_missing = Counter(t, "kernel_records_missing");
    p.cupti_dropped = Counter(t, "cupti_dropped_records");
    p.writer_dropped = Counter(t, "writer_dropped_records");
    p.end = t.end;
    std::string command = p.command.empty() ? "?" : p.command;
    if (command.size() > 60) command = command.substr(0, 57) + "...";
    p.label = command + " (pid " + std::to_string(p.pid);
    if (p.rank) p.label += ", rank " + std::to_string(*p.rank);
    if (hosts.size() > 1) p.label += ", host " + p.host;
    if (!p.role.empty()) p.label += ", " + p.role;
    p.label += ")";
    out.push_back(std::move(p));
  }
  std::map<int64_t, int> pid_uses;
  for (const auto& p : out) ++pid_uses[p.pid];
  std::map<std::string, int64_t> host_index;
  for (const auto& p : out) host_index.emplace(p.host, 0);
  int64_t n = 0;
  for (auto& [host, index] : host_index) index = n++;
  for (size_t i = 0; i < out.size(); ++i) {
    RunProcess& p = out[i];
    const int64_t ordinal = host_index.size() > 1 ? host_index[p.host] : static_cast<int64_t>(i);
    p.group_pid = pid_uses[p.pid] == 1 && p.pid > 0 ? p.pid : (ordinal + 1) * 10000000 + p.pid;
  }
  if (without_work) *without_work = skipped;
  return out;
}

std::string AlignmentText(const std::vector<RunProcess>& processes) {
  std::set<std::string> hosts;
  size_t unaligned = 0;
  for (const auto& p : processes) {
    hosts.insert(p.host.empty() ? "?" : p.host);
    unaligned += p.aligned ? 0 : 1;
  }
  std::string list;
  for (const auto& h : hosts) list += (list.empty() ? "" : ", ") + h;
  const std::string where = (hosts.size() == 1 ? "host " : std::to_string(hosts.size()) + " hosts: ") + list;
  if (unaligned == 0) return "CLOCK_REALTIME through each trace's clock pair (" + where + ")";
  if (unaligned == processes.size())
    return "timestamps as recorded: no trace has a clock pair (" + where +
           (hosts.size() > 1 ? "; processes of different hosts are NOT aligned)" : ")");
  return "CLOCK_REALTIME through each trace's clock pair; " + std::to_string(unaligned) +
         " trace(s) without one kept as recorded and may be misplaced (" + where + ")";
}

}  // namespace twinscope::exporters
