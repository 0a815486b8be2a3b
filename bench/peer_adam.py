#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times peer CPU Adam implementations next to ztier's on the same sizes and threads.

    python3 bench/peer_adam.py --ztier build/tools/ztier [--params 1e8] [--threads 2]

Peers, each only when importable: torch.optim.AdamW(fused=True) on CPU (and the foreach
variant), DeepSpeed's DeepSpeedCPUAdam. ztier's figure comes from
`ztier bench adam --param-copy none --json` (the same work: fp32 parameters updated in
place, no copy). Every measurement, ztier's and each peer's, runs in a process of its own
(this VM's bandwidth differs from process to process), rounds interleaved. Prints params/s
and the median over rounds of ztier's figure over each peer's. Then, with ztier's kernel
loaded as a module (build/tools/libztier_peer_adam.so), ztier and the peers in one process
on tensors of their own, steps alternating: the comparison no process difference enters.

The clipped step: torch's clip_grad_norm_(max_norm=1.0) + fused AdamW step against ztier's
zt_step with gradient_clipping 1.0 (`ztier bench adam --clipped-step`: one layer through the
runtime, fp32 parameters), and against zt_step plus the backward release that accumulates the
gradient and takes the norm's sums (work torch's backward leaves to clip_grad_norm_).
Nothing here is needed by CI; the README reports the figures measured with it."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# torch's OpenMP threads would otherwise spin after each step and steal the cores from the
# ztier process measured next
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def params_per_s(make_optimizer, params, threads, reps):
    """Median steps of an optimizer over one fp32 tensor of `params` with a fixed gradient."""
    import torch
    torch.set_num_threads(threads)
    p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
    p.grad = torch.full_like(p, 1e-3)
    opt = make_optimizer([p])
    opt.step()  # warm-up: allocates the state
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return params / statistics.median(times)


def time_torch(params, threads, fused, reps):
    import torch
    kwargs = {"fused": True} if fused else {"foreach": True}
    return params_per_s(lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.01, **kwargs),
                        params, threads, reps)


def clipped_torch_s(params, threads, reps):
    """Median seconds of clip_grad_norm_(1.0) + a fused AdamW step over one fp32 tensor."""
    import torch
    torch.set_num_threads(threads)
    p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, fused=True)
    times = []
    for r in range(reps + 1):
        p.grad = torch.full_like(p, 1e-3)  # the backward pass's gradient (not timed)
        t0 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_([p], 1.0)
        opt.step()
        if r:  # the first allocates the state
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def clipped_ztier_s(binary, params, threads):
    """Median seconds from `ztier bench adam --clipped-step`: zt_step and release + zt_step
    with the parameters' home in device memory, then the same with it in host memory."""
    time.sleep(0.5)
    out = subprocess.run([binary, "bench", "adam", "--params", str(params), "--threads",
                          str(threads), "--clipped-step", "--json"], check=True,
                         capture_output=True, text=True)
    j = json.loads(out.stdout.strip().splitlines()[-1])
    return (j["clipped_step_s"], j["clipped_release_s"] + j["clipped_step_s"],
            j["clipped_host_step_s"], j["clipped_host_release_s"] + j["clipped_host_step_s"])


def time_deepspeed(params, threads, reps):
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    return params_per_s(lambda ps: DeepSpeedCPUAdam(ps, lr=1e-4, weight_decay=0.01,
                                                    adamw_mode=True), params, threads, reps)


def in_fresh_process(call):
    """Runs `call` (this module's function with its arguments, as Python text) in a new Python
    process, as ztier's measurement runs in a new process: on this VM a process's memory
    bandwidth moves by up to 2x from one process to the next, so every contender samples
    that alike (fresh memory, fresh threads) in every round. Returns its result (JSON)."""
    time.sleep(0.5)  # let the previous contender's threads go to sleep
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, json; sys.path.insert(0, {here!r}); import peer_adam as p; "
            f"print(json.dumps(p.{call}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_torch_fused(params, threads, reps):
    return time_torch(params, threads, True, reps)


def time_torch_foreach(params, threads, reps):
    return time_torch(params, threads, False, reps)


def importable(module):
    """Raises ImportError here, not in the child, when a peer is missing."""
    __import__(module)


def paired_in_process(shim, params, threads, reps):
    """ztier's kernel (loaded from the shim library) and the peers in one process, each on
    its own tensors, steps alternating (ztier, DeepSpeed, torch fused; the order rotates):
    returns {name: median params/s}, {peer: median of the per-step ratios ztier / peer} and
    {peer: largest difference of ztier's parameters from the peer's after the same steps,
    relative to the largest parameter} (the same work: it must be at fp32 rounding)."""
    import ctypes
    import torch
    torch.set_num_threads(threads)
    lib = ctypes.CDLL(shim)
    lib.zt_peer_pool.restype = ctypes.c_void_p
    lib.zt_peer_adamw.restype = ctypes.c_longlong
    f, ll, vp = ctypes.c_float, ctypes.c_longlong, ctypes.c_void_p
    lib.zt_peer_adamw.argtypes = [vp, vp, vp, vp, vp, ll, ll, f, f, f, f, f]
    lib.zt_peer_pool_free.argtypes = [vp]
    pool = lib.zt_peer_pool(threads)
    z = [torch.zeros(params, dtype=torch.float32) for _ in range(3)]  # param, m, v
    zg = torch.full_like(z[0], 1e-3)
    zstep = [0]

    def ztier_step():
        zstep[0] += 1
        lib.zt_peer_adamw(pool, z[0].data_ptr(), zg.data_ptr(), z[1].data_ptr(),
                          z[2].data_ptr(), params, zstep[0], 1e-4, 0.9, 0.999, 1e-8, 0.01)

    steps = {"ztier (same process)": ztier_step}
    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        peers = {"DeepSpeedCPUAdam": lambda ps: DeepSpeedCPUAdam(
            ps, lr=1e-4, weight_decay=0.01, adamw_mode=True)}
    except ImportError:
        peers = {}
    peers["torch AdamW fused"] = lambda ps: torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.01,
                                                             fused=True)
    tensors = {}
    for name, make in peers.items():
        p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
        p.grad = torch.full_like(p, 1e-3)
        opt = make([p])
        steps[name] = opt.step
        tensors[name] = p
    for step in steps.values():  # warm-up: the peers allocate their state
        step()
    names = list(steps)
    times = {k: [] for k in names}
    for r in range(reps):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            t0 = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - t0)
    lib.zt_peer_pool_free(pool)
    zname = names[0]
    scale = float(z[0].abs().max())
    diffs = {k: float((z[0] - p.detach()).abs().max()) / scale for k, p in tensors.items()}
    pps = {k: params / statistics.median(v) for k, v in times.items()}
    ratios = {k: statistics.median(b / a for a, b in zip(times[zname], v))
              for k, v in times.items() if k != zname}
    return pps, ratios, diffs


def time_ztier(binary, params, threads):
    time.sleep(0.5)  # let the previous peer's threads go to sleep
    # the peers update fp32 parameters in place and write no copy: the same work for ztier
    out = subprocess.run([binary, "bench", "adam", "--params", str(params), "--threads",
                          str(threads), "--param-copy", "none", "--json"], check=True,
                         capture_output=True, text=True)
    # timed as the peers are: steps back to back after a warm-up, the median
    return json.loads(out.stdout.strip().splitlines()[-1])["params_per_s_back_to_back"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ztier", required=True, help="path to the ztier command")
    ap.add_argument("--params", type=float, default=1e8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="timed steps per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (this machine is noisy)")
    ap.add_argument("--shim", help="ztier's Adam as a module for the same-process comparison "
                    "(default: libztier_peer_adam.so beside the ztier command, when built)")
    args = ap.parse_args()
    shim = args.shim or os.path.join(os.path.dirname(os.path.abspath(args.ztier)),
                                     "libztier_peer_adam.so")
    n = int(args.params)
    def peer(module, what):
        return lambda: (importable(module),
                        in_fresh_process(f"{what}({n}, {args.threads}, {args.reps})"))[1]

    runners = [("ztier", lambda: time_ztier(args.ztier, n, args.threads)),
               ("torch AdamW fused", peer("torch", "time_torch_fused")),
               ("torch AdamW foreach", peer("torch", "time_torch_foreach")),
               ("DeepSpeedCPUAdam", peer("deepspeed.ops.adam", "time_deepspeed"))]
    samples = {}
    for _ in range(args.rounds):  # ztier, peer, peer, ..., then again
        for name, fn in runners:
            if name in samples and samples[name] is None:
                continue
            try:
                samples.setdefault(name, []).append(fn())
            except ImportError as e:
                print(f"{name}: not importable ({e}); skipped")
                samples[name] = None
            except Exception as e:  # a peer that fails to run is reported, not fatal
                print(f"{name}: failed ({e}); skipped")
                samples[name] = None
    results = {k: statistics.median(v) for k, v in samples.items() if v}
    ratios = {k: statistics.median(z / p for z, p in zip(samples["ztier"], v))
              for k, v in samples.items() if v}
    print(f"{n} parameters, {args.threads} threads, fp32 gradients, {args.rounds} interleaved rounds "
          "(fp32 parameters updated in place, no parameter copy, by each; each measurement in "
          "its own process)")
    for name, pps in results.items():
        print(f"  {name:22s} {pps:12.3g} params/s (median)   ztier / this: {ratios[name]:6.2f} "
              "(median of rounds)")
    report = {"params_per_s": results, "ztier_over_peer": ratios}
    if os.path.exists(shim):
        try:
            importable("torch")
            call = f"paired_in_process({shim!r}, {n}, {args.threads}, {2 * args.reps + 1})"
            rounds = [in_fresh_process(call) for _ in range(args.rounds)]
            print(f"  same process: ztier's kernel ({os.path.basename(shim)}) and the peers on "
                  f"their own tensors, steps alternating, {args.rounds} processes of "
                  f"{2 * args.reps + 1} steps each:")
            same = {"params_per_s": {}, "ztier_over_peer": {}}
            for name in rounds[0][0]:
                pps = statistics.median(r[0][name] for r in rounds)
                same["params_per_s"][name] = pps
                line = f"    {name:22s} {pps:12.3g} params/s (median)"
                if name in rounds[0][1]:
                    ratio = statistics.median(r[1][name] for r in rounds)
                    same["ztier_over_peer"][name] = ratio
                    diff = max(r[2][name] for r in rounds)
                    same.setdefault("max_rel_param_diff", {})[name] = diff
                    line += (f"   ztier / this: {ratio:6.2f} (median of the processes' "
                             f"medians); parameters differ by {diff:.1e} of the largest")
                print(line)
            report["same_process"] = same
        except ImportError as e:
            print(f"same-process comparison: torch not importable ({e}); skipped")
    else:
        print(f"same-process comparison skipped: {shim} not built")
    clipped = []
    for _ in range(args.rounds):  # interleaved: ztier, torch, ztier, torch, ...
        try:
            z = clipped_ztier_s(args.ztier, n, args.threads)
            importable("torch")
            clipped.append(z + (in_fresh_process(
                f"clipped_torch_s({n}, {args.threads}, {args.reps})"),))
        except ImportError as e:
            print(f"clipped step: torch not importable ({e}); skipped")
            break
    if clipped:
        names = ["device_step", "device_release_step", "host_step", "host_release_step"]
        torch_s = statistics.median(c[4] for c in clipped)
        report["clipped"] = {"torch_clip_step_s": torch_s}
        print(f"  clipped step: torch clip_grad_norm_ + fused AdamW {torch_s:.4f} s (median); "
              "ztier (median s, and time / torch's, median of rounds):")
        for k, name in enumerate(names):
            med = statistics.median(c[k] for c in clipped)
            ratio = statistics.median(c[k] / c[4] for c in clipped)
            print(f"    {name:20s} {med:.4f} s  {ratio:.2f}")
            report["clipped"][name + "_s"] = med
            report["clipped"][name + "_over_torch"] = ratio
    print(json.dumps(report))


if __name__ == "__main__":
    main()
