// twinscope-demo-client: sends N concurrent chat requests to an
// OpenAI-compatible server (RunChatLoad, chat_client.h) and prints each
// request's tokens, time to first token and latency; with --check it also
// checks every reply against the text the demo server must produce for it
// (the same seed and prompt always give the same words). Exit 0 when every
// request succeeded (and matched), 1 otherwise. With --mirror-latency N it
// then measures what a mirror adds to the latency (mirror_latency.h): the
// client of `twinscope demo`, which runs this binary rather than linking it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "client/chat_client.h"
#include "client/mirror_latency.h"
#include "net/url.h"
#include "server/text.h"

int main(int argc, char** argv) {
  using namespace twinscope::demo;
  ChatLoadOptions o;
  uint64_t seed = 0;
  bool no_stream = false, check = false, quiet = false;
  double timeout_s = 300;
  std::string json_out;
  MirrorLatencyOptions lo;
  lo.pairs = 0;
  std::string latency_json;
  CLI::App app{"twinscope-demo-client: send concurrent chat completion requests and report per-request statistics"};
  app.add_option("--url", o.url, "server (or mirror) base URL (default http://127.0.0.1:8000)");
  app.add_option("-n,--requests", o.requests, "requests, all sent at once (default 8)");
  app.add_option("--max-tokens", o.max_tokens, "max_tokens of each request (default 48)");
  auto* seed_opt = app.add_option("--seed", seed, "request i sends seed + i (default: no seed field)");
  app.add_option("--prompt", o.prompt, "request i sends \"PROMPT (request i)\"");
  app.add_option("--model", o.model, "model field (default: none)");
  app.add_option("--id-prefix", o.id_prefix, "X-Request-Id of request i: PREFIX<i> (\"\" sends none; default demo-)");
  app.add_flag("--no-stream", no_stream, "ask for whole replies instead of SSE streams");
  app.add_option("--timeout", timeout_s, "seconds per request (default 300)");
  app.add_flag("--check", check, "check each reply against the demo server's deterministic text");
  app.add_option("--json", json_out, "write the report as JSON here");
  app.add_flag("-q,--quiet", quiet, "only the summary line");
  app.add_option("--mirror-latency", lo.pairs,
                 "then N requests one at a time straight to --direct-url and N through --url (the mirror), "
                 "interleaved: the mirror's added latency (default 0: none)");
  app.add_option("--direct-url", lo.direct_url, "with --mirror-latency: the server behind the mirror");
  app.add_option("--shadow-url", lo.shadow_url,
                 "with --mirror-latency: each direct request is also sent here, its answer dropped (a lockstep "
                 "shadow waits for every request)");
  app.add_option("--latency-json", latency_json,
                 "with --mirror-latency: write its report as JSON here (\"describe\": the summary line)");
  CLI11_PARSE(app, argc, argv);
  if (o.requests < 1 || o.max_tokens < 1) {
    std::fprintf(stderr, "twinscope-demo-client: --requests and --max-tokens must be at least 1\n");
    return 2;
  }
  if (*seed_opt) o.seed = seed;
  o.stream = !no_stream;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));

  int vocab = 0;
  uint64_t server_seed = 0;
  if (check) {
    std::string error;
    if (!FetchModelInfo(o.url, &vocab, &server_seed, &error)) {
      std::fprintf(stderr, "twinscope-demo-client: --check: %s\n", error.c_str());
      return 1;
    }
  }
  ChatLoadReport rep = RunChatLoad(o);
  int mismatched = 0;
  std::vector<double> ttft, total;
  for (auto& r : rep.results) {
    std::string verdict;
    if (check && r.ok()) {
      const auto prompt = TokenizeChat({{"user", ChatRequestPrompt(o, r.index)}}, vocab);
      const uint64_t s = o.seed ? *o.seed + static_cast<uint64_t>(r.index) : server_seed;
      const std::string expected = ExpectedReply(RequestSampleSeed(s, prompt), o.max_tokens, vocab);
      if (r.content == expected && r.tokens() == o.max_tokens) {
        verdict = " reply ok";
      } else {
        verdict = " REPLY DIFFERS";
        ++mismatched;
        if (!quiet)
          std::fprintf(stderr, "  request %d: expected \"%s\"\n            got \"%s\"\n", r.index,
                       expected.substr(0, 160).c_str(), r.content.substr(0, 160).c_str());
      }
    }
    if (r.ok()) {
      ttft.push_back(r.ttft_ms);
      total.push_back(r.total_ms);
    }
    if (!quiet) {
      if (r.ok()) {
        std::printf("request %-3d %-12s %4d tokens  ttft %8.1f ms  total %8.1f ms  %s%s\n", r.index,
                    r.request_id.c_str(), r.tokens(), r.ttft_ms, r.total_ms, r.finish_reason.c_str(), verdict.c_str());
      } else {
        std::printf("request %-3d %-12s FAILED: %s\n", r.index, r.request_id.c_str(), r.error.c_str());
      }
    }
  }
  std::printf(
      "%d/%zu requests ok, %lld tokens in %.2f s: %.1f tokens/s; ttft p50 %.1f ms p99 %.1f ms; "
      "latency p50 %.1f ms p99 %.1f ms%s\n",
      rep.ok, rep.results.size(), static_cast<long long>(rep.tokens), rep.wall_ms / 1000, rep.tokens_per_s(),
      Percentile(ttft, 50), Percentile(ttft, 99), Percentile(total, 50), Percentile(total, 99),
      check ? (mismatched ? "; SOME REPLIES DIFFER" : "; every reply as expected") : "");
  if (!json_out.empty()) {
    nlohmann::json j = rep.ToJson();
    if (check) j["mismatched"] = mismatched;
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  bool latency_failed = false;
  if (lo.pairs > 0) {
    if (lo.direct_url.empty()) {
      std::fprintf(stderr, "twinscope-demo-client: --mirror-latency needs --direct-url\n");
      return 2;
    }
    lo.request = o;
    lo.mirror_url = o.url;
    const MirrorLatencyReport lat = RunMirrorLatency(lo);
    std::printf("%s\n", lat.Describe().c_str());
    latency_failed = lat.failed() != 0;
    if (!latency_json.empty()) {
      nlohmann::json j = lat.ToJson();
      j["describe"] = lat.Describe();
      std::ofstream(latency_json) << j.dump(2) << "\n";
    }
  }
  return rep.failed == 0 && mismatched == 0 && !latency_failed ? 0 : 1;
}
