// Control interface of the fake CUPTI (libcupti.so.13 built from fake_cupti.cpp)
// used by the collector's CPU end-to-end tests. The fake implements the CUPTI
// functions the collector calls and, driven by these functions, fires the
// registered API/resource callbacks and hands synthetic activity records
// through the registered buffer callbacks, the way CUPTI does on a GPU.
//
// Records are produced at launch time and delivered at the next flush
// (fakecupti_flush or the collector's cuptiActivityFlushAll). Not a model of
// the GPU: a model of what CUPTI shows a collector, including the ways it
// loses data (silently missing records, invalid timestamps, reported drops,
// a subscriber seat held by another tool, seed 001's graph starvation).
#pragma once

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum FakeApi {
  FAKE_API_RUNTIME = 0,         // cudaLaunchKernel
  FAKE_API_DRIVER = 1,          // cuLaunchKernel
  FAKE_API_RUNTIME_NESTED = 2,  // cudaLaunchKernel with a nested cuLaunchKernel; the record carries the driver's id
  FAKE_API_RUNTIME_EX = 3,      // cudaLaunchKernelExC
  FAKE_API_DRIVER_EX = 4,       // cuLaunchKernelEx
};

typedef struct {
  const char* name;  // mangled kernel name
  unsigned grid[3];
  unsigned block[3];
  int api;                  // FakeApi
  CUstream stream;          // 0 = default stream
  int result;               // return value of the launch call (0 = success)
  int symbol_name_missing;  // 1: callback's symbolName is NULL (driver path must use cuFuncGetName)
} FakeLaunch;

// Returns the correlation id the kernel record carries.
uint32_t fakecupti_launch(const FakeLaunch* launch);
// Shorthand: runtime launch on the default stream.
uint32_t fakecupti_launch_kernel(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz);
// cudaMemcpyAsync / cudaMemsetAsync (API callback + activity record if enabled).
uint32_t fakecupti_memcpy(uint64_t bytes);
uint32_t fakecupti_memset(uint64_t bytes);

// Context creation (resource callback CONTEXT_CREATED) for device `ordinal`.
CUcontext fakecupti_create_context(int ordinal);
CUstream fakecupti_create_stream(void);  // may return a destroyed stream's handle, with a new id
// Fires RESOURCE STREAM_DESTROY_STARTING; the handle may come back from fakecupti_create_stream.
void fakecupti_destroy_stream(CUstream stream);
uint64_t fakecupti_stream_id_calls(void);  // cuptiGetStreamIdEx calls so far
void fakecupti_set_capturing(CUstream stream, int capturing);

// Graphs. Nodes are kept in the order added (cuGraphGetNodes order).
CUgraph fakecupti_graph_create(void);
CUgraphNode fakecupti_graph_add_kernel(CUgraph g, const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                       unsigned by, unsigned bz);
CUgraphNode fakecupti_graph_add_memcpy(CUgraph g, uint64_t bytes);
CUgraphNode fakecupti_graph_add_memset(CUgraph g, uint64_t bytes);
CUgraphNode fakecupti_graph_add_child(CUgraph g, CUgraph child);
// Instantiates (resource callbacks CREATE_STARTING, GRAPHNODE_CLONED per node
// unless clone_callbacks is 0, CREATED).
CUgraphExec fakecupti_graph_instantiate(CUgraph g, int clone_callbacks);
void fakecupti_graph_exec_destroy(CUgraphExec exec);
// cudaGraphLaunch (driver = 1: cuGraphLaunch). Returns the correlation id.
uint32_t fakecupti_graph_launch(CUgraphExec exec, CUstream stream, int driver);

// Seed 001 model: a graph with memcpy (memset) nodes whose activity kind is
// not enabled uses one device buffer unit per launch; after `units` such
// launches the kernel records of those graphs stop, silently. 0 = off.
void fakecupti_set_graph_pool_units(uint64_t units);
// Does nothing: records are always stamped on the fake's cuptiGetTimestamp
// clock (CLOCK_MONOTONIC ns), as CUPTI's are on its own (kept for callers).
void fakecupti_set_host_clock(int on);
// One record of activity kind `kind` (runtime, driver, synchronization,
// overhead, marker, CUDA event, memcpy2, external correlation, unified memory
// counter) for every client that enabled it; returns its correlation id, 0 for
// another kind.
uint32_t fakecupti_emit(int kind);
// Every nth kernel record gets invalid timestamps: mode 0 start=end=0,
// mode 1 end < start, mode 2 start=0. every_nth 0 = off.
void fakecupti_set_invalid_timestamps(uint64_t every_nth, int mode);
// The next n kernel records are never delivered (silent loss).
void fakecupti_lose_next(uint64_t n);
// The next buffer completion reports n records dropped by CUPTI.
void fakecupti_drop(uint64_t n);
// Another tool holds the subscriber seat: cuptiSubscribe returns 39.
void fakecupti_hold_seat(void);
// Delivers every pending record through the buffer callbacks.
void fakecupti_flush(void);

// Inspection of what the collector asked for.
int fakecupti_activity_enabled(int kind);
int fakecupti_callback_enabled(int domain, uint32_t cbid);
int64_t fakecupti_attribute(int attr);  // -1 if never set
uint64_t fakecupti_pending_records(void);
uint64_t fakecupti_buffers_completed(void);

#ifdef __cplusplus
}
#endif
