// Reads the kernel names out of a CUDA module image (the cubin that the
// Sanitizer's MODULE_LOADED callback hands over), so the block probe can tell
// whether a module holds a target kernel before deciding to patch it.
//
// The image is outside input: every offset, size and string is checked
// against the buffer; a malformed image gives an error, never a read past its
// end. Pure function, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace twinscope::blocks {

// Kernels (entry functions) of an ELF64 cubin: STT_FUNC symbols that are
// marked as CUDA entries (st_other & 0x10) or live in their own section
// ".text.<name>". Names are the mangled symbol names, in symbol-table order,
// without duplicates.
StatusOr<std::vector<std::string>> CubinKernelNames(const void* image, size_t size);

// Fallback for images that are not ELF (or damaged ones): every run of at
// least `min_len` printable characters that looks like a symbol name
// ([A-Za-z0-9_$.]), the way `strings` would list them.
std::vector<std::string> PrintableNames(const void* image, size_t size, size_t min_len = 4);

}  // namespace twinscope::blocks
