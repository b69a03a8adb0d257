"""A CuPy workload for `twinscope twin` on the GPU machine: a RawKernel (NVRTC, cuModuleLoadData) launched 200 times,
one NVTX range `step N` per launch; on every 10th launch block 7 spins about 100x longer than the kernel takes, so
those 20 launches are slow because one block held them up (the join's "why slow" must name block 7 in each).

usage: cupy_straggler.py [--launches N] [--every K] [--spin CYCLES]
"""
import argparse

import cupy as cp
from cupy.cuda import nvtx

SRC = r"""
extern "C" __global__ void straggler_kernel(float* x, int n, int slow_block, long long spin) {
  if ((int)blockIdx.x == slow_block && spin > 0) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 1.0001f + 1.0f;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=200)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--spin", type=int, default=400000)
    a = ap.parse_args()
    kern = cp.RawKernel(SRC, "straggler_kernel")
    blocks, threads = 264, 256
    n = blocks * threads
    x = cp.zeros(n, dtype=cp.float32)
    for i in range(a.launches):
        slow = i % a.every == a.every - 1
        nvtx.RangePush("step %d" % i)
        kern((blocks,), (threads,), (x, cp.int32(n), cp.int32(7), cp.int64(a.spin if slow else 0)))
        nvtx.RangePop()
        cp.cuda.runtime.deviceSynchronize()
    print("launches", a.launches, "slow", sum(1 for i in range(a.launches) if i % a.every == a.every - 1), "sum", float(x.sum()))


if __name__ == "__main__":
    main()
