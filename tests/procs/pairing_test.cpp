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

TEST(Pairing, ShortNames) {
  EXPECT_EQ(ShortName({"/opt/venv/bin/python3", "-u", "/x/train.py", "--lr", "3"}), "python3 train.py");
  EXPECT_EQ(ShortName({"python", "-m", "vllm.entrypoints.openai.api_server"}),
            "python -m vllm.entrypoints.openai.api_server");
  EXPECT_EQ(ShortName({"./server"}), "server");
  EXPECT_EQ(CommandSignature({"x", "--port=8001", "fd7"}), "x --port=# fd#");
}

}  // namespace
}  // namespace twinscope::procs
