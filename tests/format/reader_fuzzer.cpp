// libFuzzer target for the trace reader (build with -DTWINSCOPE_FUZZ=ON, clang).
#include "reader_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return FuzzReadTrace(data, size); }
