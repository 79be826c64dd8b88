"""llmc_formats/checkpoint.py: the model checkpoint (doc/formats.md "Header", "The 16 parameter tensors", "Per-layer heads").

Defines
- MODEL_MAGIC, VERSIONS (3 fp32, 5 bf16: llm.c's; 103, 105: with a layer table), KINDS (the
  attention kinds of the layer table: mha, sd, lin, sdlin), SD_KINDS, LINEAR_KINDS, kind_code(name),
  qkv_rows(kind) (qkvw rows per unit of attention width), linear_of(kind), the header[9] flag bits (FLAG_NO_LN 1, FLAG_SD_SCALAR_D 2, FLAG_SD_PLUS_D 4, FLAG_LIN_PRESCALE 8), SLOT_NAMES
  (llm.c's 16 slots, then S-D's sdskew 16 and sdtheta 17), padded_vocab(V), EMB_SCALE_MAX, emb_scale_ok(F),
  f32(x) (rounded to float32), emb_scale_bits(F) (header[10]);
- GPTConfig: what a header holds (maxT, V, L, base heads, C, Vp, the layer table, the flags, the
  input scale emb_scale; plus the init-only S-D options), with slot_shapes() (doc/formats.md "Per-layer heads": its body table),
  num_params(), is_uniform() (written as v3/v5 exactly when true) and describe();
- emb_scale F (header[10]): the blocks' input is F (wte[token] + wpe[t]) instead of
  wte[token] + wpe[t]; the tied LM head reads wte unscaled. Stored as the float32's bit pattern,
  and only when F != 1 (header[10] 0 reads as 1, as in every older file), so an F = 1 file is
  unchanged; a model with F != 1 is not llm.c's and is written as v103/v105;
- encode_header(cfg, dtype, path): the 1024 header bytes (v3/v5 for a uniform llm.c model, else
  v103/v105 with the table in header[8], [9], [16+3l..18+3l] and emb_scale in header[10]);
- decode_header(path, raw): (GPTConfig, version) from the 1024 header bytes, every check of doc/formats.md "Per-layer heads" a
  FormatError naming the file and the header field;
- read_header(path): decode_header of a file whose size must match the header;
- read(path): (GPTConfig, version, the body as one flat float32 array; bf16 widened exactly);
- write(path, cfg, tensors, dtype): header then the tensors (numpy arrays in slot order) as fp32
  or bf16, atomically (llmc_formats/atomic.py);
- f32_to_bf16 / bf16_to_f32: round to nearest even, NaN kept quiet, as llmc/scalar_math.h.
The C twin is llmc/checkpoint.h; the slot sizes are llmc/param_layout.h's.
"""
import math
import os
import struct
from dataclasses import dataclass

from llmc_formats import FormatError
from llmc_formats.atomic import write_atomic

MODEL_MAGIC = 20240326
VERSIONS = (3, 5, 103, 105)
HEADER_INTS = 256
HEADER_BYTES = 1024
GPT2_VOCAB = 50257


def padded_vocab(v):
    # Vp = ceil(V/128)*128 (doc/formats.md "Header"): 50257 -> 50304.
    return (v + 127) // 128 * 128


# Attention kinds of the layer table (doc/formats.md "Per-layer heads").
KINDS = ("mha", "sd", "lin", "sdlin")
SD_KINDS = (1, 3)               # a shared query/key projection U, skew S, theta
LINEAR_KINDS = (2, 3)           # ELU+1 linear attention instead of softmax


def kind_code(name):
    """The code of a kind named as in layer tables (mha 0, sd 1, lin 2, sdlin 3); ValueError else."""
    return KINDS.index(name)


def qkv_rows(kind):
    """Rows of qkvw per unit of attention width A = h d of a layer of this kind (code): Q | K | V,
    or S-D's shared U | V (doc/formats.md "Per-layer heads"; Projection.qkv_rows in the C registry)."""
    return 2 if kind in SD_KINDS else 3


def linear_of(kind):
    """The kind (code) with this kind's projection and the ELU+1 mixer: mha -> lin, sd -> sdlin."""
    return next(k for k in LINEAR_KINDS if (k in SD_KINDS) == (kind in SD_KINDS))
# header[9] flags (doc/formats.md "Per-layer heads")
FLAG_NO_LN, FLAG_SD_SCALAR_D, FLAG_SD_PLUS_D, FLAG_LIN_PRESCALE = 1, 2, 4, 8
KNOWN_FLAGS = 15
MAX_TABLE_LAYERS = 80           # 16 + 3L <= 256 header slots
EMB_SCALE_MAX = 1e4             # header[10] and -emb_scale: 0 < F <= this (EMB_SCALE_MAX of llmc/config.h)


def f32(x):
    """x rounded to the nearest float32 (the value the C side stores and computes with)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def emb_scale_ok(f):
    """True for an input scale every reader accepts: finite, 0 < f <= EMB_SCALE_MAX, not 0 as a float32
    (llmc/layer_kind.h config_validate)."""
    return math.isfinite(f) and 0.0 < f <= EMB_SCALE_MAX and f32(f) > 0.0


def emb_scale_bits(f):
    """header[10] for the input scale f: its float32 bits as an int32, 0 for f = 1."""
    return 0 if f == 1.0 else struct.unpack("<i", struct.pack("<f", f))[0]

# The 16 parameter slots in checkpoint order (doc/formats.md "The 16 parameter tensors"); the per-layer ones are stored layer 0
# first.
SLOT_NAMES = ("wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
              "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
              "sdskew", "sdtheta")   # the S-D slots follow llm.c's 16 (doc/formats.md "Per-layer heads")


@dataclass
class GPTConfig:
    n_layer: int
    n_embd: int
    n_head: int                       # base heads: the descriptor's (checkpoint header[5])
    block_size: int = 1024            # maxT, the number of wpe rows
    vocab_size: int = GPT2_VOCAB
    padded_vocab_size: int = 0        # 0 -> derived from vocab_size
    layers: tuple = None              # per layer (h_l, d_l, kind code); None -> uniform
    flags: int = 0                    # header[9]: no LN, scalar D, +D, linear prescale
    emb_scale: float = 1.0            # header[10]: F, the blocks' input F (wte[x] + wpe[t]); float32
    sd_init_s: float = 0.0            # init only: packed skew ~ N(0, sd_init_s^2) (doc/methods.md "Parameter counts")
    sd_init_theta: float = 0.1        # init only: theta; D = softplus(theta)
    sd_init_u: float = 0.02           # init only: std of the S-D U rows (logit scale ~ its square)

    def __post_init__(self):
        if self.padded_vocab_size == 0:
            self.padded_vocab_size = padded_vocab(self.vocab_size)
        for name in ("n_layer", "n_embd", "n_head", "block_size", "vocab_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig: {name} must be >= 1, got {getattr(self, name)}")
        if self.padded_vocab_size < self.vocab_size:
            raise ValueError(f"GPTConfig: padded_vocab_size {self.padded_vocab_size} < "
                             f"vocab_size {self.vocab_size}")
        if self.layers is None:
            # The uniform table of a descriptor: h heads of size C/h (doc/formats.md "Upstream weak spots" #8: check it).
            if self.n_embd % self.n_head:
                raise ValueError(f"GPTConfig: {self.n_head} heads do not divide C={self.n_embd}")
            d = self.n_embd // self.n_head
            self.layers = tuple((self.n_head, d, 0) for _ in range(self.n_layer))
        self.layers = tuple(tuple(int(v) for v in entry) for entry in self.layers)
        if len(self.layers) != self.n_layer:
            raise ValueError(f"GPTConfig: layer table has {len(self.layers)} entries, "
                             f"L={self.n_layer}")
        for l, (h, d, kind) in enumerate(self.layers):
            if h < 1 or d < 1 or not 0 <= kind < len(KINDS):
                raise ValueError(f"GPTConfig: bad layer table entry {l}: h={h} d={d} kind={kind}")
        if self.flags & ~KNOWN_FLAGS:
            raise ValueError(f"GPTConfig: unknown flags {self.flags:#x}")
        F = float(self.emb_scale)
        if not emb_scale_ok(F):
            raise ValueError(f"GPTConfig: emb_scale {self.emb_scale}: expected a finite number "
                             f"in (0, {EMB_SCALE_MAX:g}]")
        self.emb_scale = f32(F)       # the stored float32, so that a read gives back an equal config

    @property
    def use_ln(self):
        return not self.flags & FLAG_NO_LN

    @property
    def sd_scalar_d(self):
        return bool(self.flags & FLAG_SD_SCALAR_D)

    @property
    def sd_sign(self):
        return 1.0 if self.flags & FLAG_SD_PLUS_D else -1.0

    @property
    def lin_prescale(self):
        return bool(self.flags & FLAG_LIN_PRESCALE)

    def is_uniform(self):
        """True when llm.c can read the model: LayerNorms, the input unscaled (emb_scale 1), every
        layer mha with the same h and h*d == C (doc/formats.md "Header", "Per-layer heads"); such a model is written
        as version 3/5."""
        h0 = self.layers[0][0]
        return self.use_ln and self.emb_scale == 1.0 and all(
            kind == 0 and h == h0 and h * d == self.n_embd for h, d, kind in self.layers)

    def slot_shapes(self):
        """The 18 slots as lists of per-tensor shapes: one shape per layer that has the tensor
        (ln1/ln2 only with LayerNorms, the S-D slots only for sd/sdlin layers)."""
        C, L, T, Vp = self.n_embd, self.n_layer, self.block_size, self.padded_vocab_size
        A = [h * d for h, d, _ in self.layers]
        nqk = [qkv_rows(k) for _, _, k in self.layers]  # U|V or Q|K|V
        per = lambda f, cond=lambda l: True: [f(l) for l in range(L) if cond(l)]
        ln = lambda l: self.use_ln
        sd = lambda l: self.layers[l][2] in SD_KINDS
        h_, d_ = (lambda l: self.layers[l][0]), (lambda l: self.layers[l][1])
        return [[(Vp, C)], [(T, C)],
                per(lambda l: (C,), ln), per(lambda l: (C,), ln),
                per(lambda l: (nqk[l] * A[l], C)), per(lambda l: (nqk[l] * A[l],)),
                per(lambda l: (C, A[l])), per(lambda l: (C,)),
                per(lambda l: (C,), ln), per(lambda l: (C,), ln),
                per(lambda l: (4 * C, C)), per(lambda l: (4 * C,)),
                per(lambda l: (C, 4 * C)), per(lambda l: (C,)),
                [(C,)], [(C,)],
                per(lambda l: (h_(l), d_(l) * (d_(l) - 1) // 2), sd),
                per(lambda l: (h_(l),) if self.sd_scalar_d else (h_(l), d_(l)), sd)]

    def num_params(self):
        """llm.c's count: padded wte, wpe included (doc/formats.md "The 16 parameter tensors")."""
        return sum(math.prod(s) for slot in self.slot_shapes() for s in slot)

    def describe(self):
        heads = ",".join(f"{h}x{d}" + ("" if k == 0 else ":" + KINDS[k]) for h, d, k in self.layers)
        scale = "" if self.emb_scale == 1.0 else f" emb_scale={self.emb_scale:g}"
        return (f"L={self.n_layer} C={self.n_embd} base_heads={self.n_head} "
                f"maxT={self.block_size} V={self.vocab_size} Vp={self.padded_vocab_size} "
                f"layers=[{heads}]{scale} params={self.num_params()}")


# ---------------------------------------------------------------------------------------------
# Header (doc/formats.md "Header", "Per-layer heads")

def encode_header(cfg, dtype="fp32", path="checkpoint"):
    """The 1024 header bytes of cfg: version 3/5 (byte-identical to llm.c) for a uniform table,
    else 103/105 with the layer table in header[8], [9], [16+3l..18+3l] and the input scale's
    float32 bits in header[10] (0 for emb_scale 1)."""
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"write_model: dtype must be 'fp32' or 'bf16', got '{dtype}'")
    header = [0] * HEADER_INTS
    header[0] = MODEL_MAGIC
    base_version = 3 if dtype == "fp32" else 5
    if cfg.is_uniform():
        header[1] = base_version
        # llm.c derives the head size from header[5], so it must be the table's h (a schedule
        # like "2 2 2 2" on a 4-head descriptor is uniform with 2 heads).
        heads = cfg.layers[0][0]
    else:
        if cfg.n_layer > MAX_TABLE_LAYERS:
            raise ValueError(f"{path}: a layer table holds at most {MAX_TABLE_LAYERS} layers, "
                             f"L={cfg.n_layer}")
        header[1] = 100 + base_version
        heads = cfg.n_head
        header[8] = 1                      # layer-table revision
        header[9] = cfg.flags
        header[10] = emb_scale_bits(cfg.emb_scale)
        for l, (h, d, kind) in enumerate(cfg.layers):
            header[16 + 3 * l:19 + 3 * l] = (h, d, kind)
    header[2:8] = (cfg.block_size, cfg.vocab_size, cfg.n_layer, heads, cfg.n_embd,
                   cfg.padded_vocab_size)
    return struct.pack(f"<{HEADER_INTS}i", *header)


def decode_header(path, raw):
    """(GPTConfig, version) from the 1024 header bytes raw of the file path. Every inconsistency
    raises FormatError with one line naming the file and the header field."""
    if len(raw) < HEADER_BYTES:
        raise FormatError(f"{path}: file is {len(raw)} bytes, shorter than the 1024-byte header")
    header = struct.unpack(f"<{HEADER_INTS}i", raw[:HEADER_BYTES])
    if header[0] != MODEL_MAGIC:
        raise FormatError(f"{path}: bad magic {header[0]} in header[0] (expected {MODEL_MAGIC})")
    version = int(header[1])
    if version not in VERSIONS:
        raise FormatError(f"{path}: bad version {version} in header[1] "
                          f"(expected 3, 5, 103 or 105)")
    maxT, V, L, nh, C, Vp = (int(v) for v in header[2:8])
    for idx, name, val in ((2, "max_seq_len", maxT), (3, "vocab_size", V), (4, "num_layers", L),
                           (5, "num_heads", nh), (6, "channels", C),
                           (7, "padded_vocab_size", Vp)):
        if val < 1:
            raise FormatError(f"{path}: bad {name} {val} in header[{idx}]")
    if Vp < V:
        raise FormatError(f"{path}: padded_vocab_size {Vp} in header[7] is below "
                          f"vocab_size {V}")
    flags = 0
    emb_scale = 1.0                 # v3/v5 ignore header[10]
    if version in (3, 5):
        if C % nh:
            raise FormatError(f"{path}: num_heads {nh} in header[5] does not divide "
                              f"channels {C}")
        layers = None
    else:
        if header[8] != 1:
            raise FormatError(f"{path}: unknown layer-table revision {header[8]} in header[8] "
                              f"(expected 1)")
        flags = int(header[9])
        if flags & ~KNOWN_FLAGS:
            raise FormatError(f"{path}: unknown flags {flags:#x} in header[9] (known: 1 no "
                              f"LayerNorm, 2 scalar D, 4 +D, 8 linear prescale)")
        if header[10] != 0:
            emb_scale = struct.unpack("<f", struct.pack("<i", header[10]))[0]
            if not emb_scale_ok(emb_scale):
                raise FormatError(f"{path}: header[10] emb_scale = {emb_scale:g} (bits "
                                  f"{header[10] & 0xFFFFFFFF:#010x}): expected a float in "
                                  f"(0, {EMB_SCALE_MAX:g}], or 0 bits for 1")
        if L > MAX_TABLE_LAYERS:
            raise FormatError(f"{path}: num_layers {L} in header[4] exceeds the "
                              f"{MAX_TABLE_LAYERS}-layer table")
        layers = []
        for l in range(L):
            h, d, kind = (int(v) for v in header[16 + 3 * l:19 + 3 * l])
            if h < 1:
                raise FormatError(f"{path}: bad head count {h} for layer {l} in "
                                  f"header[{16 + 3 * l}]")
            if d < 1:
                raise FormatError(f"{path}: bad head size {d} for layer {l} in "
                                  f"header[{17 + 3 * l}]")
            if not 0 <= kind < len(KINDS):
                raise FormatError(f"{path}: unknown attention kind {kind} for layer {l} in "
                                  f"header[{18 + 3 * l}]")
            layers.append((h, d, kind))
    cfg = GPTConfig(n_layer=L, n_embd=C, n_head=nh, block_size=maxT, vocab_size=V,
                    padded_vocab_size=Vp, layers=layers, flags=flags, emb_scale=emb_scale)
    return cfg, version


def read_header(path):
    """(GPTConfig, version) of a checkpoint file after every header check and the size check
    (1024 + 4 or 2 bytes per parameter)."""
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise FormatError(f"{path}: file is {size} bytes, shorter than the 1024-byte header")
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    cfg, version = decode_header(path, raw)
    elsize = 4 if version % 100 == 3 else 2
    n = cfg.num_params()
    expected = HEADER_BYTES + elsize * n
    if size != expected:
        raise FormatError(f"{path}: file size {size} does not match the header (expected "
                          f"{expected} bytes = 1024 + {elsize}*{n} parameters)")
    return cfg, version


# ---------------------------------------------------------------------------------------------
# Body (doc/formats.md "The 16 parameter tensors", "Per-layer heads"): the slots in order, fp32 (v3/v103) or bf16 (v5/v105)

def bf16_to_f32(raw_u16):
    """bf16 bits -> float32: the bf16 value is the upper half of an fp32 word (doc/formats.md "Header")."""
    import numpy as np
    return (raw_u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(a):
    """Round to nearest even, as torch and llmc/checkpoint.h do (NaN kept quiet)."""
    import numpy as np
    u = np.asarray(a).astype(np.float32).view(np.uint32)
    rounded = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def read(path):
    """(GPTConfig, version, body): a checkpoint of version 3, 5, 103 or 105, its parameters as one
    flat float32 array in slot order (bf16 widened exactly)."""
    import numpy as np
    cfg, version = read_header(path)
    if version % 100 == 3:
        flat = np.fromfile(path, dtype="<f4", offset=HEADER_BYTES).astype(np.float32)
    else:
        flat = bf16_to_f32(np.fromfile(path, dtype="<u2", offset=HEADER_BYTES))
    return cfg, version, flat


def write(path, cfg, tensors, dtype="fp32"):
    """Write a checkpoint atomically: encode_header(cfg, dtype), then each array of tensors (in
    slot order, per-layer slots layer 0 first) as little-endian fp32 or bf16. tensors may be a
    generator, so that a large model is converted one tensor at a time."""
    import numpy as np
    header = encode_header(cfg, dtype, path)

    def chunks():
        yield header
        for a in tensors:
            a = np.ascontiguousarray(a, dtype=np.float32)
            if dtype == "fp32":
                yield a.astype("<f4", copy=False).tobytes()
            else:
                yield f32_to_bf16(a).astype("<u2", copy=False).tobytes()
    write_atomic(path, chunks())
