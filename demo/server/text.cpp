// Tokenizing prompts and spelling out replies (text.h).
#include "server/text.h"

#include <array>
#include <cctype>

#include "common/sampling.h"

namespace twinscope::demo {
namespace {

// 256 common words; output token t is word t % 272 (the last 16 values are
// punctuation: 8 commas, 8 periods).
constexpr std::array<const char*, 256> kWords = {
    "the",       "of",       "and",      "a",       "to",     "in",      "is",      "you",       "that",    "it",
    "he",        "was",      "for",      "on",      "are",    "as",      "with",    "his",       "they",    "at",
    "be",        "this",     "have",     "from",    "or",     "one",     "had",     "by",        "word",    "but",
    "not",       "what",     "all",      "were",    "we",     "when",    "your",    "can",       "said",    "there",
    "use",       "an",       "each",     "which",   "she",    "do",      "how",     "their",     "if",      "will",
    "up",        "other",    "about",    "out",     "many",   "then",    "them",    "these",     "so",      "some",
    "her",       "would",    "make",     "like",    "him",    "into",    "time",    "has",       "look",    "two",
    "more",      "write",    "go",       "see",     "number", "no",      "way",     "could",     "people",  "my",
    "than",      "first",    "water",    "been",    "call",   "who",     "oil",     "its",       "now",     "find",
    "long",      "down",     "day",      "did",     "get",    "come",    "made",    "may",       "part",    "over",
    "new",       "sound",    "take",     "only",    "little", "work",    "know",    "place",     "year",    "live",
    "me",        "back",     "give",     "most",    "very",   "after",   "thing",   "our",       "just",    "name",
    "good",      "sentence", "man",      "think",   "say",    "great",   "where",   "help",      "through", "much",
    "before",    "line",     "right",    "too",     "mean",   "old",     "any",     "same",      "tell",    "boy",
    "follow",    "came",     "want",     "show",    "also",   "around",  "form",    "three",     "small",   "set",
    "put",       "end",      "does",     "another", "well",   "large",   "must",    "big",       "even",    "such",
    "because",   "turn",     "here",     "why",     "ask",    "went",    "men",     "read",      "need",    "land",
    "different", "home",     "us",       "move",    "try",    "kind",    "hand",    "picture",   "again",   "change",
    "off",       "play",     "spell",    "air",     "away",   "animal",  "house",   "point",     "page",    "letter",
    "mother",    "answer",   "found",    "study",   "still",  "learn",   "should",  "world",     "high",    "every",
    "near",      "add",      "food",     "between", "own",    "below",   "country", "plant",     "last",    "school",
    "father",    "keep",     "tree",     "never",   "start",  "city",    "earth",   "eye",       "light",   "thought",
    "head",      "under",    "story",    "saw",     "left",   "few",     "while",   "along",     "might",   "close",
    "something", "seem",     "next",     "hard",    "open",   "example", "begin",   "life",      "always",  "those",
    "both",      "paper",    "together", "got",     "group",  "often",   "run",     "important", "until",   "children",
    "side",      "feet",     "car",      "mile",    "night",  "walk",
};
constexpr int kPieces = 272;

uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

int32_t HashToken(std::string_view piece, int vocab) { return static_cast<int32_t>(Fnv1a(piece) % uint64_t(vocab)); }

}  // namespace

std::vector<int32_t> TokenizeText(std::string_view text, int vocab) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) {
      ++i;
    } else if (std::isalnum(c) || c >= 0x80) {
      size_t j = i;
      while (j < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[j])) || static_cast<unsigned char>(text[j]) >= 0x80)) {
        ++j;
      }
      out.push_back(HashToken(text.substr(i, j - i), vocab));
      i = j;
    } else {
      out.push_back(HashToken(text.substr(i, 1), vocab));
      ++i;
    }
  }
  return out;
}

std::vector<int32_t> TokenizeChat(const std::vector<ChatMessage>& messages, int vocab) {
  const int32_t start = HashToken("<|start|>", vocab), end = HashToken("<|end|>", vocab);
  std::vector<int32_t> out;
  for (const auto& m : messages) {
    out.push_back(start);
    out.push_back(HashToken("<|role:" + m.role + "|>", vocab));
    auto words = TokenizeText(m.content, vocab);
    out.insert(out.end(), words.begin(), words.end());
    out.push_back(end);
  }
  out.push_back(start);
  out.push_back(HashToken("<|role:assistant|>", vocab));
  return out;
}

uint64_t RequestSampleSeed(uint64_t seed, const std::vector<int32_t>& prompt) {
  uint64_t h = Mix64(seed);
  for (int32_t t : prompt) h = Mix64(h ^ static_cast<uint32_t>(t));
  return h;
}

std::vector<int32_t> SyntheticPrompt(uint64_t sample_seed, int tokens, int vocab) {
  std::vector<int32_t> out(tokens > 0 ? tokens : 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = SampleToken(~sample_seed, static_cast<uint32_t>(i), vocab);
  return out;
}

std::string Detokenizer::Next(int32_t token) {
  const int k = static_cast<int>(static_cast<uint32_t>(token) % kPieces);
  std::string piece;
  if (k >= 256) {
    const bool period = k >= 264;
    if (first_) {
      // A reply does not open with punctuation: spell it as a word instead.
      return Next(k - 256);
    }
    piece = period ? "." : ",";
    if (period) capitalize_ = true;
    return piece;
  }
  piece = first_ ? "" : " ";
  std::string word = kWords[k];
  if (capitalize_) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
  capitalize_ = false;
  first_ = false;
  return piece + word;
}

std::string ExpectedReply(uint64_t sample_seed, int max_tokens, int vocab) {
  Detokenizer d;
  std::string out;
  for (int i = 0; i < max_tokens; ++i) out += d.Next(SampleToken(sample_seed, static_cast<uint32_t>(i), vocab));
  return out;
}

}  // namespace twinscope::demo
