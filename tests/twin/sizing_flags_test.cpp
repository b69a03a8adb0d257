// The engines' sizing flags (twin/sizing_flags.h): which engine a command runs, the flags found in both
// forms, and the rule that gives a flag given to one side only to the other side too.
#include "twin/sizing_flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace twinscope::twin {
namespace {

using Args = std::vector<std::string>;

const Args kServe = {"transformers", "serve", "--continuous-batching", "--port", "{port}"};

TEST(SizingFlags, EngineFromTheCommand) {
  std::string why;
  EXPECT_EQ(DetectServingEngine({"/usr/bin/transformers", "serve", "--port", "{port}"}, "auto", &why), "transformers");
  EXPECT_NE(why.find("transformers serve"), std::string::npos) << why;
  EXPECT_EQ(DetectServingEngine({"vllm", "serve", "m"}, "auto", nullptr), "vllm");
  EXPECT_EQ(DetectServingEngine({"python", "-m", "vllm.entrypoints.openai.api_server"}, "auto", nullptr), "vllm");
  EXPECT_EQ(DetectServingEngine({"python3", "-m", "sglang.launch_server", "--model-path", "m"}, "auto", nullptr),
            "sglang");
  EXPECT_EQ(DetectServingEngine({"sglang", "serve", "--model-path", "m"}, "auto", nullptr), "sglang");
  EXPECT_EQ(DetectServingEngine({"./build/bin/twinscope-demo-server", "--engine", "cpu"}, "auto", nullptr), "demo");
  // A wrapper: the adapter's name says which engine it is; an unknown server has no table.
  EXPECT_EQ(DetectServingEngine({"python3", "serve.py"}, "transformers", &why), "transformers");
  EXPECT_EQ(why, "--engine-adapter transformers");
  EXPECT_EQ(DetectServingEngine({"python3", "serve.py"}, "auto", &why), "");
  EXPECT_EQ(DetectServingEngine({"transformers", "chat"}, "auto", nullptr), "");  // not the server
}

TEST(SizingFlags, EveryTableHasItsFlagsOnce) {
  ASSERT_EQ(SizingTables().size(), 4u);
  for (const auto& t : SizingTables()) {
    std::set<std::string> names;
    for (const auto& f : t.flags) {
      ASSERT_FALSE(f.names.empty());
      for (const auto& n : f.names) {
        EXPECT_EQ(n.rfind("--", 0), 0u) << t.engine << " " << n;
        EXPECT_TRUE(names.insert(n).second) << t.engine << " has " << n << " twice";
      }
      for (const auto& n : f.off_names) EXPECT_TRUE(names.insert(n).second) << t.engine << " " << n;
      EXPECT_FALSE(f.what.empty());
    }
    EXPECT_FALSE(t.checked.empty());
  }
  const EngineSizing* tf = FindSizingTable("transformers");
  ASSERT_NE(tf, nullptr);
  std::set<std::string> names;
  for (const auto& f : tf->flags) names.insert(f.names.begin(), f.names.end());
  // transformers 5.17's own names (cli/serve.py): not --cb-max-memory-fraction, not --cb-max-requests.
  EXPECT_EQ(names, (std::set<std::string>{"--continuous-batching", "--cb-num-blocks", "--cb-block-size",
                                          "--cb-max-batch-tokens", "--cb-max-memory-percent", "--cb-use-cuda-graph"}));
}

TEST(SizingFlags, TheDocsTableNamesEveryFlag) {
  std::ifstream f(std::string(TWINSCOPE_SOURCE_DIR) + "/docs/engines.md");
  ASSERT_TRUE(f) << "docs/engines.md";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const size_t begin = doc.find("## Sizing flags");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = doc.substr(begin, doc.find("\n## ", begin + 1) - begin);
  for (const auto& t : SizingTables()) {
    EXPECT_NE(section.find(t.checked.substr(0, t.checked.find(','))), std::string::npos) << t.checked;
    for (const auto& fl : t.flags)
      for (const auto& n : fl.names) EXPECT_NE(section.find("`" + n + "`"), std::string::npos) << t.engine << " " << n;
  }
}

TEST(SizingFlags, FindsBothFormsListsAndSwitches) {
  const EngineSizing& vllm = *FindSizingTable("vllm");
  const auto got = FindSizingSettings(
      vllm, {"--max-num-seqs", "8", "--block-size=32", "--port", "1", "--cudagraph-capture-sizes", "1", "2", "4",
             "--no-enforce-eager", "--max_num_batched_tokens", "2k", "--async-scheduling"});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].flag->names.front(), "--max-num-seqs");
  EXPECT_EQ(got[0].value, "8");
  EXPECT_EQ(got[0].words, (Args{"--max-num-seqs", "8"}));
  EXPECT_EQ(got[1].value, "32");
  EXPECT_EQ(got[1].words, (Args{"--block-size=32"}));
  EXPECT_EQ(got[2].value, "1 2 4");
  EXPECT_EQ(got[2].words.size(), 4u);
  EXPECT_EQ(got[3].flag->names.front(), "--enforce-eager");
  EXPECT_EQ(got[3].value, "off");
  EXPECT_EQ(got[4].flag->names.front(), "--max-num-batched-tokens");  // vLLM takes underscores too
  EXPECT_EQ(got[4].value, "2k");
  EXPECT_EQ(got[5].value, "on");
  // A value that looks like an option is still the value (SGLang's --chunked-prefill-size -1).
  const auto sg = FindSizingSettings(*FindSizingTable("sglang"), {"--chunked-prefill-size", "-1"});
  ASSERT_EQ(sg.size(), 1u);
  EXPECT_EQ(sg[0].value, "-1");
  // SGLang takes no underscores; a flag at the end without its value is marked.
  EXPECT_TRUE(FindSizingSettings(*FindSizingTable("sglang"), {"--max_running_requests", "4"}).empty());
  const auto cut = FindSizingSettings(*FindSizingTable("transformers"), {"--cb-num-blocks"});
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_TRUE(cut[0].missing_value);
}

TEST(SizingFlags, GivenToThePrimaryOnlyReachesTheShadow) {
  const auto a = AlignSizingFlags("transformers", kServe, {"--cb-num-blocks", "512", "--log-level", "info"},
                                  {"--dtype", "float16"}, false);
  EXPECT_EQ(a.primary_args, (Args{"--cb-num-blocks", "512", "--log-level", "info"}));
  EXPECT_EQ(a.shadow_args, (Args{"--dtype", "float16", "--cb-num-blocks", "512"}));
  ASSERT_EQ(a.decisions.size(), 1u);
  EXPECT_EQ(a.decisions[0].action, "copied");
  EXPECT_EQ(a.decisions[0].from, "primary");
  EXPECT_EQ(a.decisions[0].message,
            "--cb-num-blocks 512 given to the primary only: passed to the shadow too, so both have the same capacity");
  EXPECT_EQ(a.shadow_settings.value("--cb-num-blocks", ""), "512");
  EXPECT_EQ(a.primary_settings.value("--continuous-batching", ""), "on");  // from the command
  const auto j = a.ToJson();
  EXPECT_EQ(j["shadow_args"], nlohmann::json(a.shadow_args));
  EXPECT_EQ(j["decisions"][0]["action"], "copied");
}

TEST(SizingFlags, GivenToTheShadowOnlyReachesThePrimaryInTheFormGiven) {
  const auto a =
      AlignSizingFlags("transformers", kServe, {}, {"--cb-max-batch-tokens=256", "--cb-use-cuda-graph"}, false);
  EXPECT_EQ(a.primary_args, (Args{"--cb-max-batch-tokens=256", "--cb-use-cuda-graph"}));
  EXPECT_EQ(a.shadow_args, (Args{"--cb-max-batch-tokens=256", "--cb-use-cuda-graph"}));
  ASSERT_EQ(a.decisions.size(), 2u);
  EXPECT_EQ(a.decisions[0].from, "shadow");
  EXPECT_NE(a.decisions[0].message.find("--cb-max-batch-tokens 256 given to the shadow only: passed to the primary"),
            std::string::npos)
      << a.decisions[0].message;
}

TEST(SizingFlags, OneSideOverridingTheCommandIsCopied) {
  Args cmd = kServe;
  cmd.insert(cmd.end(), {"--cb-num-blocks", "1024"});
  const auto a = AlignSizingFlags("transformers", cmd, {"--cb-num-blocks", "512"}, {}, false);
  EXPECT_EQ(a.shadow_args, (Args{"--cb-num-blocks", "512"}));
  ASSERT_EQ(a.decisions.size(), 1u);
  EXPECT_NE(a.decisions[0].message.find("(the command gives it 1024)"), std::string::npos) << a.decisions[0].message;
  EXPECT_EQ(a.shadow_settings.value("--cb-num-blocks", ""), "512");
  // The same value as the command's: nothing to do.
  const auto same = AlignSizingFlags("transformers", cmd, {"--cb-num-blocks=1024"}, {}, false);
  EXPECT_TRUE(same.decisions.empty());
  EXPECT_TRUE(same.shadow_args.empty());
}

TEST(SizingFlags, BothGivenOtherValuesAreKeptWithAWarning) {
  const auto a = AlignSizingFlags("transformers", kServe, {"--cb-num-blocks", "512"}, {"--cb-num-blocks=256"}, false);
  EXPECT_EQ(a.primary_args, (Args{"--cb-num-blocks", "512"}));
  EXPECT_EQ(a.shadow_args, (Args{"--cb-num-blocks=256"}));
  ASSERT_EQ(a.decisions.size(), 1u);
  EXPECT_EQ(a.decisions[0].action, "differs");
  EXPECT_EQ(a.decisions[0].primary_value, "512");
  EXPECT_EQ(a.decisions[0].shadow_value, "256");
  EXPECT_NE(a.decisions[0].message.find("the shadow's capacity differs"), std::string::npos);
  EXPECT_NE(a.decisions[0].message.find("stops forcing"), std::string::npos);
  // The same value on both: nothing said.
  EXPECT_TRUE(AlignSizingFlags("transformers", kServe, {"--cb-num-blocks", "512"}, {"--cb-num-blocks=512"}, false)
                  .decisions.empty());
  // A switch turned on for one side and off for the other.
  const auto sw = AlignSizingFlags("vllm", {"vllm", "serve", "m"}, {"--enforce-eager"}, {"--no-enforce-eager"}, false);
  ASSERT_EQ(sw.decisions.size(), 1u);
  EXPECT_EQ(sw.decisions[0].action, "differs");
}

TEST(SizingFlags, AMemoryShareIsNotCopiedBetweenTwoServersOnOneGpu) {
  const Args cmd = {"vllm", "serve", "m"};
  const auto live = AlignSizingFlags("vllm", cmd, {"--gpu-memory-utilization", "0.6", "--max-num-seqs", "8"}, {}, true);
  EXPECT_EQ(live.shadow_args, (Args{"--max-num-seqs", "8"}));  // counts are copied, the share is not
  ASSERT_EQ(live.decisions.size(), 2u);
  EXPECT_EQ(live.decisions[0].action, "not copied");
  EXPECT_NE(live.decisions[0].message.find("--concurrent"), std::string::npos);
  // One after the other (or on two GPUs): the share is copied too.
  const auto seq = AlignSizingFlags("vllm", cmd, {"--device-memory-utilization=0.6"}, {}, false);
  EXPECT_EQ(seq.shadow_args, (Args{"--device-memory-utilization=0.6"}));
  EXPECT_EQ(seq.shadow_settings.value("--gpu-memory-utilization", ""), "0.6");  // an alias counts as the flag
}

TEST(SizingFlags, AnUnknownServerGetsNothingCopiedAndIsToldSo) {
  const auto a = AlignSizingFlags("", {"python3", "my_server.py"}, {"--block-size", "32"}, {"--seed", "1"}, false);
  EXPECT_EQ(a.shadow_args, (Args{"--seed", "1"}));
  EXPECT_TRUE(a.decisions.empty());
  EXPECT_EQ(a.unknown_engine_flags, (Args{"--block-size"}));
  EXPECT_NE(a.unknown_engine_message.find("not passed to the other side"), std::string::npos);
  EXPECT_TRUE(AlignSizingFlags("", {"python3", "s.py"}, {"--seed", "1"}, {}, false).unknown_engine_message.empty());
}

TEST(SizingFlags, AReplayCopiesToTheShadowOnly) {
  // twin --replay DIR: the saved primary's flags reach the new shadow; the primary is not run again.
  const auto a = AlignSizingFlags("transformers", kServe, {"--cb-num-blocks", "512"}, {"--cb-block-size", "32"}, false,
                                  /*primary_ran=*/true);
  EXPECT_EQ(a.primary_args, (Args{"--cb-num-blocks", "512"}));
  EXPECT_EQ(a.shadow_args, (Args{"--cb-block-size", "32", "--cb-num-blocks", "512"}));
  ASSERT_EQ(a.decisions.size(), 2u);
  EXPECT_EQ(a.decisions[0].action, "copied");
  EXPECT_EQ(a.decisions[1].action, "differs");
  EXPECT_NE(a.decisions[1].message.find("the saved primary ran with the engine's default"), std::string::npos)
      << a.decisions[1].message;
}

TEST(SizingFlags, ListsAreCopiedWhole) {
  const auto a = AlignSizingFlags("sglang", {"python", "-m", "sglang.launch_server"},
                                  {"--cuda-graph-bs-decode", "1", "2", "8", "--max-running-requests", "16"}, {}, false);
  EXPECT_EQ(a.shadow_args, (Args{"--cuda-graph-bs-decode", "1", "2", "8", "--max-running-requests", "16"}));
  EXPECT_EQ(a.shadow_settings.value("--cuda-graph-bs-decode", ""), "1 2 8");
}

}  // namespace
}  // namespace twinscope::twin
