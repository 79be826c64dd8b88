"""test/test_noln_variants.py: sd_attention/noln_variants.py, the LayerNorm-free variant screens
(doc/records/noln_lr_warmup.md).

Checks, each against the reference model (train_gpt2.py) computed another way:
- with no variant, forward() equals GPT.forward (logits and loss, mha and sd, -ln 0 and -ln 1);
- --branch_scale s equals the plain model with both output projections (weights and biases)
  scaled by s; --gain out with every gain at s equals it too; at their init (in: 0, out: 1) the
  gains change nothing, and a gain of 2 on one sub-block does (negative control);
- --gain in with every gain at log s equals the plain -ln 0 model with W_qkv and W_fc scaled by s;
- --lnf 0 equals the blocks' output times wte without ln_f;
- lr_at at hand-computed points; a 6-step run on tiny shards prints its val lines with no
  blow-up, and moves the gains; bad options give one line and a non-zero exit.
Tolerance: 1e-5 relative on logits (fp32, the same operations in another order).
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from harness import check, finish  # noqa: E402
import train_gpt2 as tg  # noqa: E402
from sd_attention import noln_variants as nv  # noqa: E402
from dev.data.data_common import write_datafile  # noqa: E402

TOOL = os.path.join(ROOT, "sd_attention", "noln_variants.py")
DESC = "L2C32H2T16V64"
RTOL = 1e-5


def model(kind="mha", ln=0, seed=3):
    a = nv.args(["--model", DESC, "--kind", kind, "--ln", str(ln), "--seed", str(seed)])
    return nv.build(a).model


def close(a, b):
    return float((a - b).abs().max()) <= RTOL * float(b.abs().max())


@torch.no_grad()
def same_forward_checks(x, y):
    for kind in ("mha", "sd"):
        for ln in (0, 1):
            m = model(kind, ln)
            ref_logits, ref_loss = m(x, y)
            logits, loss = nv.Variant(m).forward(x, y)
            check(close(logits, ref_logits) and abs(loss.item() - ref_loss.item()) <= RTOL * ref_loss.item(),
                  f"{kind} -ln {ln}, no variant: logits and loss equal GPT.forward ({loss.item():.6f})")


@torch.no_grad()
def branch_checks(x, y):
    s = 0.37
    m = model("sd", 0)
    v_scale = nv.Variant(m, branch_scale=s).forward(x, y)[0]
    v_out = nv.Variant(m, gain="out")
    v_out.gains.fill_(s)
    out_logits = v_out.forward(x, y)[0]
    ref = model("sd", 0)
    for b in ref.blocks:
        for t in (b.attn.proj_w, b.attn.proj_b, b.fcproj_w, b.fcproj_b):
            t.mul_(s)
    want = ref(x, y)[0]
    check(close(v_scale, want), f"--branch_scale {s} equals the output projections scaled by {s}")
    check(close(out_logits, want), f"--gain out with every gain at {s} equals the same")
    plain = nv.Variant(m).forward(x, y)[0]
    for g in ("in", "out"):
        check(close(nv.Variant(m, gain=g).forward(x, y)[0], plain), f"--gain {g} at its init changes nothing")
    v = nv.Variant(m, gain="out")
    v.gains[1, 0] = 2.0
    check(not close(v.forward(x, y)[0], plain), "a gain of 2 on layer 1's attention changes the logits (control)")

    v_in = nv.Variant(m, gain="in")
    v_in.gains.fill_(math.log(s))
    ref = model("sd", 0)
    for b in ref.blocks:
        b.attn.qkv_w.mul_(s)
        b.fc_w.mul_(s)
    check(close(v_in.forward(x, y)[0], ref(x, y)[0]), f"--gain in at log {s} equals W_qkv and W_fc scaled by {s}")


@torch.no_grad()
def lnf_checks(x, y):
    m = model("mha", 0)
    logits = nv.Variant(m, lnf=0).forward(x, y)[0]
    h = torch.nn.functional.embedding(x, m.wte) + m.wpe[:x.shape[1]]
    for b in m.blocks:
        h = b(h)
    want = h @ m.wte[:m.config.vocab_size].t()
    check(close(logits, want), "--lnf 0: logits are the blocks' output times wte")
    check(not close(logits, m(x, y)[0]), "--lnf 0 differs from the model with ln_f (control)")


def schedule_checks():
    got = [float(nv.lr_at(s, 1.0, 10, 110, 0.1)) for s in (0, 4, 9, 10, 60, 110)]
    want = [0.1, 0.5, 1.0, 1.0, 0.1 + 0.9 * 0.5, 0.1]
    check(all(abs(g - w) < 1e-6 for g, w in zip(got, want)), f"lr_at: warmup, cosine to 0.1 ({got})")


def cli_checks(d):
    rng = np.random.default_rng(0)
    write_datafile(os.path.join(d, "tr.bin"), rng.integers(0, 64, 4000))
    write_datafile(os.path.join(d, "va.bin"), rng.integers(0, 64, 2000))
    base = [sys.executable, TOOL, "--model", DESC, "--B", "2", "--T", "16", "--val_batches", "2",
            "--train", os.path.join(d, "tr*.bin"), "--val", os.path.join(d, "va.bin")]
    r = subprocess.run(base + ["--steps", "6", "--every", "3", "--warmup", "2", "--total", "6",
                               "--gain", "in", "--gain_lr", "10"], capture_output=True, text=True)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("step ")]
    gains = [float(g) for g in lines[-1].split(" gains ")[1].split()] if lines and " gains " in lines[-1] else []
    check(r.returncode == 0 and [ln.split()[1] for ln in lines] == ["0", "3", "6"]
          and all(" blowups 0 " in ln for ln in lines) and len(gains) == 4 and all(abs(g) > 1e-3 for g in gains),
          f"6 steps with --gain in: val at 0, 3, 6, no blow-up, the 4 gains moved ({gains}) "
          f"(rc {r.returncode}: {r.stderr.strip()[-200:]})")
    for extra, want in ((["--kind", "sd", "--qk_scale", "2"], "--qk_scale"),
                        (["--train", os.path.join(d, "none*.bin")], "no file matches"),
                        (["--steps", "0"], "--steps 0"),
                        (["--steps", "10", "--total", "5"], "--total 5")):
        r = subprocess.run(base + extra, capture_output=True, text=True)
        err = r.stderr.strip().splitlines()
        check(r.returncode != 0 and err and want in err[-1], f"{' '.join(extra)}: one line naming {want!r} ({err[-1:] })")


def main():
    torch.manual_seed(0)
    x = torch.randint(0, 64, (2, 16))
    y = torch.randint(0, 64, (2, 16))
    same_forward_checks(x, y)
    branch_checks(x, y)
    lnf_checks(x, y)
    schedule_checks()
    with tempfile.TemporaryDirectory() as d:
        cli_checks(d)
    finish()


if __name__ == "__main__":
    main()
