#!/usr/bin/env python3
"""A small JAX training loop traced with jax.profiler.trace: the XPlane fixture for issue #6.

An MLP regressor trained with hand-written SGD (no optax), `--steps` steps, each inside
`jax.profiler.StepTraceAnnotation("train", step_num=i)`. Two planted events:
  * step `--recompile-step` (3) feeds a batch of a different shape once, so XLA compiles again;
  * after step `--item-step` (4) the loss is read back with float(): a device-to-host transfer + sync.
The normal shape is compiled before the trace starts, so that recompile is the only compile inside it.

Output: <logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb (+ <host>.trace.json.gz).
The Python tracer is off by default (python_tracer_level=0; JAX's default of 1 makes the file ~5x larger).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logdir", default="demo_logs/jax_gpu_xplane")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--odd-batch", type=int, default=384, help="batch size fed once at --recompile-step")
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--recompile-step", type=int, default=3)
    p.add_argument("--item-step", type=int, default=4)
    p.add_argument("--perfetto", action=argparse.BooleanOptionalAction, default=False,
                   help="also write perfetto_trace.json.gz (<host>.trace.json.gz is written anyway)")
    p.add_argument("--python-tracer-level", type=int, default=0, help="1 traces every Python call (large)")
    p.add_argument("--host-tracer-level", type=int, default=2)
    p.add_argument("--hlo-proto", action=argparse.BooleanOptionalAction, default=True,
                   help="embed the compiled HLO modules in the XPlane")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import jax
    import jax.numpy as jnp

    def init(key):
        sizes = [args.dim] + [args.hidden] * (args.layers - 1) + [1]
        params = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            k = jax.random.fold_in(key, i)
            params.append((jax.random.normal(k, (a, b), jnp.float32) / np.sqrt(a), jnp.zeros((b,), jnp.float32)))
        return params

    def forward(params, x):
        for w, b in params[:-1]:
            x = jax.nn.gelu(x @ w.astype(jnp.bfloat16) + b.astype(jnp.bfloat16))
        w, b = params[-1]
        return (x @ w.astype(jnp.bfloat16)).astype(jnp.float32)[:, 0] + b[0]

    def loss_fn(params, x, y):
        return jnp.mean((forward(params, x) - y) ** 2)

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params = jax.tree_util.tree_map(lambda p, g: p - args.lr * g, params, grads)
        return params, loss

    rng = np.random.default_rng(args.seed)
    true_w = rng.standard_normal(args.dim).astype(np.float32) / np.sqrt(args.dim)

    def batch(n):
        x = rng.standard_normal((n, args.dim)).astype(np.float32)
        return x.astype(jnp.bfloat16), (x @ true_w).astype(np.float32)

    params = init(jax.random.PRNGKey(args.seed))
    x, y = batch(args.batch)
    t0 = time.perf_counter()
    params, loss = train_step(params, x, y)  # compile the normal shape outside the trace
    jax.block_until_ready(loss)
    compile_ms = 1000 * (time.perf_counter() - t0)

    os.makedirs(args.logdir, exist_ok=True)
    step_ms, shapes, item = [], [], None
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = args.python_tracer_level
    options.host_tracer_level = args.host_tracer_level
    options.enable_hlo_proto = args.hlo_proto
    with jax.profiler.trace(args.logdir, create_perfetto_trace=args.perfetto, profiler_options=options):
        for i in range(args.steps):
            n = args.odd_batch if i == args.recompile_step else args.batch
            x, y = batch(n)  # host numpy: transferred to the device by the jitted call
            t = time.perf_counter()
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = train_step(params, x, y)
                if i == args.item_step:
                    item = float(loss)  # the one host read-back (sync + D2H)
            step_ms.append(1000 * (time.perf_counter() - t))
            shapes.append(n)
        jax.block_until_ready(params)
    files = []
    for root, _, names in os.walk(os.path.join(args.logdir, "plugins", "profile")):
        files += [os.path.join(root, n) for n in names]
    summary = {
        "run": "jax_xplane",
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "host": socket.gethostname(),
        "argv": sys.argv[1:] if argv is None else argv,
        "compile_ms_before_trace": round(compile_ms, 1),
        "batch_per_step": shapes,
        "host_ms": [round(v, 2) for v in step_ms],
        "item_after_step": args.item_step,
        "item_value": item,
        "final_loss": float(loss),
        "files": {f: os.path.getsize(f) for f in sorted(files)},
    }
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
