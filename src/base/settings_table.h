// The one table of TWINSCOPE_* environment variables (docs/design.md,
// "Settings"): an X-macro list included by base/env_names.h (the constants)
// and base/settings.cpp (types, defaults, ranges, readers, help, validation,
// the trace header's "settings" and README.md's configuration table). No
// include guard: each includer defines TWINSCOPE_SETTING first.
//
// TWINSCOPE_SETTING(constant, name, type, readers, default, min, max, choices, shown_default, help)
//   type     Text | Flag (0 or 1) | Int | Real (decimal) | Choice (one of `choices`) | List (comma list of
//            `choices`)
//   readers  Cupti (the CUPTI collector) | Blocks (the block probe) | Both | Cli (`twinscope` itself) |
//            Program (set by `twinscope` for the traced program) | Tools (scripts/ and tests/ only)
//   default  the value used when unset or invalid, as text ("" = none); min/max bound Int and Real
//   shown_default  the default as README.md shows it ("" = `default` in backquotes)
// Adding a setting: add a line here, then run the README check (tests/base: settings_readme_test) with
// TWINSCOPE_UPDATE_GOLDEN=1 to regenerate README.md's table.

// ---- Both collectors -------------------------------------------------------------------------------------
TWINSCOPE_SETTING(kOutput, "TWINSCOPE_OUTPUT", Text, Both, "", 0, 0, "", "`twinscope-<pid>.tsc`",
                  "trace file, or folder (an existing one, or ending with `/`): one trace per process, never "
                  "truncating another's (docs/trace-format.md, \"Run folders\")")
// Process trees (docs/processes.md): set by `twinscope` for the traced program's processes.
TWINSCOPE_SETTING(kTopPid, "TWINSCOPE_TOP_PID", Int, Both, "0", 0, 4194304, "", "none",
                  "set by `twinscope`: the pid of the process it started (its header says `top`)")
TWINSCOPE_SETTING(kControlDir, "TWINSCOPE_CONTROL_DIR", Text, Both, "", 0, 0, "", "none",
                  "set by `twinscope`: folder polled for the stop request (`stop`): the collectors flush and write "
                  "their summary, then create `flushed-<pid>` there")
TWINSCOPE_SETTING(kFlushMs, "TWINSCOPE_FLUSH_MS", Int, Both, "500", 0, 3600000, "", "",
                  "periodic flush of CUPTI buffers and of all counters into the trace, in ms (0: the writer's own)")
TWINSCOPE_SETTING(kMaxBufferedMb, "TWINSCOPE_MAX_BUFFERED_MB", Int, Both, "64", 1, 1048576, "", "",
                  "memory cap of the trace writer in MiB; past it records are dropped and counted")
TWINSCOPE_SETTING(kQuiet, "TWINSCOPE_QUIET", Flag, Both, "0", 0, 1, "", "", "`1`: no informational lines on stderr")

// ---- CUPTI collector -------------------------------------------------------------------------------------
TWINSCOPE_SETTING(kKinds, "TWINSCOPE_KINDS", List, Cupti, "kernel,memcpy,memset,api,nvtx", 0, 0,
                  "kernel,memcpy,memset,api,nvtx", "all", "record kinds written to the trace")
TWINSCOPE_SETTING(kKernelsOnly, "TWINSCOPE_KERNELS_ONLY", Flag, Cupti, "0", 0, 1, "", "",
                  "`1`: only kernel activity (disables the seed-001 protection)")
TWINSCOPE_SETTING(kBufferSizeKb, "TWINSCOPE_BUFFER_SIZE_KB", Int, Cupti, "8192", 64, 1048576, "", "",
                  "CUPTI host buffer size, KiB")
TWINSCOPE_SETTING(kDeviceBufferPoolLimit, "TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT", Int, Cupti, "-1", 1, 1048576, "",
                  "CUPTI's", "`CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT`")
TWINSCOPE_SETTING(kDeviceBufferSizeMb, "TWINSCOPE_DEVICE_BUFFER_SIZE_MB", Int, Cupti, "-1", 1, 65536, "", "CUPTI's",
                  "`CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE`, MiB")
TWINSCOPE_SETTING(kMaxPendingLaunches, "TWINSCOPE_MAX_PENDING_LAUNCHES", Int, Cupti, "1048576", 1, 1073741824, "", "",
                  "launch keys held until their kernel records arrive; past it the oldest are evicted and counted")
TWINSCOPE_SETTING(kApiNested, "TWINSCOPE_API_NESTED", Flag, Cupti, "1", 0, 1, "", "",
                  "`0`: no API record for the driver's launch call inside a runtime launch (cuLaunchKernel inside "
                  "cudaLaunchKernel): two clock reads fewer a launch; keys and counts unchanged")
TWINSCOPE_SETTING(kCuptiLibrary, "TWINSCOPE_CUPTI_LIBRARY", Text, Cupti, "", 0, 0, "",
                  "`record`: the newest found; the collector alone: `libcupti.so.13`",
                  "path of the libcupti to load (`record` sets it to the newest it finds; the guard and `probe` "
                  "read it too)")
TWINSCOPE_SETTING(kCuptiSkip, "TWINSCOPE_CUPTI_SKIP", List, Cupti, "", 0, 0,
                  "pending,capture,stream,key,clock,callback", "none",
                  "benchmarks only (`scripts/gpu_cupti.sh ablate`): per-launch steps left out; the trace then "
                  "misses data")
TWINSCOPE_SETTING(kBenchLevels, "TWINSCOPE_BENCH_LEVELS", Flag, Cupti, "0", 0, 1, "", "",
                  "benchmarks only (`scripts/gpu_cupti.sh levels`): `1` lets the program switch tracing off; the "
                  "trace then misses data")

// ---- Block probe -----------------------------------------------------------------------------------------
TWINSCOPE_SETTING(kKernelPatterns, "TWINSCOPE_KERNELS", Text, Blocks, "", 0, 0, "", "none",
                  "`;`-separated kernel name patterns (`re:` prefix = regex)")
TWINSCOPE_SETTING(kEvery, "TWINSCOPE_EVERY", Int, Blocks, "1", 1, 1e15, "", "",
                  "sampling: trace every Nth matching launch")
TWINSCOPE_SETTING(kMaxLaunches, "TWINSCOPE_MAX_LAUNCHES", Int, Blocks, "0", 0, 1e15, "", "0 (unlimited)",
                  "sampling: stop after N traced launches")
TWINSCOPE_SETTING(kPerSecond, "TWINSCOPE_PER_SECOND", Real, Blocks, "0", 0, 1e15, "", "0 (unlimited)",
                  "sampling: at most R traced launches a second")
TWINSCOPE_SETTING(kBudget, "TWINSCOPE_BUDGET", Real, Blocks, "0", 0, 100, "", "0 (none)",
                  "sampling: the program's own time grows by at most this many percent (needs "
                  "`TWINSCOPE_BLOCKS_PATCH=toggle`)")
TWINSCOPE_SETTING(kBlocksPatch, "TWINSCOPE_BLOCKS_PATCH", Choice, Blocks, "", 0, 0, "always,toggle",
                  "`toggle` when sampling, else `always`",
                  "`toggle`: patch target modules only around sampled launches; `always`: for good")
TWINSCOPE_SETTING(kToggleAt, "TWINSCOPE_BLOCKS_TOGGLE_AT", Choice, Blocks, "default", 0, 0, "default,end,sync", "",
                  "toggle mode: where it may patch and unpatch besides the program's syncs: `default` (ends of "
                  "default-stream launches), `end` (every launch's end: hung the H200 on other streams), `sync`")
TWINSCOPE_SETTING(kGraphDiag, "TWINSCOPE_BLOCKS_GRAPH_DIAG", List, Blocks, "", 0, 0, "log,calls", "none",
                  "diagnostics: `log` (a line per graph kernel node and table entry), `calls` (a line per callback "
                  "and blocking Sanitizer call, to find a hang)")
TWINSCOPE_SETTING(kRing, "TWINSCOPE_BLOCKS_RING", Int, Blocks, "512", 1, 65536, "", "",
                  "traced launches in flight before all are drained")
TWINSCOPE_SETTING(kMaxSlots, "TWINSCOPE_BLOCKS_MAX_SLOTS", Int, Blocks, "1048576", 1, 4294967295.0, "", "",
                  "most blocks recorded per launch (more are counted as overflow)")
TWINSCOPE_SETTING(kDeviceMb, "TWINSCOPE_BLOCKS_DEVICE_MB", Int, Blocks, "64", 1, 1048576, "", "",
                  "device arena for block buffers per context, MiB (allocated at the first traced launch)")
TWINSCOPE_SETTING(kDecodeMb, "TWINSCOPE_BLOCKS_DECODE_MB", Int, Blocks, "256", 1, 1048576, "", "",
                  "copied block buffers waiting for the decoder thread before a drain waits for it, MiB")
TWINSCOPE_SETTING(kNaive, "TWINSCOPE_BLOCKS_NAIVE", Flag, Blocks, "0", 0, 1, "", "",
                  "benchmarks only: `1` patches every module for good and copies each traced launch's buffer "
                  "right after it (a sync per launch): the naive baseline")

// ---- The twinscope command -------------------------------------------------------------------------------
TWINSCOPE_SETTING(kGuard, "TWINSCOPE_GUARD", Flag, Cli, "1", 0, 1, "", "",
                  "`0`: `record` does not preload the guard for the program's own CUPTI client")
TWINSCOPE_SETTING(kLibDir, "TWINSCOPE_LIB_DIR", Text, Cli, "", 0, 0, "", "beside `twinscope`",
                  "folder of libtwinscope_cupti.so and libtwinscope_blocks.so")
TWINSCOPE_SETTING(kDemoServer, "TWINSCOPE_DEMO_SERVER", Text, Cli, "", 0, 0, "", "beside `twinscope`",
                  "`twinscope demo`: the demo server to run")
TWINSCOPE_SETTING(kProbeChild, "TWINSCOPE_PROBE_CHILD", Text, Cli, "", 0, 0, "", "none",
                  "internal: `twinscope probe` runs one experiment in a child")
TWINSCOPE_SETTING(kLibcuda, "TWINSCOPE_LIBCUDA", Text, Cli, "", 0, 0, "", "`libcuda.so.1`",
                  "the driver library the no-GPU check of `record`, `blocks` and `twin` loads (tests name a missing "
                  "one to stand for a machine without a driver)")
TWINSCOPE_SETTING(kNormalizeRange, "TWINSCOPE_NORMALIZE_RANGE", Text, Cli, "", 0, 0, "", "none",
                  "`join`/`twin`: `;`-separated regular expressions whose matches' digits are ignored in range names "
                  "when the twins' launch sequences are aligned (as `--normalize-range`; docs/join.md)")

// ---- Set by twinscope for the traced program ---------------------------------------------------------------
TWINSCOPE_SETTING(kRole, "TWINSCOPE_ROLE", Choice, Program, "", 0, 0, "primary,shadow", "none",
                  "`twin`: which side this process is")
TWINSCOPE_SETTING(kPort, "TWINSCOPE_PORT", Int, Program, "", 1, 65535, "", "none",
                  "`twin --serve`: the port this side's server listens on")
// The engine adapters' contract (docs/engines.md, docs/sequential-serving.md): set by `twin --serve`.
TWINSCOPE_SETTING(kEngineAdapter, "TWINSCOPE_ENGINE_ADAPTER", Text, Program, "auto", 0, 0, "", "",
                  "`twin --serve`: the engine adapter the servers load (`auto`, `off` or an adapter's name; "
                  "`--engine-adapter`)")
TWINSCOPE_SETTING(kScheduleOut, "TWINSCOPE_SCHEDULE_OUT", Text, Program, "", 0, 0, "", "none",
                  "`twin --serve`: where this side's adapter writes its step schedule (`DIR/schedule-<role>.jsonl`)")
TWINSCOPE_SETTING(kScheduleFollow, "TWINSCOPE_SCHEDULE_FOLLOW", Text, Program, "", 0, 0, "", "none",
                  "`twin --serve`: the primary's schedule the shadow's adapter forces (set when the primary's "
                  "adapter recorded one)")
TWINSCOPE_SETTING(kRequestTrace, "TWINSCOPE_REQUEST_TRACE", Text, Program, "", 0, 0, "", "none",
                  "`twin --serve`: where this side's adapter writes its request trace (`DIR/requests-<role>.jsonl`)")
TWINSCOPE_SETTING(kAdapterStatus, "TWINSCOPE_ADAPTER_STATUS", Text, Program, "", 0, 0, "", "none",
                  "`twin --serve`: this side's adapter status file (`DIR/adapter-<role>.json`), read back by `twin`")
TWINSCOPE_SETTING(kFollowStepTimeout, "TWINSCOPE_FOLLOW_STEP_TIMEOUT_S", Real, Program, "60", 0, 1e9, "", "",
                  "`twin --serve`: seconds the shadow's adapter waits for a forced step's requests "
                  "(`--follow-step-timeout`)")
TWINSCOPE_SETTING(kEnginesDir, "TWINSCOPE_ENGINES_DIR", Text, Cli, "", 0, 0, "", "beside `twinscope`",
                  "`twin --serve`: the engine adapters' folder; its `shim/` goes first on the servers' `PYTHONPATH`")

// ---- Scripts and tests only --------------------------------------------------------------------------------
TWINSCOPE_SETTING(kFuzzSeconds, "TWINSCOPE_FUZZ_SECONDS", Int, Tools, "20", 0, 86400, "", "",
                  "`scripts/test.sh`: seconds per libFuzzer target (0: no fuzzing)")
TWINSCOPE_SETTING(kDemoOut, "TWINSCOPE_DEMO_OUT", Text, Tools, "twinscope-demo", 0, 0, "", "",
                  "`scripts/demo.sh`: the demo's output folder")
TWINSCOPE_SETTING(kUpdateGolden, "TWINSCOPE_UPDATE_GOLDEN", Flag, Tools, "0", 0, 1, "", "",
                  "tests: `1` rewrites golden files (and README.md's table) instead of comparing")
TWINSCOPE_SETTING(kChromium, "TWINSCOPE_CHROMIUM", Text, Tools, "", 0, 0, "", "found on PATH",
                  "tests: the browser of the report's browser test")
TWINSCOPE_SETTING(kCrashSeed, "TWINSCOPE_CRASH_SEED", Int, Tools, "", 0, 1e15, "", "random",
                  "tests: seed of the crash tests")
TWINSCOPE_SETTING(kDemoPort, "TWINSCOPE_DEMO_PORT", Int, Tools, "", 1, 65535, "", "free port",
                  "tests: port of the demo tests' server")
