// Chat completion requests and replies in OpenAI's format (protocol.h).
#include "server/protocol.h"

namespace twinscope::demo {
namespace {

using Json = nlohmann::json;

Status Bad(std::string message) { return Status::Error(std::move(message)); }

std::string TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

StatusOr<std::string> MessageContent(const Json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Bad(where + " must be a string or a list of text parts, not " + TypeName(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pw = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return Bad(pw + " must be an object, not " + TypeName(part));
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return Bad(pw + ".type must be a string");
    if (*type != "text") return Bad(pw + ".type '" + type->get<std::string>() + "' is not supported (only 'text')");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) return Bad(pw + ".text must be a string");
    if (!text.empty()) text += "\n";
    text += t->get<std::string>();
  }
  return text;
}

// A number field that is accepted and ignored (sampling parameters).
Status CheckOptionalNumber(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null() || it->is_number()) return Status::Ok();
  return Bad(std::string("'") + key + "' must be a number, not " + TypeName(*it));
}

Json Usage(int prompt, int completion) {
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

StatusOr<ChatRequest> ParseChatRequest(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("the request body is not valid JSON");
  if (!j.is_object()) return Bad("the request body must be a JSON object, not " + TypeName(j));
  ChatRequest r;

  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("'model' must be a string, not " + TypeName(*it));
    r.model = it->get<std::string>();
  }
  auto msgs = j.find("messages");
  if (msgs == j.end()) return Bad("'messages' is a required property");
  if (!msgs->is_array()) return Bad("'messages' must be an array, not " + TypeName(*msgs));
  if (msgs->empty()) return Bad("'messages' must hold at least one message");
  if (msgs->size() > kMaxMessages)
    return Bad("'messages' holds more than " + std::to_string(kMaxMessages) + " messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Bad(where + " must be an object, not " + TypeName(m));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(where + ".role must be a string");
    std::string role_s = role->get<std::string>();
    if (role_s.empty() || role_s.size() > 64) return Bad(where + ".role must be 1 to 64 characters");
    auto content = m.find("content");
    if (content == m.end()) return Bad(where + ".content is a required property");
    auto text = MessageContent(*content, i);
    if (!text.ok()) return text.status();
    r.messages.push_back({std::move(role_s), std::move(*text)});
  }
  if (auto it = j.find("stream"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad("'stream' must be a boolean, not " + TypeName(*it));
    r.stream = it->get<bool>();
  }
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("'stream_options' must be an object, not " + TypeName(*it));
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) return Bad("'stream_options.include_usage' must be a boolean, not " + TypeName(*u));
      r.include_usage = u->get<bool>();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer()) return Bad(std::string("'") + key + "' must be an integer, not " + TypeName(*it));
    const bool fits = it->is_number_unsigned() ? it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= INT32_MAX
                                               : it->get<int64_t>() >= 1 && it->get<int64_t>() <= INT32_MAX;
    if (!fits) return Bad(std::string("'") + key + "' must be at least 1 (and fit in 32 bits)");
    r.max_tokens = static_cast<int>(it->get<int64_t>());
  }
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Bad("'seed' must be an integer, not " + TypeName(*it));
    r.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (auto it = j.find("n"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 1) return Bad("'n' must be 1 (one choice per request)");
  }
  for (const char* key : {"temperature", "top_p", "presence_penalty", "frequency_penalty"}) {
    Status s = CheckOptionalNumber(j, key);
    if (!s.ok()) return s;
  }
  return r;
}

std::string ErrorBody(int status, std::string_view message, std::string_view type, std::string_view param) {
  Json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (!param.empty()) e["param"] = param;
  return Dump(Json{{"error", e}}) + "\n";
}

std::string CompletionBody(const CompletionMeta& m, std::string_view content, std::string_view finish_reason,
                           int prompt_tokens, int completion_tokens) {
  Json j = {{"id", m.id},
            {"object", "chat.completion"},
            {"created", m.created},
            {"model", m.model},
            {"choices", Json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", content}}},
                                      {"logprobs", nullptr},
                                      {"finish_reason", finish_reason}}})},
            {"usage", Usage(prompt_tokens, completion_tokens)}};
  return Dump(j) + "\n";
}

std::string ChunkEvent(const CompletionMeta& m, std::string_view content, bool with_role,
                       std::string_view finish_reason) {
  Json delta = Json::object();
  if (with_role) delta["role"] = "assistant";
  if (!content.empty() || with_role) delta["content"] = content;
  Json choice = {{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (!finish_reason.empty()) choice["finish_reason"] = finish_reason;
  Json j = {{"id", m.id},
            {"object", "chat.completion.chunk"},
            {"created", m.created},
            {"model", m.model},
            {"choices", Json::array({choice})}};
  return "data: " + Dump(j) + "\n\n";
}

std::string UsageEvent(const CompletionMeta& m, int prompt_tokens, int completion_tokens) {
  Json j = {
      {"id", m.id},       {"object", "chat.completion.chunk"}, {"created", m.created},
      {"model", m.model}, {"choices", Json::array()},          {"usage", Usage(prompt_tokens, completion_tokens)}};
  return "data: " + Dump(j) + "\n\n";
}

std::string ModelsBody(std::string_view model, int64_t created, const nlohmann::json& extra) {
  Json m = {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "twinscope"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
  return Dump(Json{{"object", "list"}, {"data", Json::array({m})}}) + "\n";
}

bool IsValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace twinscope::demo
