// The OpenAI-compatible wire format of the demo server: parsing a chat
// completion request (every problem is a 400 message naming the field) and
// writing replies, stream chunks, /v1/models and error bodies. CUDA-free and
// Boost-free, so the fuzz target links it alone.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "server/text.h"

namespace twinscope::demo {

struct ChatRequest {
  std::string model;  // "" when absent (any name is accepted)
  std::vector<ChatMessage> messages;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  std::optional<int> max_tokens;  // max_tokens or max_completion_tokens
  std::optional<uint64_t> seed;   // negative seeds are taken modulo 2^64
};

constexpr size_t kMaxMessages = 4096;

// Parses a POST /v1/chat/completions body.
StatusOr<ChatRequest> ParseChatRequest(std::string_view body);

// {"error":{"message":...,"type":...,"param":...,"code":status}}
std::string ErrorBody(int status, std::string_view message, std::string_view type = "invalid_request_error",
                      std::string_view param = "");

struct CompletionMeta {
  std::string id;     // "chatcmpl-<request id>"
  std::string model;  // the served model name
  int64_t created = 0;
};

std::string CompletionBody(const CompletionMeta& m, std::string_view content, std::string_view finish_reason,
                           int prompt_tokens, int completion_tokens);

// One SSE event "data: {chat.completion.chunk}\n\n". The first carries the
// role; `finish_reason` empty = null.
std::string ChunkEvent(const CompletionMeta& m, std::string_view content, bool with_role,
                       std::string_view finish_reason);
std::string UsageEvent(const CompletionMeta& m, int prompt_tokens, int completion_tokens);
inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

// GET /v1/models; `extra` goes into the model object (vocab_size, ...).
std::string ModelsBody(std::string_view model, int64_t created, const nlohmann::json& extra);

// Request ids (X-Request-Id): 1 to 128 visible ASCII characters.
bool IsValidRequestId(std::string_view id);

}  // namespace twinscope::demo
