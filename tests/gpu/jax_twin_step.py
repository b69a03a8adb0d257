"""A JAX jit program for `twinscope twin` on the GPU machine (issue 20): a
training-like step (matmuls XLA autotunes, elementwise and reduction
fusions) called N times. XLA names its NVTX ranges with ids it assigns per
process (`TSL::Thunk:#name=jit(step),hlo_op=...,unique_hlo_op_id=NNN`) and its
autotuner times GEMM candidates in each run, so without the join's
normalization and the shared autotune cache the twins diverge.

Deterministic given its arguments (fixed PRNG keys and shapes). Prints one
line: steps, time per step, and a checksum.

usage: jax_twin_step.py [--steps N] [--batch B] [--hidden H] [--layers L]
"""
import argparse
import time

import jax
import jax.numpy as jnp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, a.layers + 1)
    params = [jax.random.normal(k, (a.hidden, a.hidden), jnp.float32) * 0.02 for k in keys[1:]]
    x = jax.random.normal(keys[0], (a.batch, a.hidden), jnp.float32)

    def loss(params, x):
        h = x
        for w in params:
            h = jnp.tanh(h @ w) * 1.5 + h
        return jnp.mean(h * h)

    @jax.jit
    def step(params, x):
        l, g = jax.value_and_grad(loss)(params, x)
        return [p - 1e-3 * gp for p, gp in zip(params, g)], l

    params, l = step(params, x)  # compile (and autotune) outside the timed loop
    l.block_until_ready()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        params, l = step(params, x)
    l.block_until_ready()
    dt = (time.perf_counter() - t0) / max(a.steps, 1)
    print(f"jax_twin_step: {a.steps} steps, {dt * 1e3:.3f} ms/step, loss {float(l):.6f}", flush=True)


if __name__ == "__main__":
    main()
