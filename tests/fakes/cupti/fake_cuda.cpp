// Fake libcuda.so.1 for CPU tests: the few driver functions the CUPTI
// collector resolves with dlsym, over the objects fake_cupti.cpp creates.
#include <cuda.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "fake_objects.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

// What twinscope's no-GPU check asks (src/probe/gpu_check.cpp): the fake driver counts as one GPU, so
// `record` and `twin` over the fakes run as on a GPU machine.
FAKE_EXPORT CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  if (ordinal < 0 || ordinal > 7) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  std::snprintf(name, static_cast<size_t>(len), "Fake H200 #%d", dev);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute attr, CUdevice) {
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 132;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(i * 16 + dev);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  bool real_stream = s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
  *status = real_stream && s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    *n = g->nodes.size();
    return CUDA_SUCCESS;
  }
  size_t k = *n < g->nodes.size() ? *n : g->nodes.size();
  for (size_t i = 0; i < k; ++i) nodes[i] = g->nodes[i];
  *n = k;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  *type = node->type;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  if (node->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  std::memset(p, 0, sizeof *p);
  p->func = node->func;
  p->gridDimX = node->grid[0];
  p->gridDimY = node->grid[1];
  p->gridDimZ = node->grid[2];
  p->blockDimX = node->block[0];
  p->blockDimY = node->block[1];
  p->blockDimZ = node->block[2];
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* g) {
  if (node->type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  *g = node->child;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}

// The first libcupti copy that initializes holds the seat (fake_cupti.cpp
// routes every copy's launches to it).
FAKE_EXPORT void* fakecuda_cupti_seat(void* claim) {
  static std::atomic<void*> holder{nullptr};
  void* none = nullptr;
  if (claim) holder.compare_exchange_strong(none, claim);
  return holder.load();
}
