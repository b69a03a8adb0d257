// Small, fully known traces for exporter and CLI tests, written with the real
// TraceWriter. Values are documented in sample_trace.cpp next to each record.
#pragma once

#include <cstdint>
#include <string>

namespace twinscope::testing {

// Primary trace: pid 4242, 3 API calls, 4 kernels (one with an invalid
// timestamp, two from one graph launch), 1 memcpy, 1 memset, 3 NVTX records,
// 4 launch records, counters with launches_seen 5 / kernel_records 4,
// metadata devices [{ordinal 0, name "Fake GPU", sm_count 132}].
// `extra_kernels` adds that many more valid kernels ("filler") for tests that
// need several chunks.
void WritePrimaryTrace(const std::string& path, uint64_t extra_kernels = 0);

// Shadow trace: one traced launch (seq 1, kernel "probe_k", grid 4) with 4
// blocks on SMs 0 and 1, block 3 the straggler; a second launch (seq 2) with
// 1 of 2 blocks.
void WriteShadowTrace(const std::string& path);

// Shadow trace of a sampling block probe: header "sampling" {every 10,
// budget_pct 5, patch "toggle"}, one traced launch (seq 3, sample_index 10,
// 2 blocks), counters launches_matching 20, launches_traced 2,
// modules_repatched 2, modules_unpatched 2, patch_toggle_ns 150000,
// sampling_cost_ns 1000000, sampling_program_ns 40000000.
// pinned_by_graph: the modules_pinned_by_graph counter (toggle mode, CUDA graphs made).
void WriteSampledShadowTrace(const std::string& path, uint64_t pinned_by_graph = 0);

// Flips one byte inside the payload of chunk number `chunk` (0-based) so the
// reader stops there with a checksum error. Returns false if there is no
// such chunk.
bool CorruptChunk(const std::string& path, int chunk);

// A fresh temporary file name (the file is created empty).
std::string TempPath(const std::string& suffix);

}  // namespace twinscope::testing
