#!/usr/bin/python3
"""visual_pos_geometry.py - whether a model's learned visual positions (merger.pos, config
visual_pos) carry the grid's geometry: their mean row norm, the leading singular values of the
centred table, and how well the first three singular vectors follow the merged grid's row and
column index (correlation; a table laid out as a grid has two large, equal singular values and
vectors that follow the rows and the columns). Needs numpy.

    python3 tools/visual_pos_geometry.py MODEL.safetensors
"""
import json
import struct
import sys

import numpy as np


def tensor(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        t = header[name]
        start, end = t["data_offsets"]
        f.seek(8 + n + start)
        dtype = {"F32": np.float32, "F16": np.float16}[t["dtype"]]
        return np.frombuffer(f.read(end - start), dtype=dtype).reshape(t["shape"]).astype(np.float64)


def main():
    try:
        pos = tensor(sys.argv[1], "merger.pos")
    except KeyError:
        sys.exit(f"{sys.argv[1]}: no merger.pos (the config has no visual_pos)")
    g = int(round(pos.shape[0] ** 0.5))
    u, s, _ = np.linalg.svd(pos - pos.mean(0), full_matrices=False)
    rows, cols = np.arange(pos.shape[0]) // g, np.arange(pos.shape[0]) % g
    print(f"{sys.argv[1]}: merger.pos {pos.shape[0]} × {pos.shape[1]}, row norm "
          f"{np.linalg.norm(pos, axis=1).mean():.3f}; singular values {np.round(s[:6], 3)}")
    for k in range(min(3, u.shape[1])):
        print(f"  vector {k}: correlation with the row {np.corrcoef(u[:, k], rows)[0, 1]:+.2f}, "
              f"with the column {np.corrcoef(u[:, k], cols)[0, 1]:+.2f}")


if __name__ == "__main__":
    main()
