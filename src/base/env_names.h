// Environment variables through which the CLI configures the injected
// collectors. The CLI sets them; the collectors read them at
// InitializeInjection. Documented in README.md ("Configuration").
#pragma once

namespace twinscope::env {

// Both collectors.
inline constexpr char kOutput[] = "TWINSCOPE_OUTPUT";  // trace file, or folder (ends with /): one trace per process
inline constexpr char kMaxBufferedMb[] = "TWINSCOPE_MAX_BUFFERED_MB";  // writer memory cap
inline constexpr char kFlushMs[] = "TWINSCOPE_FLUSH_MS";               // periodic flush interval
inline constexpr char kQuiet[] = "TWINSCOPE_QUIET";                    // 1: no info lines on stderr
// Process trees (docs/design.md, "Process trees"). Set by the CLI: the pid of the process it started (the
// header's "top" is true in that process only), and the folder polled for the stop request (a file
// "stop" there makes the collectors flush and write a summary, then create "flushed-<pid>").
inline constexpr char kTopPid[] = "TWINSCOPE_TOP_PID";
inline constexpr char kControlDir[] = "TWINSCOPE_CONTROL_DIR";

// CUPTI collector.
inline constexpr char kKinds[] = "TWINSCOPE_KINDS";                  // comma list: kernel,memcpy,memset,api,nvtx
inline constexpr char kKernelsOnly[] = "TWINSCOPE_KERNELS_ONLY";     // 1: disable the seed-001 mitigation
inline constexpr char kBufferSizeKb[] = "TWINSCOPE_BUFFER_SIZE_KB";  // CUPTI host buffer size
inline constexpr char kDeviceBufferPoolLimit[] = "TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT";
inline constexpr char kDeviceBufferSizeMb[] = "TWINSCOPE_DEVICE_BUFFER_SIZE_MB";
// Benchmarks only (bench/, scripts/gpu_cupti.sh ablate): comma list of per-launch steps to skip to measure
// what each costs: pending (no key for kernel records), capture (no capture check), stream (stream id 0),
// key (zero launch key), clock (API times from the host clock, not CUPTI's), callback (API callbacks return
// at once). Breaks the data it skips; never for real use.
inline constexpr char kCuptiSkip[] = "TWINSCOPE_CUPTI_SKIP";
// 0: the driver's launch call made inside a runtime launch (cuLaunchKernel inside cudaLaunchKernel) gets no
// API record: two clock reads and one record fewer a runtime launch. Default 1.
inline constexpr char kApiNested[] = "TWINSCOPE_API_NESTED";
// Benchmarks only (bench_kernels --levels): 1 lets the program switch the collector, between bursts, to
// level 0 (nothing enabled), 1 (activity only, as the bare floor) or 2 (everything) through the exported
// twinscope_bench_level(), so one process measures all three. The trace misses what is switched off.
inline constexpr char kBenchLevels[] = "TWINSCOPE_BENCH_LEVELS";

// Block probe.
inline constexpr char kKernelPatterns[] = "TWINSCOPE_KERNELS";    // ';'-separated; "re:" prefix = regex
inline constexpr char kEvery[] = "TWINSCOPE_EVERY";               // trace every Nth matching launch
inline constexpr char kMaxLaunches[] = "TWINSCOPE_MAX_LAUNCHES";  // stop after N traced launches
inline constexpr char kPerSecond[] = "TWINSCOPE_PER_SECOND";      // at most R traced launches a second
inline constexpr char kBudget[] = "TWINSCOPE_BUDGET";             // overhead budget, % of the program's time
inline constexpr char kBlocksPatch[] = "TWINSCOPE_BLOCKS_PATCH";  // always | toggle (default: toggle when sampling)

}  // namespace twinscope::env
