// CRC-32C (Castagnoli) of a byte range; guards trace chunks against damage.
#pragma once

#include <cstddef>
#include <cstdint>

namespace twinscope {

uint32_t Crc32c(const void* data, size_t size, uint32_t seed = 0);

}  // namespace twinscope
