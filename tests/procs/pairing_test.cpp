// Pairing of a primary run's processes with its shadow run's: rank, tree, command line, overrides.
#include "procs/pairing.h"

#include <gtest/gtest.h>

namespace twinscope::procs {
namespace {

ProcessRef Proc(uint32_t pid, std::vector<std::string> cmd, uint64_t start, uint64_t work, size_t depth = 1,
                std::optional<int64_t> rank = std::nullopt) {
  ProcessRef p;
  p.pid = pid;
  p.command_line = std::move(cmd);
  p.start_realtime_ns = start;
  p.gpu_work = work;
  p.top = depth == 0;
  for (size_t i = 0; i < depth; ++i) p.ancestors.push_back(pid - 1 - static_cast<uint32_t>(i));
  p.rank = rank;
  return p;
}

const std::vector<std::string> kWorker(int fd) {
  return {"/usr/bin/python3", "-c",
          "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=" + std::to_string(fd) + ")",
          "--multiprocessing-fork"};
}

TEST(Pairing, RanksPairWhateverTheStartOrder) {
  std::vector<ProcessRef> p = {Proc(10, {"python3", "train.py"}, 100, 5, 1, 0),
                               Proc(11, {"python3", "train.py"}, 200, 5, 1, 1)};
  // The shadow's rank 1 started first.
  std::vector<ProcessRef> s = {Proc(20, {"python3", "train.py"}, 100, 5, 1, 1),
                               Proc(21, {"python3", "train.py"}, 200, 5, 1, 0)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].primary, 0u);
  EXPECT_EQ(r.pairs[0].shadow, 1u);
  EXPECT_EQ(r.pairs[0].rule, PairRule::kRank);
  EXPECT_EQ(r.pairs[0].label, "rank 0");
  EXPECT_EQ(r.pairs[1].primary, 1u);
  EXPECT_EQ(r.pairs[1].shadow, 0u);
  EXPECT_EQ(r.pairs[1].label, "rank 1");
  EXPECT_TRUE(r.primary_unpaired.empty());
  EXPECT_TRUE(r.shadow_unpaired.empty());
}

TEST(Pairing, WorkersPairByTreePositionAndStartOrderIgnoringNumbersInTheirCommand) {
  // A parent that launched work and two spawned workers whose command lines differ only in fds.
  std::vector<ProcessRef> p = {Proc(10, {"python3", "mp.py"}, 100, 3, 0), Proc(12, kWorker(7), 300, 200, 1),
                               Proc(11, kWorker(5), 200, 200, 1)};
  std::vector<ProcessRef> s = {Proc(30, kWorker(9), 210, 100, 1), Proc(31, kWorker(11), 310, 100, 1),
                               Proc(29, {"python3", "mp.py"}, 90, 1, 0)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 3u);
  // In the primary's start order: parent, worker started first, worker started second.
  EXPECT_EQ(r.pairs[0].primary, 0u);
  EXPECT_EQ(r.pairs[0].shadow, 2u);
  EXPECT_EQ(r.pairs[1].primary, 2u);  // pid 11 started first
  EXPECT_EQ(r.pairs[1].shadow, 0u);
  EXPECT_EQ(r.pairs[2].primary, 1u);
  EXPECT_EQ(r.pairs[2].shadow, 1u);
  for (const auto& pr : r.pairs) EXPECT_EQ(pr.rule, PairRule::kTree);
  EXPECT_EQ(r.pairs[1].label, "python3 -c #0");
  EXPECT_EQ(r.pairs[2].label, "python3 -c #1");
}

TEST(Pairing, ProcessesWithoutGpuWorkAreSkippedAndCounted) {
  std::vector<ProcessRef> p = {Proc(10, {"torchrun"}, 1, 0, 0), Proc(11, {"python3", "a.py"}, 2, 9)};
  std::vector<ProcessRef> s = {Proc(20, {"python3", "a.py"}, 2, 4), Proc(21, {"python3", "compile_worker"}, 3, 0)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].primary, 1u);
  EXPECT_EQ(r.pairs[0].shadow, 0u);
  EXPECT_EQ(r.primary_without_work, 1u);
  EXPECT_EQ(r.shadow_without_work, 1u);
}

TEST(Pairing, DepthSeparatesSameCommandsThenCommandAloneStillPairs) {
  // Same command at depth 1 on the primary and depth 2 on the shadow (an extra shell in between).
  std::vector<ProcessRef> p = {Proc(10, {"./server", "--port", "8001"}, 1, 5, 1), Proc(11, {"./other"}, 2, 5, 1)};
  std::vector<ProcessRef> s = {Proc(20, {"./server", "--port", "8002"}, 1, 5, 2), Proc(21, {"./third"}, 2, 5, 1)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].rule, PairRule::kCommand);
  EXPECT_EQ(r.pairs[0].shadow, 0u);
  // ./other and ./third are then the only ones left: paired, and said so.
  EXPECT_EQ(r.pairs[1].rule, PairRule::kOnly);
  Pairing r2 = PairProcesses({p[1]}, {s[1]});
  ASSERT_EQ(r2.pairs.size(), 1u);
  EXPECT_EQ(r2.pairs[0].rule, PairRule::kOnly);
  ASSERT_EQ(r2.notes.size(), 1u);
  EXPECT_NE(r2.notes[0].find("their commands differ"), std::string::npos);
  // With both left over, two on each side and different commands: unpaired, listed.
  std::vector<ProcessRef> p3 = {p[1], Proc(12, {"./x"}, 3, 1)};
  std::vector<ProcessRef> s3 = {s[1], Proc(22, {"./y"}, 3, 1)};
  Pairing r3 = PairProcesses(p3, s3);
  EXPECT_TRUE(r3.pairs.empty());
  EXPECT_EQ(r3.primary_unpaired.size(), 2u);
  EXPECT_EQ(r3.shadow_unpaired.size(), 2u);
}

TEST(Pairing, UserPairsWinAndBadOnesAreSaid) {
  std::vector<ProcessRef> p = {Proc(10, {"a"}, 1, 5, 1, 0), Proc(11, {"a"}, 2, 5, 1, 1)};
  std::vector<ProcessRef> s = {Proc(20, {"a"}, 1, 5, 1, 0), Proc(21, {"a"}, 2, 5, 1, 1)};
  PairingOptions o;
  o.by_pid = {{10, 21}, {99, 20}};
  Pairing r = PairProcesses(p, s, o);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].rule, PairRule::kUser);
  EXPECT_EQ(r.pairs[0].shadow, 1u);
  // The rest: rank 1 of the primary has no free rank-1 partner, so the tree pairs it with pid 20.
  EXPECT_EQ(r.pairs[1].primary, 1u);
  EXPECT_EQ(r.pairs[1].shadow, 0u);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("no primary process 99"), std::string::npos);
}

// Several hosts: the same pid on two hosts. --pair by that pid is said to be ambiguous; the first
// started is paired, and the other pairs by rank.
TEST(Pairing, UserPairOfAPidHeldOnTwoHostsIsSaid) {
  std::vector<ProcessRef> p = {Proc(10, {"a"}, 1, 5, 1, 0), Proc(10, {"a"}, 2, 5, 1, 1)};
  std::vector<ProcessRef> s = {Proc(20, {"a"}, 1, 5, 1, 0), Proc(21, {"a"}, 2, 5, 1, 1)};
  PairingOptions o;
  o.by_pid = {{10, 20}};
  Pairing r = PairProcesses(p, s, o);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].rule, PairRule::kUser);
  EXPECT_EQ(r.pairs[0].primary, 0u);
  EXPECT_EQ(r.pairs[0].shadow, 0u);
  EXPECT_EQ(r.pairs[1].rule, PairRule::kRank);
  EXPECT_EQ(r.pairs[1].primary, 1u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("--pair 10=20: pid 10 is held by 2 primary processes (several hosts, or a pid reused)"),
            std::string::npos)
      << r.notes[0];
}

TEST(Pairing, RanksOnOneSideOnlyOrHeldTwiceFallBackToTheTree) {
  std::vector<ProcessRef> p = {Proc(10, {"a"}, 1, 5, 1, 0), Proc(11, {"a"}, 2, 5, 1, 0)};
  std::vector<ProcessRef> s = {Proc(20, {"a"}, 1, 5, 1), Proc(21, {"a"}, 2, 5, 1)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].rule, PairRule::kTree);
  EXPECT_EQ(r.pairs[0].shadow, 0u);
  EXPECT_EQ(r.pairs[1].shadow, 1u);
  bool said = false;
  for (const auto& n : r.notes) said |= n.find("primary side only") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Pairing, LabelsAreUnique) {
  std::vector<ProcessRef> p = {Proc(10, {"a"}, 1, 5, 1), Proc(11, {"a"}, 2, 5, 2)};
  std::vector<ProcessRef> s = {Proc(20, {"a"}, 1, 5, 1), Proc(21, {"a"}, 2, 5, 2)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_NE(r.pairs[0].label, r.pairs[1].label);
}

// Parallel workers race to build their trace headers: the header times say nothing of which worker is
// which. They pair in the launcher's spawn order (pid), or by local rank where the launcher gave one.
TEST(Pairing, ParallelWorkersPairBySpawnOrderNotByHeaderTime) {
  std::vector<ProcessRef> p = {Proc(11, kWorker(5), 300, 100, 1), Proc(12, kWorker(6), 200, 100, 1)};
  std::vector<ProcessRef> s = {Proc(21, kWorker(5), 200, 100, 1), Proc(22, kWorker(6), 300, 100, 1)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) EXPECT_EQ(pr.primary, pr.shadow) << pr.label;  // 11-21, 12-22: never crosswise
  // A local rank wins over the pid.
  p[0].local_rank = 1;
  p[1].local_rank = 0;
  s[0].local_rank = 0;
  s[1].local_rank = 1;
  r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) EXPECT_NE(pr.primary, pr.shadow) << pr.label;  // 11-22, 12-21
  // And a device where neither has a local rank.
  for (auto* v : {&p, &s})
    for (auto& x : *v) x.local_rank.reset();
  p[0].devices = {1};
  p[1].devices = {0};
  s[0].devices = {0};
  s[1].devices = {1};
  r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) EXPECT_NE(pr.primary, pr.shadow) << pr.label;
}

// One extra early process of the same command on one side (a warm-up worker) must not shift every pair.
TEST(Pairing, UnequalGroupsPairByBestMatchAndNameTheOneLeft) {
  std::vector<ProcessRef> p = {Proc(10, kWorker(3), 100, 2, 1), Proc(11, kWorker(4), 200, 100, 1),
                               Proc(12, kWorker(5), 300, 300, 1)};
  std::vector<ProcessRef> s = {Proc(21, kWorker(4), 200, 40, 1), Proc(22, kWorker(5), 300, 120, 1)};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.pairs[0].primary, 1u);
  EXPECT_EQ(r.pairs[0].shadow, 0u);
  EXPECT_EQ(r.pairs[1].primary, 2u);
  EXPECT_EQ(r.pairs[1].shadow, 1u);
  ASSERT_EQ(r.primary_unpaired, std::vector<size_t>{0});
  bool said = false;
  for (const auto& n : r.notes)
    said |= n.find("3 primary and 2 shadow processes run") != std::string::npos &&
            n.find("best match") != std::string::npos && n.find("primary pid 10 left") != std::string::npos;
  EXPECT_TRUE(said);
  // The extra one on the shadow side, last: the same.
  Pairing r2 = PairProcesses({p[1], p[2]}, {s[0], s[1], Proc(23, kWorker(9), 400, 1, 1)});
  ASSERT_EQ(r2.pairs.size(), 2u);
  EXPECT_EQ(r2.pairs[0].shadow, 0u);
  EXPECT_EQ(r2.pairs[1].shadow, 1u);
  EXPECT_EQ(r2.shadow_unpaired, std::vector<size_t>{2});
}

// Two hosts whose clocks are skewed: the processes pair host by host, never by their header times.
TEST(Pairing, HostsAreMappedByNameOrSortedName) {
  auto on = [](ProcessRef p, const char* host) {
    p.host = host;
    return p;
  };
  // Host b's clock runs 10 s behind: its worker's header time is the earliest on each side.
  std::vector<ProcessRef> p = {on(Proc(100, kWorker(1), 20'000, 50, 1), "a"),
                               on(Proc(100, kWorker(1), 10'000, 50, 1), "b")};
  std::vector<ProcessRef> s = {on(Proc(200, kWorker(1), 30'000, 50, 1), "a"),
                               on(Proc(201, kWorker(1), 20'500, 50, 1), "b")};
  Pairing r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) EXPECT_EQ(p[pr.primary].host, s[pr.shadow].host) << pr.label;
  // The shadow ran on two other hosts: mapped by sorted name (a=c, b=d), and said.
  s[0].host = "c";
  s[1].host = "d";
  r = PairProcesses(p, s);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) EXPECT_EQ(pr.primary, pr.shadow) << pr.label;
  bool said = false;
  for (const auto& n : r.notes) said |= n.find("mapped by sorted name (primary=shadow: a=c, b=d)") != std::string::npos;
  EXPECT_TRUE(said);
}

// --pair by a pid that two primary processes hold (two hosts): the second --pair reaches the second holder.
TEST(Pairing, UserPairTriesEveryHolderOfAPid) {
  auto on = [](ProcessRef p, const char* host) {
    p.host = host;
    return p;
  };
  std::vector<ProcessRef> p = {on(Proc(10, {"a"}, 1, 5, 1), "h1"), on(Proc(10, {"b"}, 2, 5, 1), "h2")};
  std::vector<ProcessRef> s = {on(Proc(20, {"x"}, 1, 5, 1), "h1"), on(Proc(21, {"y"}, 2, 5, 1), "h2")};
  PairingOptions o;
  o.by_pid = {{10, 20}, {10, 21}};
  Pairing r = PairProcesses(p, s, o);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& pr : r.pairs) {
    EXPECT_EQ(pr.rule, PairRule::kUser) << pr.label;
    EXPECT_EQ(pr.primary, pr.shadow) << pr.label;  // each on its own host
  }
}

TEST(Pairing, ShortNames) {
  EXPECT_EQ(ShortName({"/opt/venv/bin/python3", "-u", "/x/train.py", "--lr", "3"}), "python3 train.py");
  EXPECT_EQ(ShortName({"python", "-m", "vllm.entrypoints.openai.api_server"}),
            "python -m vllm.entrypoints.openai.api_server");
  EXPECT_EQ(ShortName({"./server"}), "server");
  EXPECT_EQ(CommandSignature({"x", "--port=8001", "fd7"}), "x --port=# fd#");
}

}  // namespace
}  // namespace twinscope::procs
