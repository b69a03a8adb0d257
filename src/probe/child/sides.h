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
void CuptiFlush();  // cuptiActivityFlushAll(1) if activity was registered
uint64_t CuptiKernelRecords();
uint64_t CuptiLaunchCallbacks();
std::string CuptiResultName(int code);

// CUDA (probe_kernel.cu).
int CudaDeviceCount(int* count, std::string* error);  // cudaGetDeviceCount
int LaunchTestKernels(int n, std::string* error);     // n launches + cudaDeviceSynchronize

}  // namespace twinscope::probe_child
