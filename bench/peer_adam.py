#!/usr/bin/env python3
"""Times peer CPU Adam implementations next to ztier's on the same sizes and threads.

    python3 bench/peer_adam.py --ztier build/tools/ztier [--params 1e8] [--threads 2]

Peers, each only when importable: torch.optim.AdamW(fused=True) on CPU (and the foreach
variant), DeepSpeed's DeepSpeedCPUAdam. ztier's figure comes from `ztier bench adam --json`
run in the same process tree. Prints params/s and the ratio of each peer to ztier.
Nothing here is needed by CI; the README reports the figures measured with it."""
import argparse
import json
import statistics
import subprocess
import time


def time_torch(params, threads, fused, reps):
    import torch
    torch.set_num_threads(threads)
    p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
    p.grad = torch.full_like(p, 1e-3)
    kwargs = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, **kwargs)
    opt.step()  # warm-up: allocates the state
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return params / statistics.median(times)


def time_deepspeed(params, threads, reps):
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    torch.set_num_threads(threads)
    p = torch.zeros(params, dtype=torch.float32, requires_grad=True)
    p.grad = torch.full_like(p, 1e-3)
    opt = DeepSpeedCPUAdam([p], lr=1e-4, weight_decay=0.01, adamw_mode=True)
    opt.step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return params / statistics.median(times)


def time_ztier(binary, params, threads):
    out = subprocess.run([binary, "bench", "adam", "--params", str(params), "--threads",
                          str(threads), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["params_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ztier", required=True, help="path to the ztier command")
    ap.add_argument("--params", type=float, default=1e8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    n = int(args.params)
    results = {"ztier": time_ztier(args.ztier, n, args.threads)}
    peers = [("torch AdamW fused", lambda: time_torch(n, args.threads, True, args.reps)),
             ("torch AdamW foreach", lambda: time_torch(n, args.threads, False, args.reps)),
             ("DeepSpeedCPUAdam", lambda: time_deepspeed(n, args.threads, args.reps))]
    for name, fn in peers:
        try:
            results[name] = fn()
        except ImportError as e:
            print(f"{name}: not importable ({e}); skipped")
        except Exception as e:  # a peer that fails to run is reported, not fatal
            print(f"{name}: failed ({e}); skipped")
    print(f"{n} parameters, {args.threads} threads, fp32 gradients")
    for name, pps in results.items():
        print(f"  {name:22s} {pps:12.3g} params/s   ztier / this: {results['ztier'] / pps:6.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
