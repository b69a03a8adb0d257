// A small load client for OpenAI-compatible chat servers (the demo server,
// vLLM, the mirror in front of them): sends N chat completion requests at
// once, streamed (SSE) or not, and returns per-request statistics: tokens,
// time to first token, total latency, the reply, errors. Used by
// `twinscope-demo-client` and `twinscope demo`. CUDA-free; no Boost in this
// header. RunChatLoad blocks until every request has ended or timed out.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace twinscope::demo {

struct ChatLoadOptions {
  std::string url = "http://127.0.0.1:8000";  // the server; "/v1/chat/completions" is appended to its path
  int requests = 8;                           // all sent at once, one connection each
  int max_tokens = 48;
  std::string model;                                    // "model" field ("" = left out; the demo server takes any)
  std::string prompt = "Tell me a story about a GPU.";  // request i sends "<prompt> (request i)"
  std::optional<uint64_t> seed;                         // request i sends seed + i; none = no "seed" field
  std::string id_prefix = "demo-";                      // X-Request-Id: <prefix><i>; "" = no header sent
  int first_index = 0;                                  // i runs from here (prompt, seed and id alike)
  bool stream = true;
  bool include_usage = true;                  // stream_options.include_usage (streaming only)
  std::chrono::milliseconds timeout{300000};  // one request, connect to last byte
};

struct ChatResult {
  int index = 0;
  std::string request_id;      // sent (or the server's, from its X-Request-Id reply header)
  int status = 0;              // HTTP status (0: no response)
  std::string content;         // the reply's text
  int chunks = 0;              // content-carrying stream chunks (the reply's tokens, one per chunk on most servers)
  int completion_tokens = -1;  // usage.completion_tokens, when the server sent it
  std::string finish_reason;
  double ttft_ms = -1;           // send to the first content chunk (streamed) or to the reply (not)
  double total_ms = -1;          // send to the end of the reply
  std::vector<double> chunk_ms;  // when each content chunk arrived, after send
  std::string error;             // "" = ok
  bool ok() const { return error.empty(); }
  int tokens() const { return completion_tokens >= 0 ? completion_tokens : chunks; }
};

struct ChatLoadReport {
  std::vector<ChatResult> results;  // by index (from first_index)
  double wall_ms = 0;               // first send to last end
  int ok = 0, failed = 0;
  int64_t tokens = 0;  // over the ok requests
  double tokens_per_s() const { return wall_ms > 0 ? tokens * 1000.0 / wall_ms : 0; }
  nlohmann::json ToJson() const;
};

// The JSON body request `i` sends.
std::string ChatRequestBody(const ChatLoadOptions& o, int i);
// The user message of request `i`.
std::string ChatRequestPrompt(const ChatLoadOptions& o, int i);

ChatLoadReport RunChatLoad(const ChatLoadOptions& o);

// GET <base>/v1/models of a demo server: its vocabulary size and default seed. False, with `error` set, when the
// server cannot be reached or is no twinscope-demo-server.
bool FetchModelInfo(const std::string& base, int* vocab, uint64_t* seed, std::string* error);

// p-th percentile (0..100) of `v` by nearest rank; -1 for an empty vector.
double Percentile(std::vector<double> v, double p);

}  // namespace twinscope::demo
