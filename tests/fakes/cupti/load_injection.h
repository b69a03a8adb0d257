// How the stand-in applications that drive the fake CUPTI load an injection
// library: the way the CUDA driver does (dlopen, then InitializeInjection).
#pragma once

#include <dlfcn.h>

#include <cstdio>

// Returns 0, or after saying why on stderr 3 (cannot load) or 4
// (InitializeInjection missing or failed).
inline int LoadInjection(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 3;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (!init || init() != 1) {
    std::fprintf(stderr, "InitializeInjection missing or failed in %s\n", path);
    return 4;
  }
  return 0;
}
