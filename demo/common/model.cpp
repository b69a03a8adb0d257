// Model presets and their checks (model.h).
#include "common/model.h"

#include <array>
#include <cstdio>

namespace twinscope::demo {
namespace {

struct Preset {
  const char* name;
  int layers, hidden, heads, kv_heads, head_dim, intermediate, vocab;
};

constexpr std::array<Preset, 4> kPresets = {{
    {"small", 4, 512, 8, 4, 64, 1536, 32000},
    {"1b", 16, 2048, 32, 8, 64, 8192, 128256},
    {"3b", 28, 3072, 24, 8, 128, 8192, 128256},
    {"8b", 32, 4096, 32, 8, 128, 14336, 128256},
}};

}  // namespace

int64_t ModelShape::parameters() const {
  const int64_t h = hidden;
  const int64_t per_layer = int64_t(qkv_width()) * h + h * int64_t(heads) * head_dim + 2 * int64_t(intermediate) * h +
                            h * int64_t(intermediate) + 2 * h;
  return layers * per_layer + int64_t(vocab) * h + h;
}

int64_t ModelShape::kv_bytes_per_token() const { return 2LL * layers * kv_heads * head_dim * 2; }

bool ModelShape::SameShape(const ModelShape& o) const {
  return layers == o.layers && hidden == o.hidden && heads == o.heads && kv_heads == o.kv_heads &&
         head_dim == o.head_dim && intermediate == o.intermediate && vocab == o.vocab;
}

std::string ModelShape::Describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: %d layers, hidden %d, %d heads (%d KV) x %d, intermediate %d, vocab %d, %.2fB parameters",
                name.c_str(), layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, parameters() / 1e9);
  return buf;
}

nlohmann::json ModelShape::ToJson() const {
  return {{"name", name},
          {"layers", layers},
          {"hidden", hidden},
          {"heads", heads},
          {"kv_heads", kv_heads},
          {"head_dim", head_dim},
          {"intermediate", intermediate},
          {"vocab", vocab}};
}

StatusOr<ModelShape> ModelPreset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (name == p.name) {
      return ModelShape{p.name, p.layers, p.hidden, p.heads, p.kv_heads, p.head_dim, p.intermediate, p.vocab};
    }
  }
  return Status::Error("unknown model '" + std::string(name) + "' (known: " + ModelPresetNames() + ")");
}

std::string ModelPresetNames() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

Status ValidateModel(const ModelShape& m) {
  auto bad = [&](const char* field, int v, const char* need) {
    return Status::Error("model " + m.name + ": " + field + " = " + std::to_string(v) + ": " + need);
  };
  if (m.layers < 1 || m.layers > 1024) return bad("layers", m.layers, "must be 1..1024");
  if (m.heads < 1 || m.heads > 1024) return bad("heads", m.heads, "must be 1..1024");
  if (m.kv_heads < 1 || m.heads % m.kv_heads != 0) return bad("kv_heads", m.kv_heads, "must divide heads");
  if (m.head_dim < 32 || m.head_dim > 256 || m.head_dim % 32 != 0) {
    return bad("head_dim", m.head_dim, "must be a multiple of 32 from 32 to 256");
  }
  if (m.hidden < 64 || m.hidden > 65536 || m.hidden % 8 != 0)
    return bad("hidden", m.hidden, "must be 64..65536, a multiple of 8");
  if (m.intermediate < 8 || m.intermediate > 262144 || m.intermediate % 8 != 0) {
    return bad("intermediate", m.intermediate, "must be 8..262144, a multiple of 8");
  }
  if (m.vocab < 256 || m.vocab > (1 << 24) || m.vocab % 8 != 0) {
    return bad("vocab", m.vocab, "must be 256..16777216, a multiple of 8");
  }
  return Status::Ok();
}

StatusOr<ModelShape> ModelFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Status::Error("model: expected an object");
  ModelShape m;
  auto get = [&](const char* key, int* out) -> bool {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return false;
    *out = it->get<int>();
    return true;
  };
  if (auto it = j.find("name"); it != j.end() && it->is_string()) m.name = it->get<std::string>();
  for (auto [key, field] : {std::pair{"layers", &m.layers},
                            {"hidden", &m.hidden},
                            {"heads", &m.heads},
                            {"kv_heads", &m.kv_heads},
                            {"head_dim", &m.head_dim},
                            {"intermediate", &m.intermediate},
                            {"vocab", &m.vocab}}) {
    if (!get(key, field)) return Status::Error(std::string("model: missing or non-integer '") + key + "'");
  }
  Status s = ValidateModel(m);
  if (!s.ok()) return s;
  return m;
}

}  // namespace twinscope::demo
