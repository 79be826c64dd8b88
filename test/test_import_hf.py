"""test/test_import_hf.py: sd_attention/import_hf.py on small random files in Hugging Face GPT-2's layout.

A fake GPT2LMHeadModel state dict (L 2, C 32, 4 heads, V 100, maxT 24) with HF's key names and
shapes (Conv1D weights (in, out), the attn.bias / attn.masked_bias buffers, lm_head tied) is
written three ways: model.safetensors in F32 without the `transformer.` prefix (with config.json),
model.safetensors with F16 and BF16 tensors mixed in (no config.json: --n_head), and a torch
pytorch_model.bin with the prefix. Each import must put every tensor in its llm.c slot (checked
exactly against the raw file, doc/formats.md "The 16 parameter tensors"), pad wte with zero rows to Vp = 128, and give
train_gpt2.py logits equal to an independent forward written here directly on the HF tensors
(Conv1D convention x @ W + b). Then --dtype bf16 (version 5), and one-line errors.

Tolerances: slots bit-exact (F16/BF16 compared after the same widening); logits 1e-5 absolute
(two fp32 forwards in different orders; the logits are O(1)). Negative control: a forward that
forgets to transpose c_attn differs by > 1e-2.
"""
import json
import math
import os
import struct
import subprocess
import sys
import shutil

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402
from harness import check, finish  # noqa: E402

L, C, NH, V, MAXT = 2, 32, 4, 100, 24
VP = 128
SCRIPT = os.path.join(ROOT, "sd_attention", "import_hf.py")


def fake_state_dict(seed=0):
    """HF GPT-2 tensors (names without `transformer.`), float32, O(0.1-1) values."""
    g = np.random.default_rng(seed)
    r = lambda *s, scale=0.1: (scale * g.standard_normal(s)).astype(np.float32)
    sd = {"wte.weight": r(V, C, scale=0.3), "wpe.weight": r(MAXT, C),
          "ln_f.weight": 1 + r(C), "ln_f.bias": r(C)}
    for l in range(L):
        p = f"h.{l}."
        sd.update({p + "ln_1.weight": 1 + r(C), p + "ln_1.bias": r(C),
                   p + "attn.c_attn.weight": r(C, 3 * C, scale=0.3), p + "attn.c_attn.bias": r(3 * C),
                   p + "attn.c_proj.weight": r(C, C), p + "attn.c_proj.bias": r(C),
                   p + "ln_2.weight": 1 + r(C), p + "ln_2.bias": r(C),
                   p + "mlp.c_fc.weight": r(C, 4 * C), p + "mlp.c_fc.bias": r(4 * C),
                   p + "mlp.c_proj.weight": r(4 * C, C), p + "mlp.c_proj.bias": r(C),
                   # buffers HF saves and the importer must skip
                   p + "attn.bias": np.tril(np.ones((MAXT, MAXT), np.float32))[None, None],
                   p + "attn.masked_bias": np.array(-1e4, np.float32)})
    sd["lm_head.weight"] = sd["wte.weight"].copy()
    return sd


# ---------------------------------------------------------------------------------------------
# safetensors written by hand (the layout of doc/formats.md "The 16 parameter tensors")

def to_bf16_bits(a):
    u = a.astype(np.float32).view(np.uint32)
    return ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype("<u2")


def write_safetensors(path, tensors, dtypes=None):
    """tensors: name -> float32 array; dtypes: name -> F32/F16/BF16 (default F32). Returns the
    values as the file holds them, widened back to float32."""
    dtypes = dtypes or {}
    header, blobs, held, off = {"__metadata__": {"format": "pt"}}, [], {}, 0
    for name, a in tensors.items():
        dt = dtypes.get(name, "F32")
        if dt == "F32":
            raw = a.astype("<f4").tobytes()
            held[name] = a.astype(np.float32)
        elif dt == "F16":
            raw = a.astype("<f2").tobytes()
            held[name] = a.astype(np.float16).astype(np.float32)
        else:
            bits = to_bf16_bits(a.reshape(-1))   # 1-D: a 0-d array cannot change its dtype view
            raw = bits.tobytes()
            held[name] = (bits.astype(np.uint32) << 16).view(np.float32).reshape(a.shape)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)   # HF pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)
    return held


# ---------------------------------------------------------------------------------------------
# The independent forward, on HF's tensors (Conv1D: x @ W + b)

def hf_forward(sd, idx, transpose_bug=False):
    t = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in sd.items()}
    B, T = idx.shape
    ln = lambda x, p: F.layer_norm(x, (C,), t[p + ".weight"], t[p + ".bias"], eps=1e-5)
    conv = lambda x, p: x @ t[p + ".weight"] + t[p + ".bias"]
    x = t["wte.weight"][idx] + t["wpe.weight"][:T]
    hd = C // NH
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = f"h.{l}."
        h = ln(x, p + "ln_1")
        W = t[p + "attn.c_attn.weight"]
        qkv = (h @ (W.t().reshape(C, 3 * C) if transpose_bug else W)) + t[p + "attn.c_attn.bias"]
        q, k, v = (z.view(B, T, NH, hd).transpose(1, 2) for z in qkv.split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv(y, p + "attn.c_proj")
        m = F.gelu(conv(ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh")
        x = x + conv(m, p + "mlp.c_proj")
    x = ln(x, "ln_f")
    return x @ t["wte.weight"].t()


# ---------------------------------------------------------------------------------------------

def run(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def check_slots(ckpt, held, label):
    """Every slot of the raw file equals the expected HF tensor (transposed where Conv1D)."""
    hdr = np.fromfile(ckpt, dtype="<i4", count=256)
    check(list(hdr[:8]) == [20240326, 3, MAXT, V, L, NH, C, VP] and not hdr[8:].any(),
          f"{label}: header {list(hdr[:8])} = magic, v3, maxT, V, L, heads, C, Vp; rest 0")
    body = np.fromfile(ckpt, dtype="<f4", offset=1024)
    per = lambda name, f=lambda a: a: [f(held[f"h.{l}.{name}"]) for l in range(L)]
    wte = np.concatenate([held["wte.weight"], np.zeros((VP - V, C), np.float32)])
    expected = [("wte (padded)", [wte]), ("wpe", [held["wpe.weight"]]),
                ("ln1w", per("ln_1.weight")), ("ln1b", per("ln_1.bias")),
                ("qkvw = c_attn.weight^T", per("attn.c_attn.weight", np.transpose)),
                ("qkvb", per("attn.c_attn.bias")),
                ("attprojw = attn.c_proj.weight^T", per("attn.c_proj.weight", np.transpose)),
                ("attprojb", per("attn.c_proj.bias")),
                ("ln2w", per("ln_2.weight")), ("ln2b", per("ln_2.bias")),
                ("fcw = c_fc.weight^T", per("mlp.c_fc.weight", np.transpose)),
                ("fcb", per("mlp.c_fc.bias")),
                ("fcprojw = mlp.c_proj.weight^T", per("mlp.c_proj.weight", np.transpose)),
                ("fcprojb", per("mlp.c_proj.bias")),
                ("lnfw", [held["ln_f.weight"]]), ("lnfb", [held["ln_f.bias"]])]
    pos, bad = 0, []
    for name, arrays in expected:
        for a in arrays:
            n = a.size
            if not np.array_equal(body[pos:pos + n], np.ascontiguousarray(a).ravel()):
                bad.append(name)
            pos += n
    check(not bad and pos == body.size, f"{label}: all 16 slots hold the right tensors, bit-exact "
                                        f"({pos} floats; wrong: {sorted(set(bad))})")


def check_logits(ckpt, held, label):
    model = tg.load_model(ckpt)
    idx = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, _ = model(idx)
        ref = hf_forward(held, idx)
        bug = hf_forward(held, idx, transpose_bug=True)
    diff = (ours - ref).abs().max().item()
    check(diff < 1e-5, f"{label}: train_gpt2.py logits equal the HF-layout forward "
                       f"(max |diff| {diff:.2e}, logits up to {ref.abs().max().item():.2f})")
    return (bug - ref).abs().max().item()


def main():
    tmp = os.path.join(ROOT, "build", "tmp_import_hf")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    sd = fake_state_dict()

    # 1. F32 safetensors, keys without prefix, config.json next to it
    d1 = os.path.join(tmp, "hf_f32")
    os.makedirs(d1)
    held = write_safetensors(os.path.join(d1, "model.safetensors"), sd)
    json.dump({"n_head": NH, "n_layer": L, "n_embd": C, "model_type": "gpt2"},
              open(os.path.join(d1, "config.json"), "w"))
    out1 = os.path.join(tmp, "f32.bin")
    rc, so, se = run(d1, "-o", out1)
    check(rc == 0 and se == "", f"safetensors F32 directory imported (exit {rc}) {se.strip()}")
    check_slots(out1, held, "safetensors F32")
    bug = check_logits(out1, held, "safetensors F32")
    check(bug > 1e-2, f"negative control: a forward without the Conv1D transpose differs by {bug:.2e}")

    # 2. F16 and BF16 tensors mixed in, no config.json: --n_head
    d2 = os.path.join(tmp, "hf_mixed")
    os.makedirs(d2)
    dtypes = {k: ("F16" if i % 3 == 1 else "BF16" if i % 3 == 2 else "F32") for i, k in enumerate(sd)}
    dtypes["lm_head.weight"] = dtypes["wte.weight"]   # tied: the same values in the file
    held2 = write_safetensors(os.path.join(d2, "model.safetensors"), sd, dtypes)
    out2 = os.path.join(tmp, "mixed.bin")
    rc, so, se = run(os.path.join(d2, "model.safetensors"), "-o", out2)
    check(rc == 1 and se.count("\n") == 1 and se.startswith("error: --n_head: no config.json"),
          f"without config.json and --n_head: one-line error: {se.strip()}")
    rc, so, se = run(os.path.join(d2, "model.safetensors"), "-o", out2, "--n_head", str(NH))
    check(rc == 0, f"safetensors with F16 and BF16 tensors imported with --n_head (exit {rc}) {se.strip()}")
    check(sorted(set(dtypes.values())) == ["BF16", "F16", "F32"], "the file mixes F32, F16 and BF16")
    check_slots(out2, held2, "safetensors F16/BF16")
    check_logits(out2, held2, "safetensors F16/BF16")

    # 3. torch state dict with the transformer. prefix
    d3 = os.path.join(tmp, "hf_torch")
    os.makedirs(d3)
    torch.save({("transformer." + k if k != "lm_head.weight" else k): torch.from_numpy(v.copy())
                for k, v in sd.items()}, os.path.join(d3, "pytorch_model.bin"))
    json.dump({"n_head": NH}, open(os.path.join(d3, "config.json"), "w"))
    out3 = os.path.join(tmp, "torch.bin")
    rc, so, se = run(d3, "-o", out3)
    check(rc == 0, f"pytorch_model.bin with 'transformer.' keys imported (exit {rc}) {se.strip()}")
    check(open(out3, "rb").read() == open(out1, "rb").read(),
          "the torch import is byte-identical to the safetensors F32 import")
    check_logits(out3, held, "pytorch_model.bin")

    # 4. bf16 output (version 5), read back by train_gpt2.py
    out4 = os.path.join(tmp, "bf16.bin")
    rc, so, se = run(d1, "-o", out4, "--dtype", "bf16")
    hdr = np.fromfile(out4, dtype="<i4", count=8) if rc == 0 else [0, 0]
    ok = rc == 0 and hdr[1] == 5 and os.path.getsize(out4) == 1024 + 2 * (os.path.getsize(out1) - 1024) // 4
    if ok:
        a = tg.load_model(out4).blocks[0].attn.qkv_w.detach().numpy()
        ok = np.abs(a - held["h.0.attn.c_attn.weight"].T).max() <= 2 ** -8 * np.abs(a).max()
    check(ok, "--dtype bf16 writes version 5 (2 bytes per parameter) that loads within bf16 rounding")

    # 5. an lm_head that is not tied: a warning, wte used
    sd5 = dict(sd)
    sd5["lm_head.weight"] = sd["wte.weight"] + 1
    d5 = os.path.join(tmp, "hf_untied")
    os.makedirs(d5)
    write_safetensors(os.path.join(d5, "model.safetensors"), sd5)
    rc, so, se = run(os.path.join(d5, "model.safetensors"), "-o", os.path.join(tmp, "u.bin"), "--n_head", "4")
    check(rc == 0 and se.startswith("warning:") and "lm_head.weight differs" in se,
          f"an untied lm_head: imported with a warning: {se.strip()}")

    # 6. one-line errors
    def expect_error(label, pattern, path, *extra):
        rc, so, se = run(path, "-o", os.path.join(tmp, "x.bin"), *extra)
        check(rc == 1 and se.count("\n") == 1 and se.startswith("error: ") and pattern in se,
              f"{label}: {se.strip()}")

    def variant(name, tensors, dtypes=None, raw=None):
        path = os.path.join(tmp, name + ".safetensors")
        if raw is not None:
            open(path, "wb").write(raw)
        else:
            write_safetensors(path, tensors, dtypes)
        return path

    missing = {k: v for k, v in sd.items() if k != "h.1.mlp.c_fc.bias"}
    expect_error("a missing tensor", "key 'h.1.mlp.c_fc.bias': missing", variant("missing", missing), "--n_head", "4")
    wrong = dict(sd)
    wrong["h.0.attn.c_attn.weight"] = sd["h.0.attn.c_attn.weight"].T.copy()
    expect_error("a transposed Conv1D weight", "shape [96, 32], expected [32, 96]", variant("wrong", wrong), "--n_head", "4")
    extra = dict(sd)
    extra["h.0.attn.rotary"] = np.zeros(3, np.float32)
    expect_error("an unknown key", "key 'h.0.attn.rotary': not a GPT-2", variant("extra", extra), "--n_head", "4")
    expect_error("a bad header length", "header length", variant("short", None, raw=struct.pack("<Q", 1 << 40) + b"{}"), "--n_head", "4")
    int8 = variant("int8", {"wte.weight": np.zeros((2, 2), np.float32)})
    blob = bytearray(open(int8, "rb").read())
    blob[:] = blob.replace(b'"F32"', b'"I8" ')
    open(int8, "wb").write(bytes(blob))
    expect_error("an unsupported dtype", "dtype I8", int8, "--n_head", "4")
    expect_error("heads that do not divide C", "n_head 5", d1.replace("hf_f32", "hf_mixed"), "--n_head", "5")
    expect_error("a missing file", "no such file", os.path.join(tmp, "nothing.safetensors"), "--n_head", "4")
    finish()


if __name__ == "__main__":
    main()
