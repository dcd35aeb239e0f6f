#!/usr/bin/env python3
"""Data for the dot-reading probes of docs/runs/2026-11-26-dots-clutter.md.

Reads a `changelens-cli synth --task dots-ground` folder and writes ShareGPT JSONL variants
(for `changelens-cli train --data`) whose answer is the dot's cell on a coarse grid, "c r",
with no system prompt, so that a small model shows within minutes whether it reads the dot:

  clutter   the synth images as they are
  blend A   the screen-like background faded to A (0 = flat grey 235, 1 = as drawn),
            the red dot kept at full strength
  plain     a flat grey background with a red disc of the same radius at a random place
  square S  a red S x S square at the centre of a random cell, drawn over the synth image
            (--flat: over flat grey 235 instead)
  redness   the synth image with its red channel replaced by max(0, R - G - B)

Needs numpy. PNGs are read and written here (8-bit RGB, no other dependency).

  python3 tools/probe-dots-reading.py SYNTH_DIR OUT_DIR VARIANT [ARG] [--grid G] [--n N]
"""
import argparse
import json
import os
import random
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    data = open(path, "rb").read()
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                sys.exit(f"{path}: only 8-bit RGB/RGBA PNGs")
            ch = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), np.int32)
    prev = np.zeros(w * ch, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:  # sub, average, Paeth: left to right
            cur = np.zeros(w * ch, np.int32)
            for x in range(w * ch):
                a = cur[x - ch] if x >= ch else 0
                c = prev[x - ch] if x >= ch else 0
                if f == 1:
                    p = a
                elif f == 3:
                    p = (a + prev[x]) // 2
                else:
                    pp = a + prev[x] - c
                    pa, pb, pc = abs(pp - a), abs(pp - prev[x]), abs(pp - c)
                    p = a if pa <= pb and pa <= pc else prev[x] if pb <= pc else c
                cur[x] = (line[x] + p) & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, ch)[:, :, :3]


def write_png(path, im):
    im = np.clip(im, 0, 255).astype(np.uint8)
    h, w, _ = im.shape
    raw = b"".join(b"\x00" + im[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def red_mask(im):
    return (im[:, :, 0] > 180) & (im[:, :, 1] < 90) & (im[:, :, 2] < 90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("synth_dir")
    ap.add_argument("out_dir")
    ap.add_argument("variant", choices=["clutter", "blend", "plain", "square", "redness"])
    ap.add_argument("arg", nargs="?", type=float)
    ap.add_argument("--grid", type=int, default=5)
    ap.add_argument("--n", type=int, default=0, help="at most N samples (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flat", action="store_true", help="square: over flat grey")
    a = ap.parse_args()
    if a.variant in ("blend", "square") and a.arg is None:
        ap.error(f"{a.variant} needs its argument")
    rng = random.Random(a.seed)
    os.makedirs(os.path.join(a.out_dir, "images"), exist_ok=True)
    g = a.grid
    lines = open(os.path.join(a.synth_dir, "data.jsonl")).read().splitlines()
    if a.n:
        lines = lines[:a.n]
    with open(os.path.join(a.out_dir, "data.jsonl"), "w") as out:
        for i, line in enumerate(lines):
            s = json.loads(line)
            src = os.path.abspath(os.path.join(a.synth_dir, s["images"][0]))
            x, y = s["answer"]["point"]
            question = "Where is the red dot?"
            if a.variant == "clutter":
                path = src
            else:
                im = read_png(src).astype(float)
                h, w, _ = im.shape
                if a.variant == "blend":
                    red = red_mask(im)
                    im = a.arg * im + (1 - a.arg) * 235.0
                    im[red] = (255, 0, 0)
                elif a.variant == "plain":
                    r = np.sqrt(red_mask(im).sum() / np.pi)
                    cx, cy = rng.uniform(r + 2, w - r - 2), rng.uniform(r + 2, h - r - 2)
                    yy, xx = np.mgrid[0:h, 0:w]
                    im[:] = 235.0
                    im[(xx + 0.5 - cx) ** 2 + (yy + 0.5 - cy) ** 2 <= r * r] = (255, 0, 0)
                    x, y = cx / w, cy / h
                elif a.variant == "redness":
                    im[:, :, 0] = np.maximum(0, im[:, :, 0] - im[:, :, 1] - im[:, :, 2])
                else:
                    if a.flat:
                        im[:] = 235.0
                    side, cell = int(a.arg), w // g
                    c, r = rng.randrange(g), rng.randrange(g)
                    o = (cell - side) // 2
                    im[r * cell + o:r * cell + o + side, c * cell + o:c * cell + o + side] = (255, 0, 0)
                    x, y = (c + 0.5) / g, (r + 0.5) / g
                    question = "Where is the red square?"
                path = os.path.abspath(os.path.join(a.out_dir, "images", f"{i:06d}.png"))
                write_png(path, im)
            answer = f"{min(g - 1, int(x * g))} {min(g - 1, int(y * g))}"
            out.write(json.dumps({"id": s["id"], "images": [path], "messages": [
                {"role": "user", "content": "<image>\n" + question},
                {"role": "assistant", "content": answer}]}) + "\n")
    print(f"wrote {len(lines)} samples to {a.out_dir}/data.jsonl")


if __name__ == "__main__":
    main()
