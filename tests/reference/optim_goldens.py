#!/usr/bin/env python3
"""optim_goldens.py - AdamW goldens for tests/test-optim.c from torch.optim.AdamW.

Two parameter tensors (a 2-D "weight" that decays and a 1-D "bias" that does not, the rule of
core/train/optim.c), float32, 7 steps with a different learning rate each step (as the
warmup+cosine schedule gives) and fixed pseudo-random gradients (written into the JSON with the
results, so the C test needs only the JSON, never torch).

    /usr/bin/python3 tests/reference/optim_goldens.py > tests/goldens/optim.json
"""
import json
import math

import torch


def lcg_values(seed, n):
    # values in [-1, 1) with 24 bits: exact in float32, so C and Python agree bit for bit
    s = seed
    out = []
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(((s >> 40) / float(1 << 23)) - 1.0)
    return out


def main():
    torch.manual_seed(0)
    w0 = lcg_values(1, 12)         # weight (3, 4)
    b0 = lcg_values(2, 4)          # bias (4)
    w = torch.tensor(w0, dtype=torch.float32).reshape(3, 4).requires_grad_(True)
    b = torch.tensor(b0, dtype=torch.float32).requires_grad_(True)
    cfg = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt = torch.optim.AdamW([
        {"params": [w], "weight_decay": cfg["weight_decay"]},
        {"params": [b], "weight_decay": 0.0},
    ], lr=cfg["lr"], betas=cfg["betas"], eps=cfg["eps"], foreach=False)
    lrs = [0.0, 5e-3, 1e-2, 8e-3, 5e-3, 2e-3, 1e-3]
    steps = []
    for i, lr in enumerate(lrs):
        gw = torch.tensor(lcg_values(100 + i, 12), dtype=torch.float32).reshape(3, 4)
        gb = torch.tensor(lcg_values(200 + i, 4), dtype=torch.float32)
        if i == 3:
            gw = gw * 1000.0   # a big gradient: v dominates
        w.grad = gw.clone()
        b.grad = gb.clone()
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        st_w = opt.state[w]
        st_b = opt.state[b]
        steps.append({
            "lr": lr,
            "grad": gw.reshape(-1).tolist() + gb.tolist(),
            "params": w.detach().reshape(-1).tolist() + b.detach().tolist(),
            "m": st_w["exp_avg"].reshape(-1).tolist() + st_b["exp_avg"].tolist(),
            "v": st_w["exp_avg_sq"].reshape(-1).tolist() + st_b["exp_avg_sq"].tolist(),
        })
    print(json.dumps({
        "torch": torch.__version__,
        "betas": list(cfg["betas"]), "eps": cfg["eps"], "weight_decay": cfg["weight_decay"],
        "n_weight": 12, "n_bias": 4,
        "init": w0 + b0,
        "steps": steps,
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
