/* Control interface of the fake Compute Sanitizer (libsanitizer-public.so with
 * the real library's SONAME, built for CI). A test program links it, and the
 * block probe, loaded as the "injection", finds it instead of NVIDIA's.
 *
 * The fake plays the driver: fakesan_init() loads CUDA_INJECTION64_PATH and
 * calls its InitializeInjection, then creates one context. Launches are
 * stream-ordered and deferred: a launch "runs" (its blocks are written into the
 * buffer the collector attached, emulating patch/block_probe.cu exactly,
 * including thread (0,0,0)'s entry, the per-warp exit atomics and the header) only when its
 * stream is synchronised, a copy is made on it, or the context is
 * synchronised; so a collector that reads a buffer too early reads zeros.
 *
 * Every Sanitizer call and control action is appended to the file named by
 * FAKESAN_LOG (one line each), so tests can check the order of events.
 * A blocking call (copy to host, stream sync, free) inside a LAUNCH_BEGIN
 * callback logs "error blocking_call_in_launch_begin" (FAKESAN_STRICT_LAUNCH=hang:
 * it hangs, like a driver that deadlocks there); FAKESAN_SYNC_CALLBACK_IN_COPY=
 * same|thread makes blocking calls fire a STREAM_SYNCHRONIZED callback on the
 * calling thread or on another thread they wait for.
 * FAKESAN_EXIT_TEARDOWN=1 plays the CUDA runtime's exit handler, registered
 * (like cudart's, at program start) before the injection's own atexit, so it
 * runs after it: it relaunches the last launched kernel once (a launch from a
 * static destructor), then unloads every module, destroys every stream and
 * the context, firing their callbacks.
 * Patch state is per module, as on the GPU: a launch runs the code its module
 * had when it was submitted (patched only if sanitizerPatchModule came after
 * sanitizerPatchInstructions for both block patches); sanitizerUnpatchModule
 * drops the instructions, so re-patching without issuing them again gives
 * launches without blocks. Errors logged (and counted in the stats): a patch
 * or unpatch while a launch of the module is queued
 * ("error patch_module_with_module_in_flight" / "unpatch_..."), a patch state
 * that changed between a launch's BEGIN callback and its submission
 * ("error patch_changed_during_launch"; FAKESAN_SUBMIT_US widens that
 * window), and two patch calls at once ("error concurrent_patch_calls"; the
 * Sanitizer asks its callers to serialise them; FAKESAN_PATCH_US makes each
 * patch call take that long; FAKESAN_PATCHED_RUN_US makes a launch that runs
 * the patch with a buffer take that much longer when it executes).
 * A patch or unpatch from inside the LAUNCH_END callback of a launch on a
 * stream other than the NULL stream logs "error
 * toggle_in_launch_end_nondefault" (counted): on the H200 sanitizerUnpatchModule
 * never returned there (at the END of NULL-stream launches, and at syncs, it did).
 * Graph execs (fakesan_graph_exec_instantiate) keep the patch state each module
 * had when they were instantiated (after the GRAPHEXEC_CREATING callback): a
 * kernel node of an exec launched while its module's patch state differs from
 * that logs "error graph_exec_patch_state_changed" (counted) and writes
 * nothing (on the H200: an exec made unpatched and launched after a re-patch
 * stopped with "illegal instruction"). Graph launches of no instantiated exec
 * (scripts that never instantiate) run the module's state at submission.
 * A graph kernel node of a patched module launched without launch data logs
 * "error graph_node_patched_without_launch_data" (on the H200 such a node
 * crashed with "misaligned address": its patch does not see null).
 * Every "error ..." line stops the program (a message on stderr, then abort):
 * no run over the fake passes with a misuse that fails or hangs a real GPU
 * unless its test sets FAKESAN_EXPECT_ERRORS=1 (then the line is only logged
 * and counted, and the program carries on).
 * Thread-safe: one lock over the fake's state, released while a callback
 * runs, so the program may launch from several threads. */
#ifndef TWINSCOPE_TESTS_FAKES_SANITIZER_FAKESAN_H_
#define TWINSCOPE_TESTS_FAKES_SANITIZER_FAKESAN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  FAKESAN_NORMAL = 0,
  FAKESAN_SILENT = 1,          /* sanitizerSubscribe succeeds, no callback ever arrives (CUPTI got there first) */
  FAKESAN_SUBSCRIBE_FAILS = 2, /* sanitizerSubscribe returns an error */
};

/* How the blocks of a launch run when it executes. Zero fields take defaults. */
typedef struct {
  uint32_t num_sms;          /* SM of a block = its run position % num_sms (default 132) */
  uint64_t start_ns;         /* enter time of the first block to run (default 1000000) */
  uint64_t spacing_ns;       /* between block entries (default 10) */
  uint64_t duration_ns;      /* enter to last exit (default 100) */
  uint32_t shuffle_seed;     /* 0: blocks run in linear order; else a seeded permutation */
  uint32_t split_exit_warps; /* 1: the first half of the warps exits early, in its own group */
  uint32_t drop_exit_every;  /* k > 0: every k-th block (by run position) never finishes its exit */
} FakesanPlan;

typedef struct {
  uint64_t callbacks_fired;
  uint64_t launches;
  uint64_t launches_executed_patched; /* ran with a buffer attached */
  uint64_t d2h_copies;
  uint64_t stream_syncs; /* sanitizerStreamSynchronize calls */
  uint64_t allocs;
  uint64_t frees;
  uint64_t modules_patched;
  uint64_t patch_images_added;
  uint64_t launches_executed_off;       /* patched, ran with an "off" header: wrote nothing */
  uint64_t launches_null_data_patched;  /* patched, given explicit null launch data */
  uint64_t callbacks_after_unsubscribe; /* callbacks that would have fired had the tool stayed subscribed */
  uint64_t host_allocs;                 /* sanitizerAllocHost (pinned host memory) */
  uint64_t host_frees;
  uint64_t modules_unpatched;                /* sanitizerUnpatchModule calls */
  uint64_t launches_executed_unpatched;      /* ran without the patch (native) */
  uint64_t toggles_with_module_in_flight;    /* errors, see above */
  uint64_t patch_changed_during_launch;      /* errors, see above */
  uint64_t concurrent_patch_calls;           /* errors, see above */
  uint64_t graph_nodes_without_table_entry;  /* a graph node's patch found no entry of its shape in the table */
  uint64_t toggles_in_launch_end_nondefault; /* errors, see above (a hang on the H200) */
  uint64_t graph_exec_patch_state_changed;   /* errors, see above (illegal instruction on the H200) */
} FakesanStats;

void fakesan_set_mode(int mode); /* before fakesan_init */
int fakesan_init(void);          /* 0 on success */
uintptr_t fakesan_load_module(const void* cubin, size_t size);
uintptr_t fakesan_load_module_file(const char* path); /* 0 if unreadable */
void fakesan_unload_module(uintptr_t module);
uintptr_t fakesan_create_stream(void);
void fakesan_destroy_stream(uintptr_t stream);
/* stream 0 = the NULL stream. `plan` may be null. Returns 0, or -1 if the
 * module does not hold `name` (checked against the cubin bytes). */
int fakesan_launch(uintptr_t module, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                   uint32_t bz, uintptr_t stream, const FakesanPlan* plan);
/* A kernel node of a CUDA graph launched on `stream` (GRAPHS NODE_LAUNCH_BEGIN). */
int fakesan_graph_node_launch(uintptr_t module, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
                              uint32_t by, uint32_t bz, uintptr_t stream, const FakesanPlan* plan);
/* cudaGraphInstantiate (GRAPHS GRAPHEXEC_CREATING): a new exec (ids from 1),
 * which keeps every loaded module's patch state as it is when the callback
 * returns. Unpatching a module that was patched at an instantiation logs
 * "error unpatch_after_patched_instantiation": the exec's nodes may hold on to
 * the patched code (a GPU run hung where it happened). */
uintptr_t fakesan_graph_exec_instantiate(void);
/* A whole launch of exec `exec` on `stream` (GRAPHS LAUNCH_BEGIN / LAUNCH_END);
 * its kernel nodes are fakesan_graph_node_launch calls in between, and must be
 * of modules loaded when it was instantiated. exec 0: no instantiated exec. */
void fakesan_graph_exec_begin(uintptr_t exec, uintptr_t stream);
/* The same for the exec instantiated last (0 if none). */
void fakesan_graph_instantiate(void);
void fakesan_graph_begin(uintptr_t stream);
void fakesan_graph_end(uintptr_t stream);
/* Stream capture, as the driver does it (cudaStreamBeginCapture / cudaStreamEndCapture on a stream of
 * the program's): a launch on a capturing stream is not executed but recorded into the capture's graph,
 * and fires no Sanitizer callback ("captured <kernel>" in the log). The tool's own stream work on a
 * capturing stream (a copy, a memset, a sanitizerStreamSynchronize) logs
 * "error <what>_on_capturing_stream": on a GPU it would be captured or invalidate the capture.
 * End returns the captured graph (ids from 1; 0 and an error if the stream was not capturing);
 * instantiating it is fakesan_graph_exec_instantiate (GRAPHEXEC_CREATING) with its nodes kept, and
 * each launch of the exec is a whole graph launch (GRAPHS LAUNCH_BEGIN, a kernel node per captured
 * launch, LAUNCH_END). */
void fakesan_stream_begin_capture(uintptr_t stream);
uintptr_t fakesan_stream_end_capture(uintptr_t stream);
uintptr_t fakesan_graph_instantiate_captured(uintptr_t graph);
int fakesan_graph_launch_captured(uintptr_t exec, uintptr_t stream); /* 0, or -1 (unknown exec or stream) */
void fakesan_stream_sync(uintptr_t stream);                          /* like cudaStreamSynchronize */
void fakesan_ctx_sync(void);                                         /* like cudaDeviceSynchronize */
void fakesan_destroy_context(void);
void fakesan_get_stats(FakesanStats* out);

#ifdef __cplusplus
}
#endif

#endif /* TWINSCOPE_TESTS_FAKES_SANITIZER_FAKESAN_H_ */
