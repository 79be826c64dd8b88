"""test/test_reference.py: tests of the PyTorch reference model (train_gpt2.py).

Covers parameter counts, Prism layer tables, checkpoint round trips (v3/v5/v103/v105) and their
error messages, the init draw order, attention head grouping against a naive per-head loop, the
debug-state file with its AdamW trailer, the schedule parser's errors, the input scale
--emb_scale (header[10], the blocks' input F (wte[x] + wpe[t])), and the defaults that
scripts/sample.py (which samples from this model) shows in --help. CPU only; runs in well under a
minute on 2 cores. Run: /usr/bin/python3 test/test_reference.py
"""
import contextlib
import io
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401

from harness import check, finish  # noqa: E402
import train_gpt2 as tg  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_reference_")


def tmp(name):
    return os.path.join(TMP, name)


def write_text(name, text):
    path = tmp(name)
    with open(path, "w") as f:
        f.write(text)
    return path


def header_of(path):
    return np.fromfile(path, dtype="<i4", count=256)


def prism_tiny(text, name="sched.txt", seed=42, unchecked=False):
    base = tg.parse_descriptor("tiny")
    path = write_text(name, text)
    cfg = tg.GPTConfig(n_layer=base.n_layer, n_embd=base.n_embd, n_head=base.n_head,
                       block_size=base.block_size,
                       layers=tg.parse_schedule(path, base.n_embd, base.n_layer, unchecked))
    return tg.GPT(cfg, seed=seed)


def same_params(a, b):
    pa = [p for s in a.slots() for p in s]
    pb = [p for s in b.slots() for p in s]
    return len(pa) == len(pb) and all(x.shape == y.shape and torch.equal(x, y)
                                      for x, y in zip(pa, pb))


def expect_error(fn, needles, msg):
    """fn() must raise ValueError/NotImplementedError whose one-line message has every needle."""
    try:
        fn()
    except (ValueError, NotImplementedError) as e:
        text = str(e)
        ok = all(n in text for n in needles) and "\n" not in text
        check(ok, f"{msg}: {text}")
        return
    check(False, f"{msg}: no error raised")


# ----------------------------------------------------------------------------- (a) counts
def test_counts():
    d12 = tg.GPT(tg.parse_descriptor("d12"))          # no init: torch.empty parameters
    check(d12.num_parameters() == 124_475_904, f"d12 parameters {d12.num_parameters()}")
    check(d12.config.num_params() == 124_475_904, "d12 config.num_params agrees")
    del d12
    for desc, n in (("d6", 30_357_504), ("d24", 354_871_296), ("L24C1536H24", 758_799_360)):
        got = tg.parse_descriptor(desc).num_params()
        check(got == n, f"{desc} parameter count {got} == {n}")


# ----------------------------------------------------------------------------- descriptors
def test_descriptors():
    c = tg.parse_descriptor("gpt2:d48")
    check((c.n_layer, c.n_embd, c.n_head, c.block_size) == (48, 1600, 25, 1024), "gpt2:d48 shape")
    c = tg.parse_descriptor("gpt3:c1536")
    check((c.n_layer, c.n_embd, c.n_head, c.block_size) == (24, 1536, 16, 2048),
          "gpt3:c1536 shape (head size 96)")
    c = tg.parse_descriptor("tiny")
    check((c.n_layer, c.n_embd, c.n_head, c.block_size, c.padded_vocab_size)
          == (4, 64, 4, 64, 50304), "tiny shape")
    c = tg.parse_descriptor("L6C128H2T256")
    check((c.n_layer, c.n_embd, c.n_head, c.block_size) == (6, 128, 2, 256), "L6C128H2T256")
    check(tg.parse_descriptor("L2C64H4").block_size == 1024, "L..C..H.. default maxT 1024")
    expect_error(lambda: tg.parse_descriptor("gpt3:c5140"), ["gpt3:c5140", "divide"],
                 "gpt3:c5140 rejected")
    expect_error(lambda: tg.parse_descriptor("L4C64H3"), ["L4C64H3", "divide"],
                 "non-divisor heads rejected")
    expect_error(lambda: tg.parse_descriptor("d13"), ["d13"], "unknown depth rejected")


# ----------------------------------------------------------------------------- (b) Prism count
def test_prism_count():
    uni = tg.GPT(tg.parse_descriptor("tiny"))
    pri = prism_tiny("1 2 4 4\n")
    check(pri.config.layers == ((1, 64, 0), (2, 32, 0), (4, 16, 0), (4, 16, 0)),
          f"schedule 1 2 4 4 table {pri.config.layers}")
    check(pri.num_parameters() == uni.num_parameters(),
          f"Prism tiny parameters {pri.num_parameters()} == uniform {uni.num_parameters()}")


# ----------------------------------------------------------------------------- (c) checkpoints
def test_checkpoints():
    cfg = tg.parse_descriptor("tiny")
    model = tg.GPT(cfg, seed=42)
    n = model.num_parameters()

    p3 = tmp("uni.bin")
    tg.write_model(model, p3)
    h = header_of(p3)
    check(h[0] == 20240326 and h[1] == 3, f"uniform file magic/version {h[0]}/{h[1]}")
    check(list(h[2:8]) == [64, 50257, 4, 4, 64, 50304], f"uniform header[2..7] {list(h[2:8])}")
    check(not h[8:].any(), "uniform header[8..255] all zero")
    check(os.path.getsize(p3) == 1024 + 4 * n, "uniform fp32 file size 1024 + 4N")
    check(not os.path.exists(p3 + ".tmp"), "no .tmp left behind")
    body = np.fromfile(p3, dtype="<f4", offset=1024)
    flat = torch.cat([p.detach().reshape(-1) for s in model.slots() for p in s]).numpy()
    check(np.array_equal(body, flat), "fp32 body is the 16 slots in order")
    back = tg.load_model(p3)
    check(same_params(model, back), "fp32 round trip exact")
    check(back.config.layers == cfg.layers, "fp32 round trip keeps the uniform table")

    p5 = tmp("uni_bf16.bin")
    tg.write_model(model, p5, dtype="bf16")
    h = header_of(p5)
    check(h[1] == 5 and os.path.getsize(p5) == 1024 + 2 * n, "bf16 file: version 5, 1024 + 2N")
    back = tg.load_model(p5)
    ok = all(torch.equal(q, p.detach().to(torch.bfloat16).float())
             for sq, sp in zip(back.slots(), model.slots()) for q, p in zip(sq, sp))
    check(ok, "bf16 round trip equals .to(torch.bfloat16)")
    tg.write_model(back, tmp("uni_bf16_again.bin"), dtype="bf16")
    with open(p5, "rb") as f1, open(tmp("uni_bf16_again.bin"), "rb") as f2:
        check(f1.read() == f2.read(), "bf16 -> load -> bf16 is byte-identical")

    pri = prism_tiny("1 2 4 4\n")
    p103 = tmp("prism.bin")
    tg.write_model(pri, p103)
    h = header_of(p103)
    check(h[1] == 103, f"Prism file version {h[1]}")
    check(list(h[2:8]) == [64, 50257, 4, 4, 64, 50304], "Prism header[2..7], [5] = base heads")
    check(h[8] == 1 and h[9] == 0 and not h[10:16].any(), "Prism header[8]=1, [9]=0, [10..15]=0")
    check(list(h[16:28]) == [1, 64, 0, 2, 32, 0, 4, 16, 0, 4, 16, 0],
          f"Prism layer table {list(h[16:28])}")
    check(not h[28:].any(), "Prism header after the table is zero")
    check(os.path.getsize(p103) == 1024 + 4 * n, "Prism file has the uniform size")
    back = tg.load_model(p103)
    check(same_params(pri, back) and back.config.layers == pri.config.layers
          and back.config.n_head == 4, "Prism fp32 round trip exact with its table")
    p105 = tmp("prism_bf16.bin")
    tg.write_model(pri, p105, dtype="bf16")
    check(header_of(p105)[1] == 105, "Prism bf16 file version 105")
    back = tg.load_model(p105)
    ok = all(torch.equal(q, p.detach().to(torch.bfloat16).float())
             for sq, sp in zip(back.slots(), pri.slots()) for q, p in zip(sq, sp))
    check(ok and back.config.layers == pri.config.layers, "Prism bf16 round trip")

    # A_l != C: explicit head sizes change per-layer shapes; the file stays self-describing.
    wide = prism_tiny("2x16 2x48 4 4\n", name="wide.txt")
    pw = tmp("wide.bin")
    tg.write_model(wide, pw)
    back = tg.load_model(pw)
    check(back.blocks[0].attn.qkv_w.shape == (96, 64) and back.blocks[1].attn.proj_w.shape
          == (64, 96), "explicit head sizes give (3A, C) and (C, A) shapes")
    check(same_params(wide, back) and os.path.getsize(pw) == 1024 + 4 * wide.num_parameters(),
          "A != C round trip exact, size 1024 + 4N")

    # A uniform table other than the descriptor's is still llm.c's format, with its own heads.
    two = prism_tiny("2*4\n", name="two.txt")
    p2 = tmp("two.bin")
    tg.write_model(two, p2)
    h = header_of(p2)
    check(h[1] == 3 and h[5] == 2 and not h[8:].any(), "uniform 2-head table writes v3, [5]=2")

    # Errors: one line naming the file and the field.
    raw = open(p3, "rb").read()

    def patched(name, idx, value, data=raw):
        b = bytearray(data)
        b[4 * idx:4 * idx + 4] = np.array([value], dtype="<i4").tobytes()
        path = tmp(name)
        open(path, "wb").write(bytes(b))
        return path

    bad = patched("bad_magic.bin", 0, 1234)
    expect_error(lambda: tg.load_model(bad), [bad, "magic", "header[0]"], "bad magic")
    bad = patched("bad_version.bin", 1, 4)
    expect_error(lambda: tg.load_model(bad), [bad, "version", "header[1]"], "bad version")
    bad = tmp("short.bin")
    open(bad, "wb").write(raw[:-4])
    expect_error(lambda: tg.load_model(bad), [bad, "size"], "size mismatch")
    bad = patched("v5_as_v3.bin", 1, 5)
    expect_error(lambda: tg.load_model(bad), [bad, "size"], "v3 body under a v5 header")
    bad = patched("bad_heads.bin", 5, 3)
    expect_error(lambda: tg.load_model(bad), [bad, "header[5]"], "heads not dividing C")
    raw103 = open(p103, "rb").read()
    bad = patched("kind.bin", 18, 7, raw103)
    expect_error(lambda: tg.load_model(bad), [bad, "header[18]", "unknown attention kind 7"],
                 "unknown kind in a checkpoint")
    bad = patched("rev.bin", 8, 2, raw103)
    expect_error(lambda: tg.load_model(bad), [bad, "header[8]"], "unknown table revision")


# ----------------------------------------------------------------------------- (d) init
def test_init():
    model = tg.GPT(tg.parse_descriptor("tiny"), seed=42)
    torch.manual_seed(42)
    ref = torch.empty(50257 * 64).normal_(0, 0.02)
    check(torch.equal(model.wte.detach().reshape(-1)[:16], ref[:16]),
          "wte[:16] equals torch.manual_seed(42) normal_(0, 0.02)[:16]")
    check(torch.equal(model.wte.detach()[:50257].reshape(-1), ref), "all real wte rows match")
    check(not model.wte.detach()[50257:].any(), "padded wte rows are zero")
    # Replay the whole draw order of doc/formats.md "Random init and RNG order" on the default generator.
    L = model.config.n_layer
    rs = 0.02 / math.sqrt(2 * L)
    ok = torch.equal(model.wpe.detach(), torch.empty(64, 64).normal_(0, 0.02))
    for b in model.blocks:
        for p, std in ((b.attn.qkv_w, 0.02), (b.attn.proj_w, rs), (b.fc_w, 0.02),
                       (b.fcproj_w, rs)):
            ok = ok and torch.equal(p.detach(), torch.empty(p.shape).normal_(0, std))
    check(ok, "wpe, then per layer qkvw, attprojw, fcw, fcprojw follow in order")
    ok = all(not t.any() for t in (model.lnf_b,) + tuple(
        p for b in model.blocks for p in (b.attn.qkv_b, b.attn.proj_b, b.fc_b, b.fcproj_b,
                                           b.ln1_b, b.ln2_b)))
    ok = ok and all(torch.equal(t, torch.ones_like(t)) for t in (model.lnf_w,) + tuple(
        p for b in model.blocks for p in (b.ln1_w, b.ln2_w)))
    check(ok, "biases zero, LayerNorm weights one")
    again = tg.GPT(tg.parse_descriptor("tiny"), seed=42)
    other = tg.GPT(tg.parse_descriptor("tiny"), seed=7)
    check(same_params(model, again) and not same_params(model, other), "init depends on seed only")


# ----------------------------------------------------------------------------- (e) attention
def naive_attention(attn, x):
    h, d = attn.n_head, attn.head_size
    A = h * d
    W, bias = attn.qkv_w.detach().double(), attn.qkv_b.detach().double()
    x = x.double()
    B, T, _ = x.shape
    out = torch.zeros(B, T, A, dtype=torch.float64)
    for b in range(B):
        for k in range(h):
            rows = slice(k * d, (k + 1) * d)
            Wq, Wk, Wv = W[rows], W[A:][rows], W[2 * A:][rows]
            bq, bk, bv = bias[rows], bias[A:][rows], bias[2 * A:][rows]
            for i in range(T):
                q = x[b, i] @ Wq.t() + bq
                scores = [float(q @ (x[b, j] @ Wk.t() + bk)) / math.sqrt(d) for j in range(i + 1)]
                mx = max(scores)
                w = [math.exp(s - mx) for s in scores]
                z = sum(w)
                for j in range(i + 1):
                    out[b, i, rows] += (w[j] / z) * (x[b, j] @ Wv.t() + bv)
    return out @ attn.proj_w.detach().double().t() + attn.proj_b.detach().double()


def test_attention():
    g = torch.Generator()
    g.manual_seed(3)
    x = torch.randn(2, 6, 64, generator=g)
    for h, d in ((1, 64), (2, 32), (4, 16), (8, 8), (2, 48)):
        attn = tg.CausalSelfAttention(tg.parse_descriptor("tiny"), h, d, 0)
        with torch.no_grad():
            for p in attn.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            got = attn(x).double()
        ref = naive_attention(attn, x)
        # fp32 against a float64 loop: compare relative to the output's magnitude.
        err = float((got - ref).abs().max()) / float(ref.abs().max())
        check(err < 5e-6, f"attention h={h} d={d} matches per-head loop (rel err {err:.2e})")

    uni = tg.GPT(tg.parse_descriptor("tiny"), seed=42)
    pri = prism_tiny("1 2 4 4\n")
    check(same_params(uni, pri), "same seed gives Prism and uniform identical weights")
    idx = torch.randint(0, 50257, (2, 16), generator=g)
    with torch.no_grad():
        lu, _ = uni(idx)
        lp, _ = pri(idx)
    diff = float((lu - lp).abs().max())
    check(diff > 1e-4, f"schedule 1 2 4 4 changes the logits (max diff {diff:.2e})")
    check(uni.num_parameters() == pri.num_parameters(), "... but not the parameter count")
    with torch.no_grad():
        lp2, _ = prism_tiny("4 4 4 4\n", name="uni4.txt")(idx)
    check(torch.equal(lu, lp2), "schedule 4 4 4 4 reproduces the uniform logits exactly")


# ----------------------------------------------------------------------------- (f) debug state
def test_debug_state():
    ds, mf = tmp("debug_state.bin"), tmp("debug_model.bin")
    B, T, steps = 4, 32, 10
    rc = tg.main(["--model", "tiny", "--debug_state", ds, "--write_model", mf,
                  "--B", str(B), "--T", str(T), "--steps", str(steps)])
    check(rc == 0, f"train_gpt2.main debug state exit code {rc}")
    cfg = tg.parse_descriptor("tiny")
    V, n = cfg.vocab_size, cfg.num_params()
    size = os.path.getsize(ds)
    expected = tg.debug_state_size(cfg, B, T, steps)
    hand = 1024 + 8 * B * T + 4 * B * T * V + 4 + 4 * n + 4 + 24 + 4 * steps
    check(size == expected == hand, f"debug state size {size} == {hand}")
    h = header_of(ds)
    check(list(h[:4]) == [20240327, 2, B, T] and not h[4:].any(), "debug state header")
    off = 1024
    x = np.fromfile(ds, dtype="<i4", count=B * T, offset=off); off += 4 * B * T
    y = np.fromfile(ds, dtype="<i4", count=B * T, offset=off); off += 4 * B * T
    g = torch.Generator()
    g.manual_seed(1337)
    toks = torch.randint(0, V, (B * T + 1,), generator=g).numpy()
    check(np.array_equal(x, toks[:-1]) and np.array_equal(y, toks[1:]),
          "x, y are the seed-1337 random tokens shifted by one")
    logits = np.fromfile(ds, dtype="<f4", count=B * T * V, offset=off); off += 4 * B * T * V
    loss = np.fromfile(ds, dtype="<f4", count=1, offset=off)[0]; off += 4
    grads = np.fromfile(ds, dtype="<f4", count=n, offset=off); off += 4 * n
    nsteps = np.fromfile(ds, dtype="<i4", count=1, offset=off)[0]; off += 4
    hyper = np.fromfile(ds, dtype="<f4", count=6, offset=off); off += 24
    losses = np.fromfile(ds, dtype="<f4", count=steps, offset=off); off += 4 * steps
    check(off == size, "trailer ends the file")
    check(nsteps == steps, f"trailer n_steps {nsteps}")
    check(np.array_equal(hyper, np.array([1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0], dtype="<f4")),
          f"trailer hyperparameters {hyper}")
    check(losses[0] == loss, f"losses[0] {losses[0]} == loss {loss}")
    check(abs(loss - math.log(V)) < 0.5, f"initial loss {loss:.4f} near ln V")
    check(all(losses[i + 1] < losses[i] for i in range(steps - 1)),
          f"losses decrease every step: {[round(float(v), 4) for v in losses]}")
    check(losses[-1] < losses[0] - 0.5, "10 steps at lr 1e-3 lower the loss by > 0.5")
    wte_grad = grads[:cfg.padded_vocab_size * cfg.n_embd].reshape(cfg.padded_vocab_size, -1)
    check(not wte_grad[V:].any() and wte_grad[:V].any(), "wte grad padded to Vp with zeros")

    # The model file holds the weights the logits and grads belong to (written before steps).
    model = tg.load_model(mf)
    xt = torch.from_numpy(x.astype(np.int64)).view(B, T)
    yt = torch.from_numpy(y.astype(np.int64)).view(B, T)
    lg, ls = model(xt, yt)
    ls.backward()
    check(np.float32(ls.item()) == loss, "reloaded model reproduces the loss exactly")
    check(np.array_equal(lg.detach().numpy().reshape(-1), logits), "... and the logits")
    mine = torch.cat([p.grad.reshape(-1) for s in model.slots() for p in s]).numpy()
    check(np.array_equal(mine, grads), "... and the 16 gradients in checkpoint order")

    # The hand-written AdamW step against torch.optim.AdamW (same math: decoupled decay on the
    # 2-D slots, bias-corrected moments), with the clip scale applied to the grads beforehand.
    ref = tg.load_model(mf)
    ref.load_state_dict(model.state_dict())
    for p, q in zip(model.parameters(), ref.parameters()):
        q.grad = p.grad.clone()
    norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ref.parameters()))
    scale = 1.0 / norm if norm > 1.0 else 1.0
    check(norm > 1.0, f"grad norm {norm:.3f} exercises clipping")
    slots = ref.slots()
    decay = [p for i, s in enumerate(slots) if i in tg.DECAY_SLOTS for p in s]
    nodecay = [p for i, s in enumerate(slots) if i not in tg.DECAY_SLOTS for p in s]
    with torch.no_grad():
        for p in ref.parameters():
            p.grad.mul_(scale)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    opt.step()
    params = [p for s in model.slots() for p in s]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    got = tg.adamw_step(model, m, v, 1, 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0)
    check(abs(got - norm) < 1e-9 * norm, "adamw_step returns the global grad norm")
    err = max(float((p - q).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
    check(err < 1e-7, f"hand AdamW step matches torch.optim.AdamW (max err {err:.1e})")


# ----------------------------------------------------------------------------- (g) schedules
def test_schedule_errors():
    table = tg.parse_schedule(write_text("ok.txt", "# prism\n1  2x32:mha # wide\n\n4*2\n"),
                              64, 4)
    check(table == [(1, 64, 0), (2, 32, 0), (4, 16, 0), (4, 16, 0)],
          f"comments, xD, :mha and *N parse: {table}")
    cases = (
        ("syntax.txt", "1 2\n4 4x\n", 2, "bad entry"),
        ("syntax2.txt", "# c\n\n1 2 4 four\n", 3, "bad entry"),
        ("divisor.txt", "1 2\n3 4\n", 2, "do not divide"),
        ("count_short.txt", "1\n2\n4\n", 3, "covers 3 layers"),
        ("count_x.txt", "1 2\n4x4\n", 2, "covers 3 layers, the model has L=4 ('4x4' is 1 layer of 4 heads of size 4; H*N is N layers of H heads)"),
        ("count_long.txt", "1 2\n4*3\n", 2, "more than"),
        ("decreasing.txt", "4\n2 4 4\n", 2, "non-decreasing"),
        ("unknown_kind.txt", "1 2 4:foo 4\n", 1, "unknown kind"),
        ("zero.txt", "0 4 4 4\n", 1, ">= 1"),
    )
    for name, text, line, needle in cases:
        path = write_text(name, text)
        expect_error(lambda: tg.parse_schedule(path, 64, 4), [f"{path}:{line}:", needle],
                     f"schedule error {name} at line {line}")
    path = tmp("decreasing.txt")
    table = tg.parse_schedule(path, 64, 4, unchecked=True)
    check(table[0][0] == 4 and table[1][0] == 2, "unchecked (as --layers reads it) accepts decreasing heads")
    check(tg.main(["--model", "tiny", "--layers", path]) == 0 and tg.main(["--model", "tiny", "--prism", path]) == 1,
          "CLI: --layers builds a model with decreasing heads, --prism refuses it")
    rc = tg.main(["--model", "tiny", "--prism", tmp("divisor.txt")])
    check(rc == 1, "CLI exits 1 on a bad schedule")


# ----------------------------------------------------------------------------- (h) --qk_scale
def test_qk_scale():
    """--qk_scale multiplies the Q and K rows of the standard layers' qkv weights (sharp attention
    for test_gpt2cu); S-D layers and every other tensor are left alone; bad values are one error."""
    base = prism_tiny("2 4:sd 4:lin 4\n", name="qk.txt")
    model = prism_tiny("2 4:sd 4:lin 4\n", name="qk.txt")
    tg.scale_qk(model, 10.0)
    ok = True
    for b, r in zip(model.blocks, base.blocks):
        w, wr = b.attn.qkv_w, r.attn.qkv_w
        A = b.attn.n_head * b.attn.head_size
        if b.attn.sd:
            ok &= bool(torch.equal(w, wr))
        else:
            ok &= bool(torch.equal(w[:2 * A], wr[:2 * A] * np.float32(10.0))) and bool(torch.equal(w[2 * A:], wr[2 * A:]))
    check(ok, "scale_qk: Q and K rows x10 in mha/lin layers; V rows and S-D layers unchanged")
    for bad in ("0", "-2", "nan", "inf"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = tg.main(["--model", "tiny", "--qk_scale", bad])
        lines = err.getvalue().strip().splitlines()
        check(rc == 1 and len(lines) == 1 and "--qk_scale" in lines[0] and "> 0" in lines[0],
              f"--qk_scale {bad}: exit 1, one line: {err.getvalue().strip()}")
    mf = tmp("qk_model.bin")
    tg.main(["--model", "tiny", "--write_model", mf])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = tg.main(["--model", mf, "--qk_scale", "10"])
    check(rc == 1 and "checkpoint" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1,
          f"--qk_scale on a checkpoint: exit 1, one line: {err.getvalue().strip()}")


# ----------------------------------------------------------------------------- (i) --emb_scale
def test_emb_scale():
    """--emb_scale F (doc/formats.md "Per-layer heads"): the blocks read F (wte[x] + wpe[t]), the tied head reads
    wte unscaled; the model is written as v103 with F's float32 bits in header[10] and read back;
    F = 1 writes the same bytes as no flag; bad values and a checkpoint are one error line."""
    scale = np.float32(35.36)
    mf, ds = tmp("emb_model.bin"), tmp("emb_state.bin")
    B, T = 2, 16
    rc = tg.main(["--model", "tiny", "--ln", "0", "--emb_scale", "35.36", "--write_model", mf,
                  "--debug_state", ds, "--B", str(B), "--T", str(T), "--steps", "3"])
    h = header_of(mf)
    check(rc == 0 and h[1] == 103 and h[9] == 1 and h[10] == scale.view("<i4"),
          f"--ln 0 --emb_scale 35.36: v103, header[9] 1, header[10] {h[10]:#010x} (float32 bits "
          f"{int(scale.view('<i4')):#010x})")
    model = tg.load_model(mf)
    check(model.config.emb_scale == float(scale), f"load_model reads emb_scale {model.config.emb_scale!r}")
    x = torch.from_numpy(np.fromfile(ds, dtype="<i4", count=B * T, offset=1024).astype(np.int64)).view(B, T)
    cfg = model.config
    with torch.no_grad():
        got = model(x)[0]
        hid = (torch.nn.functional.embedding(x, model.wte) + model.wpe[:T]) * torch.tensor(scale)
        for b in model.blocks:
            hid = b(hid)
        want = torch.nn.functional.layer_norm(hid, (cfg.n_embd,), model.lnf_w, model.lnf_b, eps=1e-5) \
            @ model.wte[:cfg.vocab_size].t()
        model.config.emb_scale = 1.0
        plain = model(x)[0]
        model.config.emb_scale = float(scale)
    check(torch.equal(got, want), "forward = blocks on F (wte[x] + wpe[t]), ln_f, the unscaled wte as head")
    # at init the stream is mostly x0 and ln_f undoes its scale, so F moves the logits only a
    # little; still far above float32 rounding (1e-7 of logits up to ~1)
    moved = float((got - plain).abs().max())
    check(moved > 1e-4, f"control: the same weights read with F = 1 move the logits by {moved:.2e} (> 1e-4)")
    off = 1024 + 8 * B * T
    logits = np.fromfile(ds, dtype="<f4", count=B * T * cfg.vocab_size, offset=off)
    check(np.array_equal(logits, got.numpy().reshape(-1)), "the debug state's logits are the scaled model's")
    a, b = tmp("emb_none.bin"), tmp("emb_one.bin")
    rc1 = tg.main(["--model", "tiny", "--ln", "0", "--write_model", a])
    rc2 = tg.main(["--model", "tiny", "--ln", "0", "--emb_scale", "1", "--write_model", b])
    check(rc1 == rc2 == 0 and open(a, "rb").read() == open(b, "rb").read() and header_of(b)[10] == 0,
          "--emb_scale 1 writes the same bytes as no flag (header[10] 0)")
    for bad in ("0", "-1", "nan", "inf", "20000"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = tg.main(["--model", "tiny", "--emb_scale", bad])
        lines = err.getvalue().strip().splitlines()
        check(rc == 1 and len(lines) == 1 and "--emb_scale" in lines[0] and "(0, 10000]" in lines[0],
              f"--emb_scale {bad}: exit 1, one line: {err.getvalue().strip()}")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = tg.main(["--model", mf, "--emb_scale", "2"])
    check(rc == 1 and "checkpoint" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1,
          f"--emb_scale on a checkpoint: exit 1, one line: {err.getvalue().strip()}")


# ----------------------------------------------------------------------------- (j) sample.py --help
def test_sample_help():
    """scripts/sample.py samples from this model (its runs are checked in test/test_scripts.sh);
    here its --help: every option shows its default (the required -e says it is required)."""
    script = os.path.join(os.path.dirname(HERE), "scripts", "sample.py")
    p = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    text = " ".join(p.stdout.split())  # argparse wraps long help lines
    check(p.returncode == 0 and "(default: 64)" in text and "(default: 1337)" in text and "(default: 1.0)" in text,
          f"sample.py --help shows the defaults of -n (64), --seed (1337), --temperature (1.0) ({p.stderr.strip()[-200:]})")
    # one entry per option: a line starting "  -", with the indented lines that continue it
    entries, section = [], None
    for line in p.stdout.splitlines():
        if line and not line.startswith(" "):
            section = line
        elif section is not None and section.startswith("option") and line.startswith("  -"):
            entries.append(line.strip())
        elif entries and line.startswith("    "):
            entries[-1] += " " + line.strip()
    bare = [e.split()[0] for e in entries if not e.startswith("-h,") and "default" not in e and "required" not in e]
    check(len(entries) >= 8 and not bare, f"sample.py --help: each of {len(entries)} options names its default "
          f"(without one: {bare})")


if __name__ == "__main__":
    for fn in (test_counts, test_descriptors, test_prism_count, test_checkpoints, test_init,
               test_attention, test_debug_state, test_schedule_errors, test_qk_scale, test_emb_scale,
               test_sample_help):
        try:
            fn()
        except Exception as e:  # a crash is a failure of that group, not of the run
            check(False, f"{fn.__name__} raised {type(e).__name__}: {e}")
    shutil.rmtree(TMP, ignore_errors=True)
    finish()
