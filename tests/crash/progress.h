// The page a crash-test program shares with the test that kills it: how far
// the program got, updated after every launch, readable by the test at any
// moment and after the kill (a MAP_SHARED file mapping outlives the process).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace twinscope::crash {

struct Progress {
  std::atomic<uint64_t> launches;  // kernel launches returned (a graph launch counts its kernel nodes)
  std::atomic<uint64_t> traced;    // launches of the kernel the block probe traces
  std::atomic<uint64_t> idle;      // 1 while the program sleeps between bursts
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the page is shared between processes");

// Maps `path` (created, one page) shared; null on failure.
inline Progress* MapProgress(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) return nullptr;
  if (ftruncate(fd, 4096) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<Progress*>(p);
}

}  // namespace twinscope::crash
