#!/usr/bin/env python3
"""effnet_peer.py - EfficientNet-Lite0 written again in PyTorch, as the peer that
core/model/effnet.c is checked against (test-effnet's /effnet/pytorch): the architecture read off
the pretrained state dict's names and shapes, BatchNorm applied as such (eps 1e-3; the C port
folds it into the convolutions), TensorFlow's "same" padding. One JSON object on stdout: the 1000
ImageNet logits and the stride-16 feature map.

    build/venv/bin/python tests/reference/effnet_peer.py --weights efficientnet-lite0-57934424.pth \
        --pixels chelsea.f32 --size 224 [--double]

--pixels: raw little-endian float32, size × size × 3 values in [0, 1], row-major and interleaved
(test-effnet writes the image it feeds the C port, so both sides see the same input); scaled here
as the Lite models were trained, (255·v − 127)/128. --double runs in float64 (how much of a
difference is float32 rounding). A test tool, never used by the product.
"""
import argparse
import json
import re
import sys

BN_EPS = 1e-3  # EfficientNet's BatchNorm epsilon (TensorFlow's default; PyTorch's is 1e-5)
# Strides are not in a state dict: Lite0's stages start where the block width changes (16, 24,
# 40, 80, 112, 192, 320), and each stage's first block has this stride.
STAGE_STRIDES = [1, 2, 2, 2, 1, 2, 1]
FEATURE16_WIDTH = 112  # the stride-16 map: after the last block of this width


def same_pad(x, k, stride):
    """TensorFlow's "same": output ceil(in / stride), the odd padding row/column at the end."""
    import torch.nn.functional as F
    h, w = x.shape[-2:]
    ph = max((-(-h // stride) - 1) * stride + k - h, 0)
    pw = max((-(-w // stride) - 1) * stride + k - w, 0)
    return F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))


class Net:
    """The state dict's tensors, and a forward pass over them (N, C, H, W)."""

    def __init__(self, sd, dtype):
        self.p = {k: v.to(dtype) for k, v in sd.items() if v.is_floating_point()}
        n = 1 + max(int(m.group(1)) for k in self.p
                    for m in [re.match(r"_blocks\.(\d+)\.", k)] if m)
        self.blocks, cin, stage = [], self.p["_conv_stem.weight"].shape[0], -1
        for b in range(n):
            pre = f"_blocks.{b}."
            dw = self.p[pre + "_depthwise_conv.weight"]  # (hidden, 1, k, k)
            cout = self.p[pre + "_project_conv.weight"].shape[0]
            first = b == 0 or cout != self.blocks[-1]["cout"]
            stage += first
            stride = STAGE_STRIDES[stage] if first else 1
            self.blocks.append({"pre": pre, "expand": pre + "_expand_conv.weight" in self.p,
                                "k": dw.shape[-1], "stride": stride, "cout": cout,
                                "skip": stride == 1 and cin == cout})
            cin = cout
        assert stage == len(STAGE_STRIDES) - 1, "not Lite0's seven stages"

    def bn(self, x, name):
        import torch.nn.functional as F
        p = self.p
        return F.batch_norm(x, p[name + ".running_mean"], p[name + ".running_var"],
                            p[name + ".weight"], p[name + ".bias"], training=False, eps=BN_EPS)

    def conv_bn(self, x, conv, bn, stride=1, groups=1, act=True):
        import torch.nn.functional as F
        w = self.p[conv + ".weight"]
        k = w.shape[-1]
        if k > 1:
            x = same_pad(x, k, stride)
        x = self.bn(F.conv2d(x, w, stride=stride, groups=groups), bn)
        return F.relu6(x) if act else x

    def forward(self, x):
        """logits (N, 1000) and the stride-16 map (N, 112, H/16, W/16)"""
        import torch
        x = self.conv_bn(x, "_conv_stem", "_bn0", stride=2)
        f16 = None
        for i, B in enumerate(self.blocks):
            pre, y = B["pre"], x
            if B["expand"]:
                y = self.conv_bn(y, pre + "_expand_conv", pre + "_bn0")
            y = self.conv_bn(y, pre + "_depthwise_conv", pre + "_bn1", stride=B["stride"],
                             groups=y.shape[1])
            y = self.conv_bn(y, pre + "_project_conv", pre + "_bn2", act=False)
            x = x + y if B["skip"] else y
            last = i + 1 == len(self.blocks) or self.blocks[i + 1]["cout"] != B["cout"]
            if B["cout"] == FEATURE16_WIDTH and last:
                f16 = x
        x = self.conv_bn(x, "_conv_head", "_bn1")
        x = torch.flatten(x.mean(dim=(2, 3)), 1)
        return x @ self.p["_fc.weight"].T + self.p["_fc.bias"], f16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True, help="the PyTorch state dict (.pth)")
    ap.add_argument("--pixels", required=True, help="raw f32, size × size × 3 in [0, 1]")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--double", action="store_true")
    a = ap.parse_args()
    import numpy as np
    import torch
    torch.set_num_threads(1)  # deterministic and light on a shared machine; the net is small
    dtype = torch.float64 if a.double else torch.float32
    try:
        sd = torch.load(a.weights, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        sd = torch.load(a.weights, map_location="cpu")
    rgb = np.fromfile(a.pixels, dtype="<f4")
    if rgb.size != a.size * a.size * 3:
        sys.exit(f"{a.pixels}: {rgb.size} values, not {a.size}×{a.size}×3")
    # the same float32 arithmetic as effnet.c's input scaling, then (1, 3, S, S)
    x = (np.float32(255) * rgb - np.float32(127)) / np.float32(128)
    x = torch.from_numpy(x.reshape(1, a.size, a.size, 3)).permute(0, 3, 1, 2).to(dtype)
    net = Net(sd, dtype)
    with torch.no_grad():
        logits, f16 = net.forward(x.contiguous())
    f16 = f16[0].permute(1, 2, 0).contiguous()  # (H, W, C): effnet.c's token order
    json.dump({"peer": "pytorch", "torch_version": torch.__version__,
               "dtype": str(dtype).replace("torch.", ""),
               "logits": logits[0].double().tolist(),
               "features16": {"shape": list(f16.shape),
                              "values": f16.double().flatten().tolist()}}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
