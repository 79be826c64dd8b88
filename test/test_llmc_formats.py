"""test/test_llmc_formats.py: llmc_formats/, the Python reader and writer of each file format, against
bytes laid out here by hand from doc/formats.md (struct, not the package), so that the package and
the page check each other.

- checkpoint (doc/formats.md "Header", "Per-layer heads"): encode_header of v3 (a uniform model), v5, and v103 with a layer table of
  every kind and every header[9] flag bit; decode_header of the same bytes; a body written and read
  back (fp32, bf16 rounded to nearest even); bad headers are one line naming the field; the input
  scale emb_scale in header[10] (float32 bits, v103 forced, 0 for 1, ignored by v3, bad values);
- shards (3): write_shard's bytes, read_shard of hand-made bytes, the size/magic/version errors;
- tokenizer files (5): encode's bytes, read of hand-made v1 and v2 bytes, every error of the C reader;
- the kinds' shapes: kind_code, qkv_rows, linear_of, and slot_shapes' qkvw rows through them;
- descriptors (doc/formats.md "The 16 parameter tensors"): the shapes the C side uses (d12, gpt2:d24, gpt3:c768, tiny,
  L4C128H4T256V256) and one error line for a bad one;
- layer tables: entries, kinds, repeats, comments, and errors naming file:line;
- main.log (9): a synthetic log with train, val, eval, rms and a resumed step, and an error line;
- atomic writes (1): no .tmp left, a failed write leaves the old file;
- the one sys.path bootstrap: no tracked text file but llmc_formats/__init__.py edits sys.path --
  Python, shell (inline `python -c` and heredoc snippets), Makefile and mk/, docs' code blocks --
  with a control of planted edits that are found and mentions in prose that are not.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats
from llmc_formats import FormatError, checkpoint, descriptor, layer_table, main_log, shards, tokenizer
from llmc_formats.atomic import write_atomic
from harness import check, finish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = tempfile.mkdtemp(prefix="test_formats_")


def header(values):
    """256 little-endian int32 with the given {index: value}, zeros elsewhere."""
    h = [0] * 256
    for i, v in values.items():
        h[i] = v
    return struct.pack("<256i", *h)


def one_line(fn, *needles):
    """fn() raises ValueError with one line that holds every needle; the message, or None."""
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        return msg if "\n" not in msg and all(n in msg for n in needles) else None
    return None


def path(name):
    return os.path.join(TMP, name)


# ---------------------------------------------------------------------------------------------
# Checkpoint headers (doc/formats.md "Header", "Per-layer heads")

def test_headers():
    # v3: a uniform llm.c model, header[8..] zero (llm.c's bytes)
    cfg = checkpoint.GPTConfig(n_layer=2, n_embd=64, n_head=4, block_size=32, vocab_size=100)
    want = header({0: 20240326, 1: 3, 2: 32, 3: 100, 4: 2, 5: 4, 6: 64, 7: 128})
    check(checkpoint.encode_header(cfg, "fp32") == want, "v3 header: llm.c's 8 fields, the rest zero")
    check(checkpoint.encode_header(cfg, "bf16") == header({0: 20240326, 1: 5, 2: 32, 3: 100, 4: 2,
                                                           5: 4, 6: 64, 7: 128}), "v5 header: version 5")
    back, version = checkpoint.decode_header("v3.bin", want)
    check(version == 3 and back.layers == ((4, 16, 0), (4, 16, 0)) and back.padded_vocab_size == 128
          and back.flags == 0, f"v3 decodes to the uniform table (version {version}, {back.layers})")
    # a uniform table with other heads than the descriptor's: still v3, header[5] the table's h
    two = checkpoint.GPTConfig(n_layer=2, n_embd=64, n_head=4, layers=((2, 32, 0), (2, 32, 0)))
    check(struct.unpack("<256i", checkpoint.encode_header(two))[1:6:4] == (3, 2),
          "a uniform 2-head table on a 4-head descriptor is v3 with header[5] 2")
    # v103: every kind, every flag bit, base heads in header[5]
    layers = ((4, 16, 0), (2, 8, 1), (8, 8, 2), (1, 32, 3))
    for flags in (1, 2, 4, 8, 15):
        cfg = checkpoint.GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=16, vocab_size=256,
                                   layers=layers, flags=flags)
        vals = {0: 20240326, 1: 103, 2: 16, 3: 256, 4: 4, 5: 4, 6: 64, 7: 256, 8: 1, 9: flags}
        for l, (h, d, k) in enumerate(layers):
            vals.update({16 + 3 * l: h, 17 + 3 * l: d, 18 + 3 * l: k})
        raw = checkpoint.encode_header(cfg, "fp32")
        check(raw == header(vals), f"v103 header with flags {flags}: revision 1, flags, table at 16+3l")
        back, version = checkpoint.decode_header("t.bin", raw)
        check(version == 103 and back.layers == layers and back.flags == flags,
              f"v103 flags {flags} decodes back (version {version}, flags {back.flags})")
        check(checkpoint.encode_header(cfg, "bf16")[4:8] == struct.pack("<i", 105), f"flags {flags}: bf16 is v105")
    # flag 1 alone makes a uniform table non-llm.c
    noln = checkpoint.GPTConfig(n_layer=1, n_embd=64, n_head=4, flags=1)
    check(struct.unpack("<2i", checkpoint.encode_header(noln)[:8])[1] == 103, "-ln 0 (flag 1) forces v103")
    # the flags' meaning on the config
    c = checkpoint.GPTConfig(n_layer=1, n_embd=64, n_head=4, layers=((4, 16, 1),), flags=15)
    check((c.use_ln, c.sd_scalar_d, c.sd_sign, c.lin_prescale) == (False, True, 1.0, True),
          "flags 1/2/4/8: no LayerNorm, scalar D, +D, linear prescale")
    # bad headers: one line naming the file and the field
    good = dict(vals)
    for idx, value, needles in ((0, 7, ("magic", "header[0]")), (1, 4, ("version", "header[1]")),
                                (3, 0, ("vocab_size", "header[3]")), (8, 2, ("revision", "header[8]")),
                                (9, 16, ("flags", "header[9]")), (16, 0, ("head count", "header[16]")),
                                (17, 0, ("head size", "header[17]")), (18, 4, ("kind", "header[18]"))):
        bad = dict(good)
        bad[idx] = value
        check(one_line(lambda: checkpoint.decode_header("bad.bin", header(bad)), "bad.bin", *needles),
              f"header[{idx}] = {value} is one error line naming {needles[-1]}")
    check(one_line(lambda: checkpoint.decode_header("nh.bin", header({0: 20240326, 1: 3, 2: 8, 3: 8, 4: 1, 5: 3,
                                                                      6: 64, 7: 128})),
                   "nh.bin", "header[5]"), "v3 with heads not dividing C names header[5]")


def f32_bits(x):
    """The float32 bit pattern of x as a little-endian int32 (a header slot)."""
    return struct.unpack("<i", struct.pack("<f", x))[0]


def test_emb_scale():
    """header[10] (doc/formats.md "Per-layer heads"): emb_scale F as float32 bits when F != 1, which forces the
    table versions; 0 otherwise, and 0 reads as 1."""
    F = 35.36
    F32 = struct.unpack("<f", struct.pack("<f", F))[0]      # 35.36000061035156
    bits = f32_bits(F)
    cfg = checkpoint.GPTConfig(n_layer=2, n_embd=64, n_head=4, block_size=32, vocab_size=100, emb_scale=F)
    check(cfg.emb_scale == F32 and not cfg.is_uniform(),
          f"GPTConfig keeps emb_scale as its float32 ({cfg.emb_scale!r}); F != 1 is not llm.c's model")
    want = {0: 20240326, 1: 103, 2: 32, 3: 100, 4: 2, 5: 4, 6: 64, 7: 128, 8: 1, 9: 0, 10: bits,
            16: 4, 17: 16, 18: 0, 19: 4, 20: 16, 21: 0}
    raw = checkpoint.encode_header(cfg, "fp32")
    check(raw == header(want), f"a uniform table with emb_scale {F} is v103, header[10] = its float32 bits "
          f"({bits:#010x}), the table at 16+3l")
    check(checkpoint.encode_header(cfg, "bf16") == header({**want, 1: 105}), "... and v105 with bf16")
    back, version = checkpoint.decode_header("e.bin", raw)
    check(version == 103 and back == cfg and back.emb_scale == F32,
          f"decode_header gives emb_scale {back.emb_scale!r} back, the same config")
    noln = checkpoint.GPTConfig(n_layer=1, n_embd=64, n_head=4, flags=1, emb_scale=F)
    h = struct.unpack("<256i", checkpoint.encode_header(noln))
    check(h[1] == 103 and h[9] == 1 and h[10] == bits, "with -ln 0: header[9] 1 and header[10] the bits")
    one = checkpoint.GPTConfig(n_layer=2, n_embd=64, n_head=4, block_size=32, vocab_size=100, emb_scale=1.0)
    check(checkpoint.encode_header(one) == header({0: 20240326, 1: 3, 2: 32, 3: 100, 4: 2, 5: 4, 6: 64, 7: 128}),
          "emb_scale 1: v3, header[10] 0, llm.c's bytes")
    table = checkpoint.GPTConfig(n_layer=2, n_embd=64, n_head=4, layers=((4, 16, 1), (4, 16, 0)))
    check(struct.unpack("<256i", checkpoint.encode_header(table))[10] == 0 and
          checkpoint.decode_header("t.bin", checkpoint.encode_header(table))[0].emb_scale == 1.0,
          "emb_scale 1 in v103: header[10] 0, read as 1")
    back, version = checkpoint.decode_header("v3.bin", header({**want, 1: 3, 8: 0}))
    check(version == 3 and back.emb_scale == 1.0, "v3 ignores header[10] (emb_scale 1)")
    # a body: write, read back, bytes as laid out
    tensors = [np.full(s, 0.5, np.float32) for slot in cfg.slot_shapes() for s in slot]
    p = path("emb_scale.bin")
    checkpoint.write(p, cfg, tensors)
    got, version, flat = checkpoint.read(p)
    check(open(p, "rb").read(1024) == header(want) and version == 103 and got.emb_scale == F32
          and flat.size == cfg.num_params(), "write then read: header[10] in the file, emb_scale back")
    # bad header[10] in v103: NaN, negative, -0, above 1e4, infinity; one line naming it
    for what, b in (("NaN", 0x7FC00000), ("negative", f32_bits(-1.0)), ("-0", -0x80000000),
                    ("2e4", f32_bits(2e4)), ("inf", 0x7F800000)):
        msg = one_line(lambda: checkpoint.decode_header("bad.bin", header({**want, 10: b})),
                       "bad.bin", "header[10] emb_scale", "expected a float in (0, 10000]")
        check(msg, f"header[10] {what} ({b & 0xFFFFFFFF:#010x}): one line naming the file and the field: {msg}")
    check(checkpoint.decode_header("ok.bin", header({**want, 10: f32_bits(1e4)}))[0].emb_scale == 1e4,
          "header[10] 1e4, the bound, is read")
    for bad in (0.0, -1.0, float("nan"), float("inf"), 1e5, 1e-50):
        check(one_line(lambda: checkpoint.GPTConfig(n_layer=1, n_embd=64, n_head=4, emb_scale=bad), "emb_scale"),
              f"GPTConfig(emb_scale={bad}): one error line")
    check("emb_scale=35.36" in cfg.describe() and "emb_scale" not in one.describe(),
          f"describe names emb_scale when it is not 1: {cfg.describe()}")


# ---------------------------------------------------------------------------------------------
# Checkpoint bodies: slot shapes and fp32/bf16 round trips

def test_bodies():
    cfg = checkpoint.GPTConfig(n_layer=3, n_embd=16, n_head=4, block_size=8, vocab_size=130,
                               layers=((4, 4, 0), (2, 8, 1), (4, 4, 3)), flags=2)
    shapes = cfg.slot_shapes()
    check(len(shapes) == 18 and checkpoint.SLOT_NAMES[16:] == ("sdskew", "sdtheta"), "18 slots, 16 sdskew and 17 sdtheta")
    check(shapes[0] == [(256, 16)] and shapes[1] == [(8, 16)], "wte (Vp, C) with Vp = 256, wpe (maxT, C)")
    check(shapes[4] == [(48, 16), (32, 16), (32, 16)], f"qkvw: (3A, C) for mha, (2A, C) for sd/sdlin: {shapes[4]}")
    check(shapes[16] == [(2, 28), (4, 6)], f"sdskew (h, d(d-1)/2) for S-D layers only: {shapes[16]}")
    check(shapes[17] == [(2,), (4,)], f"sdtheta (h) with scalar D (flag 2): {shapes[17]}")
    full = checkpoint.GPTConfig(n_layer=1, n_embd=8, n_head=2, layers=((2, 4, 1),))
    check(full.slot_shapes()[17] == [(2, 4)], "sdtheta (h, d) without flag 2")
    check(checkpoint.GPTConfig(n_layer=1, n_embd=8, n_head=2, flags=1).slot_shapes()[2] == [],
          "no ln1w with -ln 0 (flag 1)")
    n = cfg.num_params()
    check(n == sum(int(np.prod(s)) for slot in shapes for s in slot), f"num_params is the sum of the slots ({n})")
    rng = np.random.default_rng(1)
    flat = rng.standard_normal(n).astype(np.float32)
    tensors, pos = [], 0
    for slot in shapes:
        for s in slot:
            k = int(np.prod(s))
            tensors.append(flat[pos:pos + k].reshape(s))
            pos += k
    p32 = path("model32.bin")
    checkpoint.write(p32, cfg, iter(tensors), "fp32")
    raw = open(p32, "rb").read()
    check(raw[:1024] == checkpoint.encode_header(cfg, "fp32") and raw[1024:] == flat.astype("<f4").tobytes(),
          "fp32 body: the header then the slots back to back, little-endian float32")
    got_cfg, version, got = checkpoint.read(p32)
    check(version == 103 and got_cfg.layers == cfg.layers and np.array_equal(got, flat), "fp32 read round trip")
    p16 = path("model16.bin")
    checkpoint.write(p16, cfg, iter(tensors), "bf16")
    u = flat.view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even, by hand
    raw = open(p16, "rb").read()
    check(struct.unpack("<i", raw[4:8])[0] == 105 and raw[1024:] == rne.tobytes(), "bf16 body: round to nearest even")
    _, version, got = checkpoint.read(p16)
    check(version == 105 and np.array_equal(got, (rne.astype(np.uint32) << 16).view(np.float32)),
          "bf16 read widens exactly")
    for v, b in ((1.0, 0x3F80), (1.00390625, 0x3F80), (1.01171875, 0x3F82), (-2.0, 0xC000), (float("inf"), 0x7F80)):
        check(int(checkpoint.f32_to_bf16(np.array([v], np.float32))[0]) == b, f"f32_to_bf16({v}) = {b:#06x}")
    check(int(checkpoint.f32_to_bf16(np.array([np.nan], np.float32))[0]) & 0x7FC0 == 0x7FC0, "NaN stays a quiet NaN")
    with open(p32, "ab") as f:
        f.write(b"\0")
    check(one_line(lambda: checkpoint.read(p32), p32, "file size"), "a body one byte long is one line naming the size")
    short = path("short.bin")
    open(short, "wb").write(b"\0" * 100)
    check(one_line(lambda: checkpoint.read_header(short), short, "1024-byte header"), "a short file is one line")
    check(one_line(lambda: checkpoint.write(path("x.bin"), cfg, [], "fp16"), "dtype"), "dtype fp16 is refused")


# ---------------------------------------------------------------------------------------------
# Token shards (doc/formats.md "Token shards")

def test_shards():
    toks = np.array([50256, 0, 1, 65534, 300], dtype=np.int64)
    p = path("s.bin")
    check(shards.write_shard(p, toks) == 5, "write_shard returns the token count")
    want = header({0: 20240520, 1: 1, 2: 5}) + struct.pack("<5H", *toks)
    check(open(p, "rb").read() == want, "shard bytes: [20240520, 1, ntok, 0...] then uint16 ids")
    check(not os.path.exists(p + ".tmp"), "no .tmp left behind")
    hand = path("hand.bin")
    open(hand, "wb").write(header({0: 20240520, 1: 1, 2: 3}) + struct.pack("<3H", 7, 8, 9))
    got = shards.read_shard(hand)
    check(got.dtype == np.uint16 and list(got) == [7, 8, 9], "read_shard of hand-made bytes")
    check(shards.read_shard_header(hand) == 3, "read_shard_header: ntok")
    for name, data, needles in (("trunc", header({0: 20240520, 1: 1, 2: 4}) + b"\0" * 6, ("size", "header[2]")),
                                ("short", b"\0" * 10, ("header",)),
                                ("magic", header({0: 20240326, 1: 1, 2: 0}), ("magic", "header[0]")),
                                ("version", header({0: 20240520, 1: 7, 2: 0}), ("version", "header[1]")),
                                ("negative", header({0: 20240520, 1: 1, 2: -1}), ("header[2]",))):
        bad = path(f"{name}.bin")
        open(bad, "wb").write(data)
        check(one_line(lambda: shards.read_shard(bad), bad, *needles) and
              isinstance(_raised(lambda: shards.read_shard(bad)), FormatError),
              f"a shard with a bad {name} is one FormatError line naming the file and the field")
    check(one_line(lambda: shards.write_shard(path("b.bin"), [1, 65535]), "b.bin", "65535"), "token 65535 is refused")
    w = shards.ShardWriter(lambda i: path(f"pack_{i}.bin"), 4)
    w.add([1, 2, 3])
    w.add([4, 5, 6, 7, 8, 9])
    written = w.close()
    check([n for _, n in written] == [4, 4, 1] and list(shards.read_shard(path("pack_1.bin"))) == [5, 6, 7, 8],
          f"ShardWriter packs documents across shards of 4: {[n for _, n in written]}")


# ---------------------------------------------------------------------------------------------
# Tokenizer file (doc/formats.md "Tokenizer file")

def test_tokenizer():
    toks = [b"a", b"bc", bytes(range(1, 256)), b"<|eot|>"]
    data = tokenizer.encode(toks, 3)
    want = header({0: 20240328, 1: 2, 2: 4, 3: 3}) + b"".join(bytes([len(t)]) + t for t in toks)
    check(data == want, "encode: [20240328, 2, n, EOT, 0...], then a length byte and the bytes per id")
    p = path("tok.bin")
    open(p, "wb").write(want)
    check(tokenizer.read(p) == (toks, 3), "read of hand-made v2 bytes: the bytes of every id, the EOT")
    v1 = path("tok1.bin")
    open(v1, "wb").write(header({0: 20240328, 1: 1, 2: 2, 3: 0}) + b"\x01x\x01y")
    check(tokenizer.read(v1) == ([b"x", b"y"], 50256), "version 1: the EOT is GPT-2's 50256, header[3] unread")
    check(one_line(lambda: tokenizer.encode([b"a", b""], 0), "token 1", "0 bytes") and
          one_line(lambda: tokenizer.encode([b"a" * 256], 0), "token 0", "256 bytes"),
          "encode refuses a token of 0 or 256 bytes, naming its id")
    ok = header({0: 20240328, 1: 2, 2: 2, 3: 0})
    for name, data, needles in (("short", b"\0" * 100, ("1024-byte",)),
                                ("magic", header({0: 20240520, 1: 2, 2: 1}) + b"\x01a", ("header[0]", "20240328")),
                                ("version", header({0: 20240328, 1: 3, 2: 1}) + b"\x01a", ("header[1]", "1 or 2")),
                                ("count", header({0: 20240328, 1: 2, 2: 0}), ("header[2]", "token count 0")),
                                ("eot", header({0: 20240328, 1: 2, 2: 2, 3: 2}) + b"\x01a\x01b", ("header[3]", "2")),
                                ("zero length", ok + b"\x01a\x00", ("token 1", "length 0")),
                                ("end", ok + b"\x01a", ("ends at token 1 of 2",)),
                                ("end inside a token", ok + b"\x01a\x03bc", ("ends inside token 1",))):
        bad = path("tok_bad.bin")
        open(bad, "wb").write(data)
        check(one_line(lambda: tokenizer.read(bad), bad, *needles) and
              isinstance(_raised(lambda: tokenizer.read(bad)), FormatError),
              f"a tokenizer file with a bad {name} is one FormatError line naming the file and the field")


# ---------------------------------------------------------------------------------------------
# The kinds' shapes (doc/formats.md "Per-layer heads")

def test_kinds():
    check([checkpoint.kind_code(n) for n in ("mha", "sd", "lin", "sdlin")] == [0, 1, 2, 3] and
          isinstance(_raised(lambda: checkpoint.kind_code("gpt")), ValueError), "kind_code: the layer table's names")
    check([checkpoint.qkv_rows(k) for k in range(4)] == [3, 2, 3, 2], "qkv_rows: Q | K | V 3, S-D's U | V 2")
    check([checkpoint.linear_of(k) for k in range(4)] == [2, 3, 2, 3], "linear_of: mha -> lin, sd -> sdlin")
    cfg = checkpoint.GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=16, vocab_size=100,
                               layers=((4, 16, 0), (2, 16, 1), (4, 8, 2), (1, 16, 3)))
    rows = [s[0] for s in cfg.slot_shapes()[4]]
    check(rows == [checkpoint.qkv_rows(k) * h * d for h, d, k in cfg.layers],
          f"slot_shapes: qkvw rows = qkv_rows(kind) x A per layer ({rows})")


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


# ---------------------------------------------------------------------------------------------
# Descriptors (doc/formats.md "The 16 parameter tensors") and layer tables (doc/formats.md "Per-layer heads")

def test_descriptors():
    def shape(c):
        return (c.n_layer, c.n_embd, c.n_head, c.block_size, c.vocab_size, c.padded_vocab_size)
    for desc, want in (("d12", (12, 768, 12, 1024, 50257, 50304)), ("gpt2:d24", (24, 1024, 16, 1024, 50257, 50304)),
                       ("d48", (48, 1600, 25, 1024, 50257, 50304)), ("gpt3:c768", (12, 768, 12, 2048, 50257, 50304)),
                       ("gpt3:c1536", (24, 1536, 16, 2048, 50257, 50304)), ("tiny", (4, 64, 4, 64, 50257, 50304)),
                       ("L4C128H4T256V256", (4, 128, 4, 256, 256, 256)), ("L6C128H2T256", (6, 128, 2, 256, 50257, 50304)),
                       ("L2C64H2", (2, 64, 2, 1024, 50257, 50304)), ("L2C64H2T64V300", (2, 64, 2, 64, 300, 384))):
        got = shape(descriptor.parse_descriptor(desc))
        check(got == want, f"{desc} -> L C H T V Vp {got}")
    check(descriptor.parse_descriptor("d12").num_params() == 124475904, "d12 has llm.c's 124,475,904 parameters")
    for bad, needle in (("d13", "depth 13"), ("gpt3:c5140", "does not divide"), ("L2C64H3", "do not divide"),
                        ("L2C64H2V", "V<vocab>"), ("L2C64H2V1", "V<vocab>"), ("nonsense", "unknown model descriptor")):
        check(one_line(lambda: descriptor.parse_descriptor(bad), f"'{bad}'", needle), f"descriptor {bad}: one error line")


def test_layer_tables():
    p = path("table.txt")
    open(p, "w").write("# a comment\n2*2 4x8:sd  # two sd layers of 4 heads of 8\n8:lin 1x32:sdlin*2\n")
    got = layer_table.parse_schedule(p, 32, 6, unchecked=True)
    check(got == [(2, 16, 0), (2, 16, 0), (4, 8, 1), (8, 4, 2), (1, 32, 3), (1, 32, 3)], f"entries, kinds, repeats: {got}")
    check(layer_table.parse_schedule("t", 32, 3, text="1 2 4") == [(1, 32, 0), (2, 16, 0), (4, 8, 0)], "text= replaces the file")
    for text, needles in (("2 1", ("t:1", "non-decreasing")), ("2\n3", ("t:2", "do not divide")),
                          ("2:xx", ("t:1", "unknown kind")), ("2\n\n2 z", ("t:3", "bad entry")),
                          ("2*4", ("t:1", "more than")), ("2", ("t:1", "covers 1 layers"))):
        check(one_line(lambda: layer_table.parse_schedule("t", 32, 2, text=text), *needles),
              f"table {text!r}: one line naming {needles[0]}")
    check(layer_table.parse_schedule("t", 32, 2, unchecked=True, text="2 1") == [(2, 16, 0), (1, 32, 0)],
          "unchecked (-layers) accepts decreasing heads")


# ---------------------------------------------------------------------------------------------
# main.log (doc/formats.md "main.log and stdout")

def test_main_log():
    d = path("run")
    os.makedirs(d)
    log = os.path.join(d, "main.log")
    open(log, "w").write("s:0 trl:10.0000 lr:0.001000 norm:1.50\ns:0 tel:10.5000\ns:1 trl:9.0000 lr:0.001 norm:1.2\n"
                         "s:2 trl:8.0000\ns:2 eval:0.2500\ns:2 eval_piqa:0.5100\ns:2 rms0:1 rms1:2.5 rms2:3\n"
                         "s:1 trl:8.5000 lr:0.002 norm:1.1\ns:2 tel:7.0000\n\n")
    check(main_log.log_path(d) == log and main_log.log_path(log) == log, "log_path: a run folder or the file")
    s = main_log.parse_main_log(log)
    check(s["train"] == [(0, 10.0), (1, 8.5)], f"a resumed step replaces the series from there: {s['train']}")
    check(s["lr"] == [(0, 0.001), (1, 0.002)] and s["norm"][-1] == (1, 1.1), "lr and norm series")
    check(s["val"] == [(0, 10.5), (2, 7.0)] and s["eval"] == [(2, 0.25)] and s["eval_piqa"] == [(2, 0.51)],
          "val (tel), eval and eval_<task>")
    check(s["rms"] == [(2, [1.0, 2.5, 3.0])], "rms0..rmsL as one list")
    bad = path("bad.log")
    open(bad, "w").write("s:0 tel:1.0\nstep 2 loss 3\n")
    check(one_line(lambda: main_log.parse_main_log(bad), f"{bad}:2", "expected"), "a foreign line: one error naming file:line")
    open(bad, "w").write("s:0 tel:nan\n")
    check(one_line(lambda: main_log.parse_main_log(bad), "NaN"), "NaN is an error ...")
    check(np.isnan(main_log.parse_main_log(bad, allow_nan=True)["val"][0][1]), "... unless allow_nan")
    check(isinstance(_raised(lambda: main_log.log_path(path("none"))), main_log.LogError), "no main.log: LogError")


# ---------------------------------------------------------------------------------------------
# Atomic writes and the bootstrap

def test_atomic():
    p = path("sub/dir/a.txt")
    write_atomic(p, "héllo\n")
    check(open(p, "rb").read() == "héllo\n".encode() and not os.path.exists(p + ".tmp"), "text, parents created, no .tmp")
    write_atomic(p, (b"a", b"b"))
    check(open(p, "rb").read() == b"ab", "chunks")

    def failing():
        yield b"partial"
        raise RuntimeError("disk full")
    check(isinstance(_raised(lambda: write_atomic(p, failing())), RuntimeError) and open(p, "rb").read() == b"ab"
          and not os.path.exists(p + ".tmp"), "a failed write leaves the old file and no .tmp")


PATH_EDIT = re.compile(r"(?<![\w.])sys\s*\.\s*path\s*(?:\.\s*(?:insert|append|extend|remove|pop|clear)\s*\("
                       r"|\[[^\]\n]*\]\s*=(?!=)|\+=|=(?!=))")


def path_edits(text):
    """The line numbers of text where sys.path is edited: a call of a list method that changes it,
    an item or slice assigned, += or a new list; reading it (in, ==, [:]) and prose are not edits."""
    return sorted({text.count("\n", 0, m.start()) + 1 for m in PATH_EDIT.finditer(text)})


PRELUDE = re.compile(r"sys\.path\.insert\(0, ((?:os\.path\.dirname\()+)os\.path\.abspath\(__file__\)(\)+)\)  "
                     r"# this checkout's root first \(llmc_formats/__init__\.py\)")


def prelude_faults(texts):
    """'file:line' of each sys.path edit that is not the one allowed form: in a Python file, index 0,
    os.path.dirname applied (folder depth + 1) times to the file's own path (llmc_formats/__init__.py)."""
    bad = []
    for f, t in texts.items():
        lines = t.split("\n")
        for n in path_edits(t):
            m = PRELUDE.fullmatch(lines[n - 1])
            depth = f.count("/") + 1
            if not (f.endswith(".py") and m and m.group(1).count("dirname") == depth and len(m.group(2)) == depth):
                bad.append(f"{f}:{n}")
    return bad


def test_bootstrap():
    check(llmc_formats.ROOT == os.path.abspath(ROOT) and sys.path[0] == ROOT,
          "this checkout's root is first on sys.path, and the package is this checkout's")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True).stdout.split("\0")
    texts = {}
    for f in files:
        p = os.path.join(ROOT, f)
        if f and os.path.isfile(p) and not os.path.islink(p):
            data = open(p, "rb").read()
            if b"\0" not in data:  # text files only
                texts[f] = data.decode(errors="replace")
    kinds = {k: sum(1 for f in texts if f.endswith(k) or os.path.basename(f) == k) for k in (".py", ".sh", ".md", "Makefile", ".mk")}
    preludes = [f for f, t in texts.items() if path_edits(t)]
    bad = prelude_faults(texts)
    check(kinds[".py"] > 40 and kinds[".sh"] > 20 and kinds[".md"] > 10 and kinds["Makefile"] and kinds[".mk"] > 5
          and len(preludes) > 40 and not bad,
          f"every sys.path edit of a tracked file is a script's one line putting its own checkout's root first "
          f"({len(texts)} files: {kinds}; {len(preludes)} scripts; other edits: {bad})")
    links = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    check(not [x for x in links if x.startswith("120000")], "no symlink is tracked")
    sp = "sys" + ".path"  # (so that this file's own planted lines are not edits)
    right = f"{sp}.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  " \
            "# this checkout's root first (llmc_formats/__init__.py)"
    ctl = prelude_faults({
        "scripts/x.py": right,                                                              # right
        "dev/data/y.py": right,                                                             # one level short
        "scripts/z.py": f"{sp}.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))",  # not first
        "scripts/run.sh": f"python3 -c 'import sys; {sp}.insert(0, \".\")'",             # not Python
    })
    check(ctl == ["dev/data/y.py:1", "scripts/z.py:1", "scripts/run.sh:1"],
          f"control: a root one level short, an append and a shell edit are reported, the right line is not ({ctl})")
    # control: an edit in any of its forms is found on its line, in Python, a shell snippet, a
    # Makefile recipe or a doc; prose naming sys.path, a comparison and another list are not
    sp = "sys" + ".path"
    planted = "\n".join([
        "import sys",                                                        # 1
        f"{sp}.insert(0, '.')",                                              # 2: found
        f"x = 1; {sp} .append('dev')",                                       # 3: found
        f"  \"$PY\" -c 'import sys; {sp}.insert(0, \"dev\"); import m'",      # 4: found (shell)
        f"\t$(PYTHON) -c \"import sys; {sp}.extend(['mk'])\"",                # 5: found (Makefile)
        f"{sp}[:0] = ['sd_attention']",                                      # 6: found
        f"{sp} = ['.'] + {sp}",                                              # 7: found
        f"{sp} += ['prism']",                                                # 8: found
        f"the one `{sp}` bootstrap; never add `{sp}.insert` by hand",      # 9: prose
        f"assert ROOT in {sp} and {sp} == {sp}[:]",                          # 10: reads it
        "my_sys.path_list.insert(0, 1)",                                     # 11: another name
    ])
    found = path_edits(planted)
    check(found == [2, 3, 4, 5, 6, 7, 8], f"control: planted sys.path edits are found on their lines, prose and "
          f"reads are not ({found}; expected [2, 3, 4, 5, 6, 7, 8])")
    code = (f"import os, sys; {sp}.insert(0, os.path.dirname(os.getcwd())); import llmc_formats; "
            "from scripts import common; from dev.data import data_common; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=os.path.join(ROOT, "scripts"), capture_output=True, text=True)
    check(out.stdout.strip() == "ok", f"with the root first: llmc_formats, then qualified imports ({out.stderr.strip()[-200:]})")


def main():
    try:
        for t in (test_headers, test_emb_scale, test_bodies, test_shards, test_tokenizer, test_kinds, test_descriptors,
                  test_layer_tables, test_main_log, test_atomic, test_bootstrap):
            t()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
