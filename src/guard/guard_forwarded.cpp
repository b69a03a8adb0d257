// The CUPTI entry points the guard does not serve (guard_forwarded_list.h):
// each goes unchanged to the one libcupti, and its result is counted and
// reported (guard.h), so a call the guard does not cover is seen, not lost.
//
// No CUPTI header here: each forwarder takes ten integer-register-sized
// arguments and passes them on. On x86-64 (System V) every parameter of these
// functions is an integer or a pointer (checked when the list was made), the
// first six travel in registers and the rest on the caller's stack, so the
// callee reads exactly what the program passed; extra slots are ignored. The
// result (CUptiResult, an int) comes back in eax.
#include <cstdint>

#include "base/log.h"
#include "guard/guard_slots.h"

static_assert(sizeof(void*) == 8, "the guard's forwarders assume a 64-bit System V ABI");

namespace twinscope::guard {
namespace {

// CUptiResult values (cupti_result.h).
constexpr int kNotInitialized = 15, kNotSupported = 27, kUnknown = 999;

using Arg = uintptr_t;
using Forward = int (*)(Arg, Arg, Arg, Arg, Arg, Arg, Arg, Arg, Arg, Arg);

int CallForwarded(CallSlot& slot, Arg a0, Arg a1, Arg a2, Arg a3, Arg a4, Arg a5, Arg a6, Arg a7, Arg a8, Arg a9) {
  int r = kUnknown;
  Firewall(slot.name, [&] {
    auto fn = reinterpret_cast<Forward>(Symbol(slot.name));
    // Absent in this libcupti (a newer entry point, or no libcupti at all).
    r = fn ? fn(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) : HaveCupti() ? kNotSupported : kNotInitialized;
    NoteResult(slot, r);
  });
  return r;
}

}  // namespace
}  // namespace twinscope::guard

#define X(name)                                                                                                      \
  extern "C" __attribute__((visibility("default"))) int name(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, \
                                                             uintptr_t a4, uintptr_t a5, uintptr_t a6, uintptr_t a7, \
                                                             uintptr_t a8, uintptr_t a9) {                           \
    static twinscope::guard::CallSlot slot(#name, "forwarded");                                                      \
    return twinscope::guard::CallForwarded(slot, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9);                            \
  }
#include "guard/guard_forwarded_list.h"
#undef X
