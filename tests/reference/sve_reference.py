"""sve_reference.py - independent PyTorch reference of the ChangeLens model (docs/MODEL.md).

A test tool, never used by the product: the goldens (make_goldens.py) and the PyTorch benchmark
peer (bench_torch.py) are built on it. Needs only torch and numpy (no safetensors package).

    model = load_model("model.safetensors", dtype=torch.float64)
    state = EncoderState()
    taps = {}
    enc = model.encode(pixels, state, image_index=0, taps=taps, want_delta=True)
    ...
    hidden, logits = model.decoder.forward_embeds(model.assemble(ids, visuals), cache, taps=taps)

Every formula below names the docs/MODEL.md section it implements.
"""

import json
import math
import struct
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKEN_ENDOFTEXT = 256
TOKEN_IM_START = 257
TOKEN_IM_END = 258
TOKEN_IMAGE = 259
TOKEN_PAD = 260

VARIANTS = ("stateless", "cross", "cross_ffn", "self_ext", "adaln_zero", "self_ffn")
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0

# --------------------------------------------------------------------------------------------
# safetensors (docs/MODEL.md §7): 8-byte LE header length, JSON header, raw little-endian data
# --------------------------------------------------------------------------------------------

_DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def read_safetensors(path):
    """Returns (tensors: dict name -> float32 numpy array, metadata: dict str -> str)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > 100 * 1024 * 1024 or 8 + hlen > len(blob):
        raise ValueError(f"{path}: bad header length {hlen}")
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    data = memoryview(blob)[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, ent in header.items():
        dt, shape, (b, e) = ent["dtype"], list(ent["shape"]), ent["data_offsets"]
        if dt not in _DTYPE_SIZE:
            raise ValueError(f"{path}: {name}: unsupported dtype {dt}")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= b <= e <= len(data)) or e - b != count * _DTYPE_SIZE[dt]:
            raise ValueError(f"{path}: {name}: bad data offsets {b}..{e}")
        raw = data[b:e]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:  # BF16: the top 16 bits of an f32
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        tensors[name] = arr.reshape(shape)
    return tensors, meta


def _to_bf16_bits(a):
    """f32 -> bf16 bit patterns, round to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    r[nan] = 0x7FC0
    return r


def write_safetensors(path, tensors, metadata=None, dtype="F32", align=64):
    """Writes tensors (dict name -> array-like, insertion order kept) as `dtype`.
    The header is padded with spaces so the data starts `align`-byte aligned (§7)."""
    header, chunks, off = {}, [], 0
    for name, a in tensors.items():
        a = np.asarray(a, dtype=np.float32)
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        elif dtype == "BF16":
            raw = _to_bf16_bits(a).astype("<u2").tobytes()
        else:
            raise ValueError(f"unsupported dtype {dtype}")
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}, **header}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(hjson))) % align
    hjson += b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)


# --------------------------------------------------------------------------------------------
# config (docs/MODEL.md §1)
# --------------------------------------------------------------------------------------------

PRESETS = {
    "tiny": dict(image_size=160, patch_size=16, enc_dim=192, enc_depth=6, enc_heads=3,
                 enc_mlp=768, merger_hidden=768, dec_dim=256, dec_depth=6, dec_heads=4,
                 dec_kv_heads=2, dec_mlp=704, vocab_size=4096, max_len=2048),
    "base": dict(image_size=384, patch_size=16, enc_dim=768, enc_depth=12, enc_heads=12,
                 enc_mlp=3072, merger_hidden=3072, dec_dim=1024, dec_depth=12, dec_heads=16,
                 dec_kv_heads=4, dec_mlp=2816, vocab_size=32000, max_len=4096),
    "large": dict(image_size=768, patch_size=16, enc_dim=1152, enc_depth=27, enc_heads=16,
                  enc_mlp=4304, merger_hidden=4608, dec_dim=2560, dec_depth=36, dec_heads=32,
                  dec_kv_heads=8, dec_mlp=9728, vocab_size=151936, max_len=8192),
}


@dataclass
class Config:
    format: int = 1
    image_size: int = 160
    patch_size: int = 16
    channels: int = 3
    enc_dim: int = 192
    enc_depth: int = 6
    enc_heads: int = 3
    enc_mlp: int = 768
    enc_rope_base: float = 10000.0
    sve_variant: str = "cross_ffn"
    sve_first: str = "own"
    sve_cross_pos: bool = True
    sve_out_init_std: float = 1e-4
    merger_hidden: int = 768
    dec_dim: int = 256
    dec_depth: int = 6
    dec_heads: int = 4
    dec_kv_heads: int = 2
    dec_mlp: int = 704
    vocab_size: int = 4096
    rope_base: float = 10000.0
    max_len: int = 2048
    norm_eps: float = 1e-6
    tie_embeddings: bool = False
    visual_pos: bool = False
    visual_center: bool = False
    enc_pos: bool = False

    @classmethod
    def from_dict(cls, d):
        """From the JSON of §1 (nested "sve" object); missing keys take the tiny preset's
        values."""
        c = cls()
        for k, v in d.items():
            if k == "sve":
                for sk, sv in v.items():
                    setattr(c, "sve_" + sk, sv)
            elif hasattr(c, k):
                setattr(c, k, v)
        c.validate()
        return c

    @classmethod
    def from_json(cls, s):
        return cls.from_dict(json.loads(s))

    @classmethod
    def preset(cls, name):
        return cls(**PRESETS[name])

    def to_dict(self):
        d = {}
        for k in self.__dataclass_fields__:
            if not k.startswith("sve_"):
                d[k] = getattr(self, k)
        d["sve"] = {"variant": self.sve_variant, "first": self.sve_first,
                    "cross_pos": bool(self.sve_cross_pos),
                    "out_init_std": self.sve_out_init_std}
        return d

    def to_json(self):
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def validate(self):
        if self.sve_variant not in VARIANTS:
            raise ValueError(f"unknown sve.variant {self.sve_variant!r}")
        if self.sve_first not in ("own", "null"):
            raise ValueError(f"unknown sve.first {self.sve_first!r}")
        if self.image_size % self.patch_size or self.grid % 2:
            raise ValueError("image_size must be a multiple of patch_size with an even grid")
        if self.enc_dim % self.enc_heads or (self.enc_dim // self.enc_heads) % 4:
            raise ValueError("encoder head dim must divide enc_dim and be a multiple of 4")
        if self.dec_dim % self.dec_heads or (self.dec_dim // self.dec_heads) % 2:
            raise ValueError("decoder head dim must divide dec_dim and be even")
        if self.dec_heads % self.dec_kv_heads:
            raise ValueError("dec_heads must be a multiple of dec_kv_heads")
        if self.channels not in (1, 3):
            raise ValueError("channels must be 1 or 3")

    # derived sizes
    @property
    def grid(self):
        return self.image_size // self.patch_size

    @property
    def n_patches(self):
        return self.grid * self.grid

    @property
    def n_visual(self):
        return self.n_patches // 4

    @property
    def has_cross(self):
        return self.sve_variant in ("cross", "cross_ffn", "self_ffn")

    @property
    def has_sve_ffn(self):
        return self.sve_variant in ("cross_ffn", "self_ffn")


# --------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------

def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the last dim: the pairing (i, i + n/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_tables_1d(pos, dim, base, dtype, device):
    """cos/sin [n, dim] for rotate-half RoPE: angle pos * base^(-2i/dim), i < dim/2, repeated."""
    i = torch.arange(dim // 2, dtype=torch.float64, device=device)
    inv = base ** (-2.0 * i / dim)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rope_tables_2d(grid, head_dim, base, dtype, device):
    """§3.2: dims [0, h/2) rotate with the row, [h/2, h) with the column; token n = r*G + c."""
    n = torch.arange(grid * grid, device=device)
    rows, cols = n // grid, n % grid
    cr, sr = rope_tables_1d(rows, head_dim // 2, base, dtype, device)
    cc, sc = rope_tables_1d(cols, head_dim // 2, base, dtype, device)
    return torch.cat((cr, cc), dim=-1), torch.cat((sr, sc), dim=-1)


def apply_rope_2d(x, cos, sin):
    """x [..., n, h]; each half rotates on its own (rotate-half within the half)."""
    q = x.shape[-1] // 2
    xr, xc = x[..., :q], x[..., q:]
    cr, cc = cos[:, :q], cos[:, q:]
    sr, sc = sin[:, :q], sin[:, q:]
    return torch.cat((xr * cr + rotate_half(xr) * sr, xc * cc + rotate_half(xc) * sc), dim=-1)


def apply_rope_1d(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def split_heads(x, n_heads):
    """[n, H*h] -> [H, n, h]"""
    n = x.shape[0]
    return x.view(n, n_heads, -1).transpose(0, 1)


def merge_heads(x):
    """[H, n, h] -> [n, H*h]"""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def attention(q, k, v, mask=None):
    """Softmax attention, scale 1/sqrt(h). q [B, n, h], k/v [B, m, h]; mask [n, m] bool
    (True = may attend) or None."""
    if HAVE_SDPA:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


class MLP(nn.Module):
    """fc2(GELU(fc1(x))), GELU in the exact erf form."""

    def __init__(self, d, f, d_out=None):
        super().__init__()
        self.fc1 = nn.Linear(d, f)
        self.fc2 = nn.Linear(f, d if d_out is None else d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


# --------------------------------------------------------------------------------------------
# encoder (docs/MODEL.md §3)
# --------------------------------------------------------------------------------------------

class SelfAttention(nn.Module):
    """The block's self-attention: qkv rows q, k, v; 2-D RoPE on q and k; output projection.
    `extra` (self_ext): normalised state tokens whose keys/values extend the key set."""

    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, h, cos, sin, extra=None, extra_rope=False):
        d = h.shape[-1]
        q, k, v = split_heads(self.qkv(h), 3 * self.n_heads).split(self.n_heads, dim=0)
        q, k = apply_rope_2d(q, cos, sin), apply_rope_2d(k, cos, sin)
        if extra is None:
            return self.out(merge_heads(attention(q, k, v))), None
        # self_ext: keys/values [X; Y] with Y's from the same k/v rows of attn.qkv
        kv_y = F.linear(extra, self.qkv.weight[d:], self.qkv.bias[d:])
        ky, vy = split_heads(kv_y, 2 * self.n_heads).split(self.n_heads, dim=0)
        if extra_rope:
            ky = apply_rope_2d(ky, cos, sin)
        kk, vv = torch.cat((k, ky), dim=1), torch.cat((v, vy), dim=1)
        s = torch.matmul(q, kk.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        p = torch.softmax(s, dim=-1)
        n = h.shape[0]
        o = self.out(merge_heads(torch.matmul(p, vv)))
        # the update (§3.4): the predecessor's share of the output, through W_out without bias
        upd = F.linear(merge_heads(torch.matmul(p[..., n:], vy)), self.out.weight)
        return o, upd


class CrossSVE(nn.Module):
    """cross / cross_ffn / self_ffn (§3.4): X = X_in + CA(LN_s(X_in), LN_s(Y)) [+ FFN]."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.enc_dim
        self.n_heads = cfg.enc_heads
        self.cross_pos = bool(cfg.sve_cross_pos)
        self.ln = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)
        if cfg.has_sve_ffn:
            self.ffn_ln = nn.LayerNorm(d, eps=cfg.norm_eps)
            self.fc1 = nn.Linear(d, cfg.enc_mlp)
            self.fc2 = nn.Linear(cfg.enc_mlp, d)
        if cfg.sve_first == "null":
            self.null = nn.Parameter(torch.zeros(1, d))  # self_ffn has one too (never read)
        self.has_ffn = cfg.has_sve_ffn

    def forward(self, x, y, y_on_grid, cos, sin):
        """x [N, D] current block input, y [K, D] state; y_on_grid: y's tokens sit on the patch
        grid (predecessor or own features) and take RoPE; the null token takes none."""
        q = split_heads(self.q(self.ln(x)), self.n_heads)
        k, v = split_heads(self.kv(self.ln(y)), 2 * self.n_heads).split(self.n_heads, dim=0)
        if self.cross_pos:
            q = apply_rope_2d(q, cos, sin)
            if y_on_grid:
                k = apply_rope_2d(k, cos, sin)
        x = x + self.out(merge_heads(attention(q, k, v)))
        if self.has_ffn:
            x = x + self.fc2(F.gelu(self.fc1(self.ffn_ln(x))))
        return x


class AdaSVE(nn.Module):
    """adaln_zero (§3.4): pooled state -> SiLU -> linear -> (β1, γ1, α1, β2, γ2, α2)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.enc_dim
        self.ada = nn.Linear(d, 6 * d)
        if cfg.sve_first == "null":
            self.null = nn.Parameter(torch.zeros(d))

    def forward(self, c):
        return self.ada(F.silu(c)).chunk(6, dim=-1)


class NullOnly(nn.Module):
    """self_ext with first == null: just the learned null token."""

    def __init__(self, d):
        super().__init__()
        self.null = nn.Parameter(torch.zeros(1, d))


class EncoderBlock(nn.Module):
    """Pre-LN ViT block with the SVE module in front (§3.3)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.enc_dim
        self.cfg = cfg
        self.variant = cfg.sve_variant
        self.ln1 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.attn = SelfAttention(d, cfg.enc_heads)
        self.ln2 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.mlp = MLP(d, cfg.enc_mlp)
        if cfg.has_cross:
            self.sve = CrossSVE(cfg)
        elif self.variant == "adaln_zero":
            self.sve = AdaSVE(cfg)
        elif self.variant == "self_ext" and cfg.sve_first == "null":
            self.sve = NullOnly(d)

    def forward(self, x_in, mode, prev, cos, sin):
        """x_in [N, D]. mode: "prev" (Y = prev, the previous image's block input), "own"
        (§3.6 own: Y = X_in; adaln_zero c = 0) or "null" (the learned null state).
        Returns (x_out, sve_stream or None, update [N, D])."""
        v = self.variant
        if v == "self_ffn":
            mode, prev = "own", None  # Y := X_in for every image, first included
        if mode == "prev":
            y, y_grid = prev, True
        elif mode == "own":
            y, y_grid = x_in, True
        else:
            y, y_grid = None, False  # null

        if v in ("cross", "cross_ffn", "self_ffn"):
            if y is None:
                y = self.sve.null
            x = self.sve(x_in, y, y_grid, cos, sin)
            sve_stream, update = x, x - x_in
            x = x + self.attn(self.ln1(x), cos, sin)[0]
            x = x + self.mlp(self.ln2(x))
            return x, sve_stream, update

        if v == "self_ext":
            if y is None:
                y = self.sve.null
            a, update = self.attn(self.ln1(x_in), cos, sin, extra=self.ln1(y),
                                  extra_rope=y_grid and bool(self.cfg.sve_cross_pos))
            x = x_in + a
            x = x + self.mlp(self.ln2(x))
            return x, None, update

        if v == "adaln_zero":
            if mode == "prev":
                c = prev.mean(dim=0)
            elif mode == "own":
                c = torch.zeros_like(x_in[0])  # the paper's zero vector for the first image
            else:
                c = self.sve.null
            b1, g1, a1, b2, g2, a2 = self.sve(c)
            a = self.attn((1 + g1) * self.ln1(x_in) + b1, cos, sin)[0]
            x = x_in + (1 + a1) * a
            b = self.mlp((1 + g2) * self.ln2(x) + b2)
            x = x + (1 + a2) * b
            return x, None, a1 * a + a2 * b

        # stateless
        x = x_in + self.attn(self.ln1(x_in), cos, sin)[0]
        x = x + self.mlp(self.ln2(x))
        return x, None, torch.zeros_like(x)


class Merger(nn.Module):
    """2x2 merger (§3.8): LN, concatenate each 2x2 neighbourhood, fc2(GELU(fc1(.)))."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.enc_dim
        self.grid = cfg.grid
        self.ln = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.fc1 = nn.Linear(4 * d, cfg.merger_hidden)
        self.fc2 = nn.Linear(cfg.merger_hidden, cfg.dec_dim)
        # the learned visual positions ("merger.pos", config visual_pos), one per visual token
        self.pos = nn.Parameter(torch.zeros(self.grid ** 2 // 4, cfg.dec_dim)) \
            if cfg.visual_pos else None
        # config visual_center: the tokens minus their mean over the image, before the positions
        self.center = cfg.visual_center

    def forward(self, x):
        g, d = self.grid, x.shape[-1]
        x = self.ln(x).view(g // 2, 2, g // 2, 2, d)  # [i, a, j, b, D]: token (2i+a, 2j+b)
        x = x.permute(0, 2, 1, 3, 4).reshape(g * g // 4, 4 * d)  # (a,b) = 00, 01, 10, 11
        y = self.fc2(F.gelu(self.fc1(x)))
        if self.center:
            y = y - y.mean(dim=0, keepdim=True)
        return y + self.pos if self.pos is not None else y


@dataclass
class EncoderState:
    """§3.5: every block's X_in [N, D] of the last image encoded (None: no previous image)."""
    blocks: list = None

    def reset(self):
        self.blocks = None

    @property
    def has_prev(self):
        return self.blocks is not None


@dataclass
class EncoderOutput:
    visual: torch.Tensor          # [M, E]
    update_norm: torch.Tensor     # [depth, N]
    delta: torch.Tensor = None    # [M] when asked for


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.patch = nn.Conv2d(cfg.channels, cfg.enc_dim, cfg.patch_size, stride=cfg.patch_size)
        # the learned patch positions ("enc.pos", config enc_pos), added to the patch embedding
        self.pos = nn.Parameter(torch.zeros(cfg.grid ** 2, cfg.enc_dim)) if cfg.enc_pos else None
        for l in range(cfg.enc_depth):
            self.add_module(str(l), EncoderBlock(cfg))
        self._rope = None

    def blocks(self):
        return [getattr(self, str(l)) for l in range(self.cfg.enc_depth)]

    def rope(self, x):
        """cos/sin [N, h], cached per dtype/device."""
        if self._rope is None or self._rope[0].dtype != x.dtype or self._rope[0].device != x.device:
            h = self.cfg.enc_dim // self.cfg.enc_heads
            self._rope = rope_tables_2d(self.cfg.grid, h, self.cfg.enc_rope_base, x.dtype, x.device)
        return self._rope

    def embed(self, pixels):
        """§3.1: [C, S, S] -> [N, D], token n = r*G + c."""
        x = self.patch(pixels.unsqueeze(0))[0]  # [D, G, G]
        x = x.flatten(1).transpose(0, 1).contiguous()
        return x + self.pos if self.pos is not None else x

    def blocks_forward(self, x, modes, prevs, prefix=None, taps=None):
        """Runs the blocks; returns (x, per-block inputs, per-block updates)."""
        cos, sin = self.rope(x)
        ins, updates = [], []
        for l, blk in enumerate(self.blocks()):
            ins.append(x)
            x, sve_stream, upd = blk(x, modes[l], prevs[l] if prevs else None, cos, sin)
            updates.append(upd)
            if taps is not None:
                if sve_stream is not None:
                    taps[f"{prefix}enc.{l}.sve"] = sve_stream
                taps[f"{prefix}enc.{l}.update_norm"] = upd.norm(dim=-1)
                taps[f"{prefix}enc.{l}.out"] = x
        return x, ins, updates


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.enc = Encoder(cfg)
        self.merger = Merger(cfg)
        self.dec = Decoder(cfg)

    @property
    def dtype(self):
        return self.enc.patch.weight.dtype

    @property
    def device(self):
        return self.enc.patch.weight.device

    def encode(self, pixels, state, image_index=0, taps=None, want_delta=False):
        """Encodes one image [C, S, S] reading state's previous image, then makes it the state
        (§3.5). taps: dict filled with the §8 names `img{t}.*` when not None."""
        cfg = self.cfg
        pre = f"img{image_index}."
        pixels = torch.as_tensor(pixels, dtype=self.dtype, device=self.device)
        x0 = self.enc.embed(pixels)
        if taps is not None:
            taps[pre + "patch"] = x0
        depth = cfg.enc_depth
        if state.has_prev:
            modes, prevs = ["prev"] * depth, state.blocks
        else:
            modes, prevs = [cfg.sve_first] * depth, None
        x, ins, updates = self.enc.blocks_forward(x0, modes, prevs, pre, taps)
        visual = self.merger(x)
        upd_norm = torch.stack([u.norm(dim=-1) for u in updates])
        delta = None
        if want_delta:
            if state.has_prev:
                # §3.9: a second pass whose state is the image's own features (§3.6 `own`)
                x_own, _, _ = self.enc.blocks_forward(x0, ["own"] * depth, None)
                v_own = self.merger(x_own)
                delta = ((visual - v_own) ** 2).sum(dim=-1) / cfg.dec_dim
            else:
                delta = torch.zeros(cfg.n_visual, dtype=self.dtype, device=self.device)
        if taps is not None:
            taps[pre + "visual"] = visual
            if delta is not None:
                taps[pre + "delta"] = delta
        state.blocks = ins
        return EncoderOutput(visual=visual, update_norm=upd_norm, delta=delta)

    def assemble(self, ids, visuals):
        """§4: the prompt's embeddings; each <image> id is replaced by the next image's M rows."""
        rows, text, vi = [], [], 0
        emb = self.dec.embed.weight

        def flush():
            if text:
                rows.append(emb[torch.tensor(text, device=emb.device)])
                text.clear()

        for t in ids:
            if int(t) == TOKEN_IMAGE:
                flush()
                if vi >= len(visuals):
                    raise ValueError("more <image> tokens than images")
                rows.append(visuals[vi])
                vi += 1
            else:
                text.append(int(t))
        flush()
        return torch.cat(rows, dim=0)

    # ---- generation ----

    def greedy(self, ids, visuals, max_new, stop=True, taps=None, margins=None):
        """Prefill + greedy decoding with the KV cache. Returns the new ids (stopping after
        <|im_end|> when stop). margins: list filled with (top1 - top2) logit gaps per step."""
        cache = KVCache(self.cfg)
        x = self.assemble(ids, visuals)
        logits = self.dec.forward_embeds(x, cache, taps=taps)
        if taps is not None:
            taps["dec.logits"] = logits
        out = []
        for _ in range(max_new):
            if margins is not None:
                top = torch.topk(logits, 2).values
                margins.append(float(top[0] - top[1]))
            tok = int(torch.argmax(logits))
            out.append(tok)
            if stop and tok == TOKEN_IM_END:
                break
            if len(out) == max_new:
                break
            logits = self.dec.forward_ids([tok], cache)
        return out

    def beam_search(self, ids, visuals, max_new, beams=4, length_penalty=1.0):
        """Beam search with one KV cache per beam; score = sum log p / len^length_penalty.
        A beam finishes at <|im_end|>; returns the best finished (or live) sequence."""
        cache = KVCache(self.cfg)
        logits = self.dec.forward_embeds(self.assemble(ids, visuals), cache)
        live = [(0.0, [], cache, torch.log_softmax(logits, dim=-1))]
        done = []
        for step in range(max_new):
            cand = []
            for score, toks, c, lp in live:
                top = torch.topk(lp, beams)
                for v, i in zip(top.values.tolist(), top.indices.tolist()):
                    cand.append((score + v, toks + [i], c))
            cand.sort(key=lambda t: -t[0])
            live = []
            for score, toks, c in cand:
                if toks[-1] == TOKEN_IM_END:
                    done.append((score / len(toks) ** length_penalty, toks))
                elif len(live) < beams:
                    c2 = c.copy()
                    if step + 1 < max_new:
                        lp = torch.log_softmax(self.dec.forward_ids([toks[-1]], c2), dim=-1)
                    else:
                        lp = None
                    live.append((score, toks, c2, lp))
                if len(live) >= beams and len(done) >= beams:
                    break
            if not live or len(done) >= beams:
                break
        for score, toks, _, _ in live:
            done.append((score / len(toks) ** length_penalty, toks))
        return max(done, key=lambda t: t[0])[1]


# --------------------------------------------------------------------------------------------
# decoder (docs/MODEL.md §4)
# --------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class KVCache:
    """Per layer keys (after RoPE) and values in preallocated buffers [Hkv, capacity, hd],
    written in place; `length` positions are valid. Grows by doubling when a forward needs
    more room (capacity None: start with what the first forward needs)."""

    def __init__(self, cfg, capacity=None):
        self.cfg = cfg
        self.capacity = capacity
        self.k = [None] * cfg.dec_depth
        self.v = [None] * cfg.dec_depth
        self.length = 0

    def reserve(self, n, like):
        need = self.length + n
        if self.k[0] is not None and need <= self.k[0].shape[1]:
            return
        cap = max(need, self.capacity or 0, 2 * (self.k[0].shape[1] if self.k[0] is not None
                                                 else 0))
        cap = min(max(cap, need), max(self.cfg.max_len, need))
        hkv, hd = self.cfg.dec_kv_heads, self.cfg.dec_dim // self.cfg.dec_heads
        for l in range(self.cfg.dec_depth):
            k = like.new_zeros(hkv, cap, hd)
            v = like.new_zeros(hkv, cap, hd)
            if self.k[l] is not None:
                k[:, :self.length] = self.k[l][:, :self.length]
                v[:, :self.length] = self.v[l][:, :self.length]
            self.k[l], self.v[l] = k, v

    def copy(self):
        c = KVCache(self.cfg, self.capacity)
        c.k = [None if t is None else t.clone() for t in self.k]
        c.v = [None if t is None else t.clone() for t in self.v]
        c.length = self.length
        return c


class DecoderAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        e, hq, hkv = cfg.dec_dim, cfg.dec_heads, cfg.dec_kv_heads
        self.hq, self.hkv, self.hd = hq, hkv, e // hq
        self.q = nn.Linear(e, hq * self.hd, bias=False)
        self.k = nn.Linear(e, hkv * self.hd, bias=False)
        self.v = nn.Linear(e, hkv * self.hd, bias=False)
        self.o = nn.Linear(hq * self.hd, e, bias=False)

    def forward(self, x, cos, sin, cache, layer, start):
        n, g = x.shape[0], self.hq // self.hkv
        q = apply_rope_1d(split_heads(self.q(x), self.hq), cos, sin)
        k = apply_rope_1d(split_heads(self.k(x), self.hkv), cos, sin)
        v = split_heads(self.v(x), self.hkv)
        L = start + n
        cache.k[layer][:, start:L] = k
        cache.v[layer][:, start:L] = v
        k, v = cache.k[layer][:, :L], cache.v[layer][:, :L]
        # GQA without copying K/V: query head i = kv*g + j uses KV head kv = i // g, so the g
        # query heads of a KV head become g*n rows of one batched product.
        qg = q.reshape(self.hkv, g * n, self.hd)
        mask = None
        if n > 1:
            qpos = start + torch.arange(n, device=x.device).repeat(g)  # row r: position start + r%n
            mask = torch.arange(L, device=x.device)[None, :] <= qpos[:, None]
        o = attention(qg, k, v, mask).reshape(self.hq, n, self.hd)
        return self.o(merge_heads(o))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        e, f = cfg.dec_dim, cfg.dec_mlp
        self.attn_norm = RMSNorm(e, cfg.norm_eps)
        self.attn = DecoderAttention(cfg)
        self.mlp_norm = RMSNorm(e, cfg.norm_eps)
        self.mlp = nn.Module()
        self.mlp.gate = nn.Linear(e, f, bias=False)
        self.mlp.up = nn.Linear(e, f, bias=False)
        self.mlp.down = nn.Linear(f, e, bias=False)

    def forward(self, x, cos, sin, cache, layer, start):
        x = x + self.attn(self.attn_norm(x), cos, sin, cache, layer, start)
        h = self.mlp_norm(x)
        return x + self.mlp.down(F.silu(self.mlp.gate(h)) * self.mlp.up(h))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dec_dim)
        for l in range(cfg.dec_depth):
            self.add_module(str(l), DecoderLayer(cfg))
        self.norm = RMSNorm(cfg.dec_dim, cfg.norm_eps)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.dec_dim, cfg.vocab_size, bias=False)

    def layers(self):
        return [getattr(self, str(l)) for l in range(self.cfg.dec_depth)]

    def rope(self, start, n, x):
        """cos/sin [n, hd] for positions start..start+n-1 (tables for max_len, cached)."""
        t = getattr(self, "_rope", None)
        if t is None or t[0].dtype != x.dtype or t[0].device != x.device:
            pos = torch.arange(self.cfg.max_len, device=x.device)
            t = rope_tables_1d(pos, self.cfg.dec_dim // self.cfg.dec_heads, self.cfg.rope_base,
                               x.dtype, x.device)
            self._rope = t
        return t[0][start:start + n], t[1][start:start + n]

    def forward_embeds(self, x, cache, taps=None, all_logits=False):
        """x [n, E] new positions appended to the cache; returns logits [V] of the last position
        (or [n, V] when all_logits). taps: `dec.{l}.out` [n, E]."""
        cfg = self.cfg
        n, start = x.shape[0], cache.length
        if start + n > cfg.max_len:
            raise ValueError(f"sequence of {start + n} exceeds max_len {cfg.max_len}")
        cos, sin = self.rope(start, n, x)
        cache.reserve(n, x)
        for l, layer in enumerate(self.layers()):
            x = layer(x, cos, sin, cache, l, start)
            if taps is not None:
                taps[f"dec.{l}.out"] = x
        cache.length = start + n
        h = self.norm(x if all_logits else x[-1])
        w = self.embed.weight if cfg.tie_embeddings else self.lm_head.weight
        return F.linear(h, w)

    def forward_ids(self, ids, cache, taps=None):
        x = self.embed(torch.as_tensor(ids, device=self.embed.weight.device))
        return self.forward_embeds(x, cache, taps)


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------

def load_model(path, dtype=torch.float64, device="cpu"):
    """Loads a model file written by the C engine (names of §3-4; strict: every tensor must be
    present with its shape, and no others). Returns (model, metadata)."""
    tensors, meta = read_safetensors(path)
    if "changelens.config" not in meta:
        raise ValueError(f"{path}: no changelens.config in __metadata__")
    cfg = Config.from_json(meta["changelens.config"])
    model = Model(cfg)
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    model.load_state_dict(sd, strict=True)
    model.to(dtype=dtype, device=device)
    model.eval()
    return model, meta


def random_state_dict(cfg, seed, std=0.02):
    """Random weights with the C init's rules (docs/MODEL.md §3.7, model.h) but numpy's RNG:
    for developing without the C engine. Returns {name: np.float32 array} in module order."""
    rng = np.random.default_rng(seed)
    model = Model(cfg)
    sd = {}
    for name, p in model.state_dict().items():
        leaf = name.split(".")[-1]
        parent = name.rsplit(".", 1)[0].split(".")[-1]
        if name.endswith(".bias"):
            a = np.zeros(p.shape)
        elif parent in ("ln1", "ln2", "ln", "ffn_ln", "attn_norm", "mlp_norm", "norm") \
                and leaf == "weight":
            a = np.ones(p.shape)
        else:
            a = rng.normal(0.0, std, p.shape)
        sd[name] = a.astype(np.float32)
    # §3.7: the SVE module is a clone of its block, out/fc2/ada ~ N(0, out_init_std^2)
    s = cfg.sve_out_init_std
    d = cfg.enc_dim
    for l in range(cfg.enc_depth):
        p = f"enc.{l}."
        if cfg.has_cross:
            sd[p + "sve.ln.weight"] = sd[p + "ln1.weight"].copy()
            sd[p + "sve.ln.bias"] = sd[p + "ln1.bias"].copy()
            sd[p + "sve.q.weight"] = sd[p + "attn.qkv.weight"][:d].copy()
            sd[p + "sve.q.bias"] = sd[p + "attn.qkv.bias"][:d].copy()
            sd[p + "sve.kv.weight"] = sd[p + "attn.qkv.weight"][d:].copy()
            sd[p + "sve.kv.bias"] = sd[p + "attn.qkv.bias"][d:].copy()
            sd[p + "sve.out.weight"] = rng.normal(0, s, (d, d)).astype(np.float32)
            if cfg.has_sve_ffn:
                sd[p + "sve.ffn_ln.weight"] = sd[p + "ln2.weight"].copy()
                sd[p + "sve.ffn_ln.bias"] = sd[p + "ln2.bias"].copy()
                sd[p + "sve.fc1.weight"] = sd[p + "mlp.fc1.weight"].copy()
                sd[p + "sve.fc1.bias"] = sd[p + "mlp.fc1.bias"].copy()
                sd[p + "sve.fc2.weight"] = rng.normal(0, s, (d, cfg.enc_mlp)).astype(np.float32)
        if cfg.sve_variant == "adaln_zero":
            sd[p + "sve.ada.weight"] = rng.normal(0, s, (6 * d, d)).astype(np.float32)
        if p + "sve.null" in sd:
            sd[p + "sve.null"] = rng.normal(0, 0.02, sd[p + "sve.null"].shape).astype(np.float32)
    return sd


def write_random_model(path, cfg, seed):
    """A model file in the C engine's layout with numpy-random weights (development aid)."""
    tok = {"version": 1, "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>",
                                     "<|pad|>"], "merges": []}
    write_safetensors(path, random_state_dict(cfg, seed),
                      {"changelens.config": cfg.to_json(), "changelens.tokenizer": json.dumps(tok),
                       "changelens.format": "1"})
