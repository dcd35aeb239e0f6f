#!/usr/bin/env python3
"""pth2safetensors.py - a PyTorch state dict (.pth) to a safetensors file, with Debian's python3
and the standard library only (no PyTorch): set-up runs it once on the pretrained
EfficientNet-Lite0 weights.

    python3 tools/pth2safetensors.py IN.pth OUT.safetensors

Reads both of PyTorch's formats: the zip archive (data.pkl + data/N) and the older sequence of
pickles (magic, protocol, system info, the state dict, the storage keys, then each storage as a
little-endian int64 element count and its bytes). The unpickler resolves only what a state dict
holds — an OrderedDict, torch._utils._rebuild_tensor_v2, the storage types — and refuses anything
else. Tensors are gathered through their offset and strides into contiguous row-major F32; integer
tensors (BatchNorm's num_batches_tracked) are left out.
"""
import array
import collections
import io
import json
import pickle
import struct
import sys
import zipfile

ELEM = {"FloatStorage": ("f", 4), "DoubleStorage": ("d", 8), "HalfStorage": ("e", 2),
        "LongStorage": ("q", 8), "IntStorage": ("i", 4)}


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


class StateDictUnpickler(pickle.Unpickler):
    def __init__(self, f, storages):
        super().__init__(f)
        self.storages = storages

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return lambda st, off, size, stride, *rest: Tensor(st, off, size, stride)
        if module == "torch" and name in ELEM:
            return name
        raise pickle.UnpicklingError(f"refused: {module}.{name} is not part of a state dict")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        stype, key = pid[1], str(pid[2])
        if stype not in ELEM:
            raise pickle.UnpicklingError(f"storage type {stype} is not supported")
        self.storages.setdefault(key, {"type": stype})
        return key


def load_legacy(f):
    storages = {}
    for what in ("magic number", "protocol version", "system info"):
        pickle.load(f)  # plain values: numbers and a dict of sizes
    sd = StateDictUnpickler(f, storages).load()
    keys = pickle.load(f)
    for key in keys:
        key = str(key)
        (n,) = struct.unpack("<q", f.read(8))
        code, size = ELEM[storages[key]["type"]]
        data = f.read(n * size)
        if len(data) != n * size:
            raise ValueError(f"storage {key}: truncated")
        storages[key]["data"] = array.array(code, data)
    return sd, storages


def load_zip(path):
    z = zipfile.ZipFile(path)
    pkl = next(n for n in z.namelist() if n.endswith("data.pkl"))
    prefix = pkl[: -len("data.pkl")]
    storages = {}
    sd = StateDictUnpickler(io.BytesIO(z.read(pkl)), storages).load()
    for key, st in storages.items():
        code, _ = ELEM[st["type"]]
        st["data"] = array.array(code, z.read(f"{prefix}data/{key}"))
    return sd, storages


def contiguous(t, storages):
    data = storages[t.storage]["data"]
    n = 1
    for s in t.size:
        n *= s
    out = array.array("f", bytes(4 * n))
    idx = [0] * len(t.size)
    for i in range(n):
        off = t.offset
        for d, v in enumerate(idx):
            off += v * t.stride[d]
        if not 0 <= off < len(data):
            raise ValueError("a tensor reaches past its storage")
        out[i] = data[off]
        for d in range(len(idx) - 1, -1, -1):
            idx[d] += 1
            if idx[d] < t.size[d]:
                break
            idx[d] = 0
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    if zipfile.is_zipfile(src):
        sd, storages = load_zip(src)
    else:
        with open(src, "rb") as f:
            sd, storages = load_legacy(f)
    header, blobs, at = {}, [], 0
    for name, t in sd.items():
        if not isinstance(t, Tensor) or storages[t.storage]["type"] in ("LongStorage", "IntStorage"):
            continue
        values = contiguous(t, storages)
        if sys.byteorder != "little":
            values.byteswap()
        raw = values.tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.size), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = {"source": src.rsplit("/", 1)[-1]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 64)
    tmp = dst + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    import os
    os.replace(tmp, dst)
    print(f"{dst}: {len(blobs)} tensors, {at // 4} values")


if __name__ == "__main__":
    main()
