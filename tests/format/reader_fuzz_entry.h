#pragma once
#include <cstddef>
#include <cstdint>
// Reads `data` as a trace file through the public reader; never crashes.
int FuzzReadTrace(const uint8_t* data, size_t size);
