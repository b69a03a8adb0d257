#include "cupti/activity.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace twinscope::cupti {

std::string Demangle(const char* mangled) {
  if (!mangled || std::strncmp(mangled, "_Z", 2) != 0) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string result = (status == 0 && out) ? out : "";
  std::free(out);
  return result;
}

NameCache::Names NameCache::Get(const char* mangled) {
  std::string_view key = mangled ? mangled : "";
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Names n;
  n.mangled = key.empty() ? 0 : intern_(key);
  std::string d = Demangle(mangled);
  if (!d.empty() && d != key) n.demangled = intern_(d);
  cache_.emplace(std::string(key), n);
  return n;
}

static uint32_t NonNegative(int32_t v) { return v < 0 ? 0 : static_cast<uint32_t>(v); }

namespace {
// The fields every GPU activity record shares (kernel, memcpy, memset).
template <typename Record, typename Activity>
Record ConvertActivityCommon(const Activity& a) {
  Record r{};
  r.start_ns = a.start;
  r.end_ns = a.end;
  r.graph_node_id = a.graphNodeId;
  r.correlation_id = a.correlationId;
  r.device = a.deviceId;
  r.context = a.contextId;
  r.stream = a.streamId;
  r.graph_id = a.graphId;
  if (a.graphNodeId != 0) r.flags |= kFlagGraph;
  if (InvalidTimestamps(a.start, a.end)) r.flags |= kFlagInvalidTimestamp;
  return r;
}
}  // namespace

KernelRecord ConvertKernel(const KernelActivity& a, NameCache& names) {
  auto r = ConvertActivityCommon<KernelRecord>(a);
  r.grid_id = static_cast<uint64_t>(a.gridId);
  r.grid = {NonNegative(a.gridX), NonNegative(a.gridY), NonNegative(a.gridZ)};
  r.block = {NonNegative(a.blockX), NonNegative(a.blockY), NonNegative(a.blockZ)};
  r.static_shared_bytes = NonNegative(a.staticSharedMemory);
  r.dynamic_shared_bytes = NonNegative(a.dynamicSharedMemory);
  r.registers_per_thread = a.registersPerThread;
  NameCache::Names n = names.Get(a.name);
  r.name = n.mangled;
  r.demangled = n.demangled;
  return r;
}

MemcpyRecord ConvertMemcpy(const MemcpyActivity& a) {
  auto r = ConvertActivityCommon<MemcpyRecord>(a);
  r.bytes = a.bytes;
  r.copy_kind = a.copyKind <= static_cast<uint8_t>(CopyKind::kPtoP) ? a.copyKind : 0;
  r.src_kind = a.srcKind;
  r.dst_kind = a.dstKind;
  return r;
}

MemsetRecord ConvertMemset(const MemsetActivity& a) {
  auto r = ConvertActivityCommon<MemsetRecord>(a);
  r.bytes = a.bytes;
  r.value = a.value;
  return r;
}

void ParseBuffer(uint8_t* buffer, size_t valid_bytes, const NextRecordFn& next, NameCache& names, ParsedBuffer* out) {
  if (!buffer || valid_bytes == 0) return;
  CUpti_Activity* record = nullptr;
  for (;;) {
    CUptiResult r = next(buffer, valid_bytes, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS || !record) {
      out->iterator_error = true;
      out->error = r;
      break;
    }
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        KernelRecord k = ConvertKernel(*reinterpret_cast<const KernelActivity*>(record), names);
        if (k.flags & kFlagInvalidTimestamp) out->kernel_invalid++;
        out->kernels.push_back(k);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        MemcpyRecord m = ConvertMemcpy(*reinterpret_cast<const MemcpyActivity*>(record));
        if (m.flags & kFlagInvalidTimestamp) out->copy_invalid++;
        out->memcpys.push_back(m);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        MemsetRecord m = ConvertMemset(*reinterpret_cast<const MemsetActivity*>(record));
        if (m.flags & kFlagInvalidTimestamp) out->copy_invalid++;
        out->memsets.push_back(m);
        break;
      }
      default:
        out->other++;
        break;
    }
  }
}

}  // namespace twinscope::cupti
