// The two tools as the probe child drives them, each in its own translation
// unit (cupti.h and sanitizer.h cannot be included together). Every call
// returns the API's result code; *_ResultName turns it into the API's name.
#pragma once

#include <cstdint>
#include <string>

namespace twinscope::probe_child {

// Compute Sanitizer (sanitizer_side.cpp).
int SanSubscribe();  // sanitizerSubscribe + LAUNCH domain; counts LAUNCH_BEGIN
int SanUnsubscribe();
uint64_t SanLaunchCallbacks();
std::string SanResultName(int code);

// CUPTI (cupti_side.cpp).
int CuptiActivityRegister();      // cuptiActivityRegisterCallbacks
int CuptiActivityEnableKernel();  // cuptiActivityEnable(CONCURRENT_KERNEL)
int CuptiSubscribe();             // cuptiSubscribe + RUNTIME_API domain; counts cudaLaunchKernel enters
int CuptiUnsubscribe();
int CuptiFinalize();
void CuptiFlush();  // cuptiActivityFlushAll(1) if activity was enabled by any client
// CUPTI 13.5's multi-subscriber client A (0) or B (1): cuptiSubscribe_v2 with
// allowMultipleSubscribers=1 + RUNTIME_API domain + per-subscriber kernel
// activity. kNotInThisCupti below 13.5.
int CuptiV2Client(int client);
inline constexpr int kNotInThisCupti = -1;
enum class CuptiClient { kLegacy = 0, kV2A = 1, kV2B = 2 };
uint64_t CuptiKernelRecords(CuptiClient c);
uint64_t CuptiLaunchCallbacks(CuptiClient c);
std::string CuptiLibrary(uint32_t* version);  // the libcupti in use (path) and its cuptiGetVersion
std::string CuptiResultName(int code);

// CUDA (probe_kernel.cu).
int CudaDeviceCount(int* count, std::string* error);  // cudaGetDeviceCount
int LaunchTestKernels(int n, std::string* error);     // n launches + cudaDeviceSynchronize

}  // namespace twinscope::probe_child
