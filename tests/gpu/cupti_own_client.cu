// A CUDA program that is a CUPTI client of its own, with the legacy (v1)
// activity and callback API as tools built on CUPTI 13.0 use it (linked
// against the toolkit's libcupti): it counts the kernel records and launch
// callbacks it gets for E eager launches and R replays of a 100-kernel graph,
// and prints one JSON line with the counts and every CUPTI call's result.
// scripts/gpu_cupti135.sh runs it alone and under `twinscope record`: under
// record with CUPTI 13.5 its counts must equal the counts alone.
// Usage: cupti_own_client [--eager E] [--replays R]
#include <cuda_runtime.h>
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    cudaError_t err_ = (call);                                                                      \
    if (err_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "cupti_own_client: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(err_));                                                       \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

__global__ void own_tiny(int* p) {
  if (threadIdx.x == 0 && p) p[blockIdx.x] += 1;
}

std::atomic<unsigned long long> g_records{0}, g_callbacks{0};
constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_records.fetch_add(1);
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_ENTER) g_callbacks.fetch_add(1);
}

std::string g_calls;
void Note(const char* call, CUptiResult r) {
  g_calls += std::string(g_calls.empty() ? "" : ",") + "\"" + call + "\":" + std::to_string(static_cast<int>(r));
}

}  // namespace

int main(int argc, char** argv) {
  long long eager = 100000, replays = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--eager")) {
      eager = std::atoll(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--replays")) {
      replays = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--eager E] [--replays R]\n", argv[0]);
      return 2;
    }
  }
  CHECK(cudaFree(nullptr));
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult r = cuptiSubscribe(&sub, OnCallback, nullptr);
  Note("cuptiSubscribe", r);
  if (r == CUPTI_SUCCESS)
    Note("cuptiEnableCallback",
         cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  Note("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(Requested, Completed));
  Note("cuptiActivityEnable(CONCURRENT_KERNEL)", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));

  int* buf = nullptr;
  CHECK(cudaMalloc(&buf, 4096));
  for (long long i = 0; i < eager; ++i) own_tiny<<<1, 32>>>(buf);
  CHECK(cudaGetLastError());
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < 100; ++k) own_tiny<<<1, 32, 0, s>>>(buf);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  for (long long i = 0; i < replays; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaDeviceSynchronize());
  Note("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  uint32_t version = 0;
  cuptiGetVersion(&version);
  std::printf(
      "{\"launches\": %lld, \"own_kernel_records\": %llu, \"own_launch_callbacks\": %llu, "
      "\"cupti_version\": %u, \"calls\": {%s}}\n",
      eager + 100 * replays, g_records.load(), g_callbacks.load(), version, g_calls.c_str());
  std::fflush(stdout);
  return 0;
}
