#!/usr/bin/python3
"""bench_train_torch.py - the PyTorch peer of `changelens-cli bench --train`: the same training
step (forward over each sample's image sequence with stop_grad on the predecessor state, the
decoder over the whole sequence, masked next-token cross-entropy averaged per sample and over
the batch, backward, gradient clipping, AdamW) on the same model file and the same samples, in
float32 on the CPU with all cores; prints one JSON object.

    /usr/bin/python3 tests/reference/bench_train_torch.py --model M --samples S.json --pixels P.f32
    .../venv/bin/python tests/reference/bench_train_torch.py ... --torch-compile

The decoder runs each layer over the whole sequence without a KV cache (TrainLayer: the
reference layer's weights and math, causal mask, no cache writes), as a training step needs.
--torch-compile compiles the encoder blocks, the merger and these layers (dynamic shapes: the
sequence length varies per sample; the backward through AOTAutograd); the compile happens in the
untimed --warmup steps, so give it enough of them (the C bench passes its own --warmup).

--samples is a JSON list, one object per sample: {"ids": [...], "mask": [...], "n_images": k}
where ids are the decoder positions with every visual position as -1 (M of them per image, in
order) and mask[t] = 1 when position t's prediction of ids[t+1] is supervised, exactly the C
trainer's ClTrainSample. --pixels holds every sample's images back to back as little-endian f32
[C, S, S] each. The C bench writes both; the step is timed as the median of --repeat steps
after --warmup steps; step k trains on samples [k·batch, (k+1)·batch).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sve_reference as R  # noqa: E402
from bench_torch import compile_model  # noqa: E402


class TrainLayer(torch.nn.Module):
    """A decoder layer over a whole sequence from position 0, without the KV cache: the
    reference DecoderLayer's weights and math (RMSNorm, GQA attention with 1-D RoPE and a causal
    mask, SwiGLU)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, cos, sin):
        lay, a = self.layer, self.layer.attn
        n, g = x.shape[0], a.hq // a.hkv
        h = lay.attn_norm(x)
        q = R.apply_rope_1d(R.split_heads(a.q(h), a.hq), cos, sin)
        k = R.apply_rope_1d(R.split_heads(a.k(h), a.hkv), cos, sin)
        v = R.split_heads(a.v(h), a.hkv)
        qpos = torch.arange(n, device=x.device).repeat(g)  # row r of the g·n rows: position r % n
        mask = torch.arange(n, device=x.device)[None, :] <= qpos[:, None]
        o = R.attention(q.reshape(a.hkv, g * n, a.hd), k, v, mask).reshape(a.hq, n, a.hd)
        x = x + a.o(R.merge_heads(o))
        h = lay.mlp_norm(x)
        return x + lay.mlp.down(F.silu(lay.mlp.gate(h)) * lay.mlp.up(h))


def compile_for_training(model, layers):
    """torch.compile what bench_torch.py compiles (encoder blocks, merger) and the training
    layers (dynamic shapes); the cached decoder layers it also wraps are not called here."""
    compile_model(model)
    return [torch.compile(t, dynamic=True) for t in layers]


def sample_loss(model, layers, pixels, ids, mask, n_images):
    """Mean masked cross-entropy of one sample, as core/train/trainmodel.c computes it."""
    cfg = model.cfg
    state = R.EncoderState()
    visuals = []
    for t in range(n_images):
        out = model.encode(pixels[t], state, image_index=t)
        visuals.append(out.visual)
        # the paper's stop_grad: the next image reads this one's block inputs as constants
        state.blocks = [b.detach() for b in state.blocks]
    # rebuild the prompt with one <image> per image (assemble expands it to M rows)
    prompt, i, m = [], 0, cfg.n_visual
    while i < len(ids):
        if ids[i] == -1:
            prompt.append(R.TOKEN_IMAGE)
            i += m
        else:
            prompt.append(ids[i])
            i += 1
    x = model.assemble(prompt, visuals)
    # the decoder's layers (forward_embeds without its head and its KV cache), then the LM head
    # on the supervised rows only, as the C trainer does: the peer does no work the loss does
    # not need
    dec = model.dec
    cos, sin = dec.rope(0, x.shape[0], x)
    for layer in layers:
        x = layer(x, cos, sin)
    sel = torch.tensor([t for t in range(len(ids) - 1) if mask[t]], dtype=torch.long,
                       device=x.device)
    targets = torch.tensor([ids[t + 1] for t in sel.tolist()], dtype=torch.long, device=x.device)
    h = dec.norm(x[sel])
    w = dec.embed.weight if cfg.tie_embeddings else dec.lm_head.weight
    return F.cross_entropy(F.linear(h, w), targets)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--pixels", required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--batch", type=int, required=True,
                    help="samples per step: step k takes samples [k*batch, (k+1)*batch)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--tf32", action="store_true",
                    help="let cuBLAS use TF32 for float32 products (as CHANGELENS_CUDA_MATH=tf32)")
    ap.add_argument("--bf16", action="store_true",
                    help="BF16 products with f32 accumulation (as CHANGELENS_CUDA_MATH=bf16)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench_train_torch: --device cuda, but this PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    # BF16 products on the tensor cores (f32 accumulation), the parameters kept f32
    if args.bf16:
        torch.set_float32_matmul_precision("medium")
    model, _ = R.load_model(args.model, dtype=torch.float32, device=args.device)
    layers = [TrainLayer(layer) for layer in model.dec.layers()]
    if args.torch_compile:
        if not hasattr(torch, "compile"):
            sys.exit(f"bench_train_torch: torch.compile is unavailable in torch {torch.__version__}")
        layers = compile_for_training(model, layers)
    cfg = model.cfg
    with open(args.samples) as f:
        samples = json.load(f)
    raw = np.fromfile(args.pixels, dtype="<f4")
    per_image = cfg.channels * cfg.image_size * cfg.image_size
    need = sum(s["n_images"] for s in samples) * per_image
    if raw.size != need:
        sys.exit(f"bench_train_torch: {args.pixels} holds {raw.size} floats, expected {need}")
    pix, at = [], 0
    for s in samples:
        n = s["n_images"] * per_image
        pix.append(torch.from_numpy(raw[at:at + n].reshape(
            s["n_images"], cfg.channels, cfg.image_size, cfg.image_size).copy()).to(args.device))
        at += n

    # decay on matrices only, as core/train/optim.c does
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and not n.endswith("sve.null")]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and not n.endswith("sve.null"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)

    def step(k):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        lo, hi = k * args.batch, (k + 1) * args.batch
        for s, p in zip(samples[lo:hi], pix[lo:hi]):
            loss = sample_loss(model, layers, p, s["ids"], s["mask"], s["n_images"]) / args.batch
            loss.backward()
            total = total + loss.detach()  # (no device sync per sample)
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        return float(total)  # (waits for the device)

    if args.batch < 1 or len(samples) % args.batch:
        sys.exit("bench_train_torch: the samples must be whole batches")
    n_steps = len(samples) // args.batch
    if n_steps <= args.warmup:
        sys.exit("bench_train_torch: no timed step after the warmup")
    losses, times = [], []
    for k in range(n_steps):
        t0 = time.perf_counter()
        loss = step(k)
        dt = (time.perf_counter() - t0) * 1e3
        losses.append(loss)
        if k >= args.warmup:
            times.append(dt)
    timed = samples[args.warmup * args.batch:]
    positions = sum(len(s["ids"]) for s in timed) / (n_steps - args.warmup)
    step_ms = statistics.median(times)
    print(json.dumps({
        "torch_version": torch.__version__,
        "torch_compile": bool(args.torch_compile),
        "threads": torch.get_num_threads(),
        "device": args.device,
        "batch": args.batch,
        "steps": n_steps,
        "positions_per_step": positions,
        "step_ms": step_ms,
        "samples_per_s": args.batch / (step_ms / 1e3),
        "positions_per_s": positions / (step_ms / 1e3),
        "losses": losses,
    }))


if __name__ == "__main__":
    main()
