// The demo server's "tokenizer": prompts become token ids by hashing their
// words into the model's vocabulary, and output token ids become English
// words and punctuation, so replies read as text. Deterministic and
// CUDA-free; the client's reply check uses the same functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace twinscope::demo {

struct ChatMessage {
  std::string role;
  std::string content;
};

// Words and punctuation of `text`, each hashed into [0, vocab).
std::vector<int32_t> TokenizeText(std::string_view text, int vocab);

// A chat prompt as the model sees it: per message a start token, a role
// token, the content's tokens and an end token; then the assistant's start
// and role tokens. Never empty.
std::vector<int32_t> TokenizeChat(const std::vector<ChatMessage>& messages, int vocab);

// The sample seed of a request: its seed (or the server's, when the request
// has none) mixed with its prompt tokens, so equal requests give equal replies.
uint64_t RequestSampleSeed(uint64_t seed, const std::vector<int32_t>& prompt);

// Prompt token ids for a request known only by its length and seed (a replay
// of a schedule, which does not carry prompts).
std::vector<int32_t> SyntheticPrompt(uint64_t sample_seed, int tokens, int vocab);

// Output tokens to text, one piece per token: " word", ",", "." (the first
// word, and each after a period, capitalised; no leading space on the first).
class Detokenizer {
 public:
  std::string Next(int32_t token);

 private:
  bool first_ = true;
  bool capitalize_ = true;
};

// The whole reply of `max_tokens` tokens for a sample seed (what the server
// must answer; used by checks).
std::string ExpectedReply(uint64_t sample_seed, int max_tokens, int vocab);

}  // namespace twinscope::demo
