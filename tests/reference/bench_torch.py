#!/usr/bin/python3
"""bench_torch.py - the PyTorch peer of `changelens-cli bench`: the same "describe" work on the
same model file, in float32 on the CPU, timed the same way; prints one JSON object.

    /usr/bin/python3 tests/reference/bench_torch.py --model base.safetensors --tokens 32
    .../venv/bin/python tests/reference/bench_torch.py --model M --torch-compile

describe = encode the images as one sequence (stateful), prefill the prompt with each <image>
replaced by its visual tokens, then greedy-decode exactly --tokens new tokens with the KV cache
(no early stop; token 1 comes from the prefill, so there are tokens-1 decode steps).
`changelens-cli bench --vs-torch` passes --pixels (raw f32 [n_images, C, S, S]) and --prompt
(JSON id list, 259 = <image>) so both run on identical inputs; without them this script makes
its own. Timings are medians over --repeat runs after --warmup runs.

The peer is written to be fair: every product is a batched matmul (nn.Linear / torch.matmul
into MKL/OpenBLAS), attention uses F.scaled_dot_product_attention where the torch version has
it (>= 2.0; matmul + softmax otherwise), grouped-query attention without copying K/V, a
preallocated KV cache written in place, torch.inference_mode(), and all cores
(torch.set_num_threads(os.cpu_count())). Nothing depends on the torch version beyond feature
checks, so a newer torch from a venv runs the same script.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sve_reference as R  # noqa: E402

DEFAULT_PROMPT = (
    "<|im_start|>system\nYou are an expert at detecting and describing changes between two "
    "images. Given a before and after image, describe what has changed.<|im_end|>\n"
    "<|im_start|>user\n<image>\nThis is the before image.<|im_end|>\n"
    "<|im_start|>assistant\nUnderstood. Please provide the after image.<|im_end|>\n"
    "<|im_start|>user\n<image>\nThis is the after image. Describe what has changed."
    "<|im_end|>\n<|im_start|>assistant\n")
SPECIALS = {"<|endoftext|>": R.TOKEN_ENDOFTEXT, "<|im_start|>": R.TOKEN_IM_START,
            "<|im_end|>": R.TOKEN_IM_END, "<image>": R.TOKEN_IMAGE, "<|pad|>": R.TOKEN_PAD}


def byte_ids(text):
    """Specials matched literally, everything else as byte ids (no merges: the C bench passes
    its own tokenisation with --prompt)."""
    ids, i = [], 0
    while i < len(text):
        for s, sid in SPECIALS.items():
            if text.startswith(s, i):
                ids.append(sid)
                i += len(s)
                break
        else:
            ids.extend(text[i].encode("utf-8"))
            i += 1
    return ids


def make_pixels(cfg, n_images):
    """Smooth images with a moving blob (as the C bench's fill_image)."""
    s = cfg.image_size
    y, x = np.meshgrid(np.arange(s, dtype=np.float64), np.arange(s, dtype=np.float64),
                       indexing="ij")
    out = np.empty((n_images, cfg.channels, s, s), dtype=np.float32)
    for t in range(n_images):
        for ch in range(cfg.channels):
            v = 0.4 * np.sin(0.07 * x + 0.5 * ch) * np.cos(0.05 * y) + 0.5 * np.exp(
                -((x - s * (0.3 + 0.1 * t)) ** 2 + (y - s * 0.5) ** 2) / (0.01 * s * s))
            out[t, ch] = np.clip(v, -1.0, 1.0)
    return out


def compile_model(model):
    """torch.compile the heavy parts: every encoder block, the merger, every decoder layer
    (dynamic shapes: the KV cache grows). The KV cache and the sampling stay in Python."""
    for l in range(model.cfg.enc_depth):
        setattr(model.enc, str(l), torch.compile(getattr(model.enc, str(l))))
    model.merger = torch.compile(model.merger)
    for l in range(model.cfg.dec_depth):
        setattr(model.dec, str(l), torch.compile(getattr(model.dec, str(l)), dynamic=True))


def sync(device):
    """Waits for the GPU's queued work (timings on CUDA must not stop at the launch)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def describe(model, pixels, prompt, tokens, device="cpu"):
    """One describe run; returns (per-image encode ms, prefill ms, decode ms, total ms, first)."""
    sync(device)
    t_start = time.perf_counter()
    state = R.EncoderState()
    enc_ms, visuals = [], []
    for t in range(pixels.shape[0]):
        t0 = time.perf_counter()
        visuals.append(model.encode(pixels[t], state, image_index=t).visual)
        sync(device)
        enc_ms.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    cache = R.KVCache(model.cfg, capacity=0)
    x = model.assemble(prompt, visuals)
    cache.capacity = x.shape[0] + tokens + 1  # one allocation, as the C bench's cache
    logits = model.dec.forward_embeds(x, cache)
    first = int(torch.argmax(logits))  # the argmax syncs: the prefill is done
    t1 = time.perf_counter()
    tok = first
    for k in range(1, tokens):
        logits = model.dec.forward_ids([tok], cache)
        tok = int(torch.argmax(logits))
    t2 = time.perf_counter()
    return enc_ms, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t_start) * 1e3, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="model file (any preset)")
    ap.add_argument("--pixels", help="raw little-endian f32 [n_images, C, S, S] (default: made)")
    ap.add_argument("--n-images", type=int, default=2)
    ap.add_argument("--prompt", help="JSON list of token ids, 259 = <image> (default: the "
                    "ChatML describe prompt in byte ids)")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens, exactly (no stop)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--tf32", action="store_true",
                    help="let cuBLAS use TF32 for float32 products (as CHANGELENS_CUDA_MATH=tf32)")
    args = ap.parse_args()
    if args.tokens < 1 or args.repeat < 1 or args.n_images < 1:
        sys.exit("bench_torch: --tokens, --repeat and --n-images must be >= 1")

    torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench_torch: --device cuda, but this PyTorch sees no GPU")
    # the same products as ours: exact f32 unless TF32 was asked for on both sides
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    info = {"torch_version": torch.__version__, "threads": torch.get_num_threads(),
            "sdpa": R.HAVE_SDPA, "torch_compile": bool(args.torch_compile),
            "device": args.device, "tf32": bool(args.tf32)}
    if args.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    if args.torch_compile and not hasattr(torch, "compile"):
        info["error"] = f"torch.compile is unavailable in torch {torch.__version__} (needs >= 2.0)"
        print(info["error"], file=sys.stderr)
        print(json.dumps(info))
        sys.exit(2)

    model, _ = R.load_model(args.model, dtype=torch.float32, device=args.device)
    cfg = model.cfg
    if args.pixels:
        raw = np.fromfile(args.pixels, dtype="<f4")
        shape = (args.n_images, cfg.channels, cfg.image_size, cfg.image_size)
        if raw.size != np.prod(shape):
            sys.exit(f"bench_torch: {args.pixels} holds {raw.size} floats, expected "
                     f"{int(np.prod(shape))} for {shape}")
        pixels = torch.from_numpy(raw.reshape(shape).copy())
    else:
        pixels = torch.from_numpy(make_pixels(cfg, args.n_images))
    pixels = pixels.to(args.device)
    if args.prompt:
        with open(args.prompt) as f:
            prompt = [int(i) for i in json.load(f)]
    else:
        prompt = byte_ids(DEFAULT_PROMPT)
    if sum(1 for i in prompt if i == R.TOKEN_IMAGE) != args.n_images:
        sys.exit("bench_torch: the prompt's <image> count differs from --n-images")
    n_positions = len(prompt) + (cfg.n_visual - 1) * args.n_images
    if n_positions + args.tokens > cfg.max_len:
        sys.exit(f"bench_torch: {n_positions} + {args.tokens} positions exceed max_len")

    if args.torch_compile:
        compile_model(model)
    enc, pre, dec, tot = [], [], [], []
    with torch.inference_mode():
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            first = describe(model, pixels, prompt, args.tokens, args.device)[4]
        warmup_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(args.repeat):
            e, p, d, t, first = describe(model, pixels, prompt, args.tokens, args.device)
            enc += e
            pre.append(p)
            dec.append(d)
            tot.append(t)
    decode_ms = statistics.median(dec)
    info.update({
        "model": os.path.basename(args.model),
        "n_params": sum(p.numel() for p in model.parameters()),
        "n_images": args.n_images,
        "prompt_tokens": len(prompt),
        "prefill_positions": n_positions,
        "tokens": args.tokens,
        "warmup": args.warmup,
        "warmup_ms": warmup_ms,
        "repeat": args.repeat,
        "encode_ms_per_image": statistics.median(enc),
        "prefill_ms": statistics.median(pre),
        "decode_ms": decode_ms,
        # tokens-1 decode steps (token 1 comes from the prefill), as the C bench counts
        "decode_ms_per_token": decode_ms / (args.tokens - 1) if args.tokens > 1 else None,
        "describe_ms": statistics.median(tot),
        "first_token": first,
    })
    print(json.dumps(info))


if __name__ == "__main__":
    main()
