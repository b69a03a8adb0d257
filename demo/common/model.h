// The shape of the demo server's stand-in model (a Llama-style decoder with
// random weights): what sizes the GEMMs, the KV cache and the kernels' launch
// shapes. CUDA-free; shared by the server, the GPU engine and the schedule.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace twinscope::demo {

struct ModelShape {
  std::string name;  // preset name, or "custom"
  int layers = 0;
  int hidden = 0;
  int heads = 0;     // query heads
  int kv_heads = 0;  // key/value heads (grouped-query attention: heads % kv_heads == 0)
  int head_dim = 0;  // multiple of 32, at most 256
  int intermediate = 0;
  int vocab = 0;

  int qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  // reshape_and_cache_flash_kernel's block: min(kv_heads * head_dim, 512) threads.
  int cache_kernel_threads() const { return kv_heads * head_dim < 512 ? kv_heads * head_dim : 512; }
  int64_t parameters() const;                 // weights, embedding tied to the LM head
  int64_t kv_bytes_per_token() const;         // K and V, all layers, bf16
  bool SameShape(const ModelShape& o) const;  // every dimension equal (names may differ)
  std::string Describe() const;               // "1b: 16 layers, hidden 2048, ..."
  nlohmann::json ToJson() const;
};

// "small", "1b" (Llama-3.2-1B-like, the default), "3b" (Llama-3.2-3B-like),
// "8b" (Llama-3.1-8B-like).
StatusOr<ModelShape> ModelPreset(std::string_view name);
std::string ModelPresetNames();  // "small, 1b, 3b, 8b"

// Checks the dimensions (positive, heads % kv_heads == 0, head_dim % 32 == 0
// and <= 256, ...); the message names the bad field.
Status ValidateModel(const ModelShape& m);

StatusOr<ModelShape> ModelFromJson(const nlohmann::json& j);

}  // namespace twinscope::demo
