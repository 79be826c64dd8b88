"""noln_variants.py: the discriminating experiments for LayerNorm-free blocks, on the reference model.

Trains train_gpt2.py's GPT (fp32, CPU) and changes one thing at a time, to find which part of a
recipe lets blocks without ln_1 / ln_2 (-ln 0, doc/methods.md "Training without LayerNorm") learn more than byte pairs
(doc/records/noln_lr_warmup.md). The variants, none of which the
trainers implement:

  --lnf 0              drop ln_f too: the LM head reads the residual stream (doc/methods.md "Training without LayerNorm",
                       option 2), so the loss sees the stream's size
  --branch_scale s     multiply every attention and MLP branch output by a fixed s (1/sqrt(2L) is
                       GPT-2's residual scaling, here applied in the forward, not only at init)
  --gain in            a learned scalar per sub-block on its input: f(x * exp(g)), g from 0
  --gain out           a learned scalar per sub-block on its output: x + g f(x), g from 1
  --gain_lr m          the gains' learning rate is m times the schedule's (Adam moves a scalar by
                       about lr per step, so at lr 1e-3 a gain needs m > 1 to move far in 2,000 steps)
  --qk_scale f         standard attention's W_Q and W_K init times f (train_gpt2.scale_qk): the
                       logit scale of an S-D layer with U at std 0.02 f

Everything else is the trainer's recipe: AdamW (betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on
the 2-D tensors only), clipping at 1, linear warmup then cosine to 0.1 of the peak over --total
steps. Training windows of B x T are drawn uniformly from the train shards (seeded by --seed; not
the C loader's order, so the losses match the trainer's in level, not to the digit); the val loss
is the trainer's: the first --val_batches consecutive windows of the val shard.

  /usr/bin/python3 sd_attention/noln_variants.py --model L4C128H4T256V256 --ln 0 --lnf 0 \\
      --train 'dev/data/prose_bytes/prose_bytes_train_*.bin' --val dev/data/prose_bytes/prose_bytes_val_000000.bin

prints one line per --every steps: step, val loss, the RMS of the stream entering ln_f (or the
LM head) on the last training batch, the largest gradient norm so far and the number of blow-up
steps (gradient norm above 100 or not finite), and the gains.
"""
import argparse
import glob
import math
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2 as tg  # noqa: E402  (exits with one line naming the interpreter without torch)
from sd_attention.routing_null import lr_at  # noqa: E402  (the trainer's cosine schedule, llmc/schedulers.h)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BLOWUP_NORM = 100.0


class Variant:
    """A GPT and the variant's extra pieces; forward() mirrors GPT.forward and Block.forward of
    train_gpt2.py, with the variant's changes marked."""

    def __init__(self, model, lnf=1, branch_scale=1.0, gain="none"):
        self.model, self.lnf, self.branch_scale, self.gain = model, lnf, branch_scale, gain
        L = len(model.blocks)
        init = 1.0 if gain == "out" else 0.0
        # (L, 2): per block, the attention and the MLP sub-block's gain
        self.gains = torch.nn.Parameter(torch.full((L, 2), init)) if gain != "none" else None
        self.stream_rms = float("nan")

    def sub_block(self, l, j, f, x, norm):
        """One residual branch: x + scale * f(norm(x)), with the variant's gain."""
        inp = norm(x)
        if self.gain == "in":
            inp = inp * torch.exp(self.gains[l, j])
        out = f(inp) * self.branch_scale
        if self.gain == "out":
            out = out * self.gains[l, j]
        return x + out

    def forward(self, idx, targets):
        m = self.model
        cfg = m.config
        C = cfg.n_embd
        x = m.embed(idx)      # F (wte[x] + wpe[t]) with the model's emb_scale F
        for l, b in enumerate(m.blocks):
            ln = (lambda w, bias: (lambda t: F.layer_norm(t, (C,), w, bias, eps=1e-5))) if b.use_ln else None
            norm1 = ln(b.ln1_w, b.ln1_b) if ln else (lambda t: t)
            norm2 = ln(b.ln2_w, b.ln2_b) if ln else (lambda t: t)
            mlp = (lambda t, b=b: F.linear(F.gelu(F.linear(t, b.fc_w, b.fc_b), approximate="tanh"),
                                           b.fcproj_w, b.fcproj_b))
            x = self.sub_block(l, 0, b.attn, x, norm1)
            x = self.sub_block(l, 1, mlp, x, norm2)
        self.stream_rms = float(x.detach().pow(2).mean().sqrt())
        if self.lnf:  # variant: --lnf 0 skips this
            x = F.layer_norm(x, (C,), m.lnf_w, m.lnf_b, eps=1e-5)
        logits = x @ m.wte[:cfg.vocab_size].t()
        return logits, F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1))

    def param_groups(self, wd, gain_lr):
        """AdamW groups: the 2-D slots decay (train_gpt2.DECAY_SLOTS), the rest do not; the gains
        have their own learning-rate multiple ("lr_mul")."""
        slots = self.model.slots()
        groups = [{"params": [p for i, s in enumerate(slots) for p in s if i in tg.DECAY_SLOTS],
                   "weight_decay": wd, "lr_mul": 1.0},
                  {"params": [p for i, s in enumerate(slots) for p in s if i not in tg.DECAY_SLOTS],
                   "weight_decay": 0.0, "lr_mul": 1.0}]
        if self.gains is not None:
            groups.append({"params": [self.gains], "weight_decay": 0.0, "lr_mul": gain_lr})
        return groups


def build(a):
    flags = 0 if a.ln else tg.FLAG_NO_LN
    table = None
    if a.kind != "mha":
        cfg = tg.parse_descriptor(a.model)
        table = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
        table.write(f"{cfg.n_head}:{a.kind}*{cfg.n_layer}\n")
        table.close()
        table = table.name
    try:
        model = tg.build_model(a.model, layers=table, seed=a.seed, flags=flags,
                               sd_init_u=a.sd_init_u)
    finally:
        if table:
            os.unlink(table)
    if a.qk_scale != 1.0:
        tg.scale_qk(model, a.qk_scale)
    return Variant(model, a.lnf, a.branch_scale, a.gain)


def val_loss(v, tokens, B, T, batches):
    with torch.no_grad():
        return sum(v.forward(*tg._window(tokens, k * B * T, B, T))[1].item() for k in range(batches)) / batches


def train(a, out=sys.stdout):
    torch.manual_seed(a.seed)
    v = build(a)
    files = sorted(glob.glob(a.train))
    if not files:
        raise SystemExit(f"error: --train {a.train}: no file matches")
    tokens = np.concatenate([tg.read_shard(f) for f in files])
    val = tg.read_shard(a.val)
    B, T = a.B, a.T
    if len(tokens) <= B * T + 1 or len(val) < a.val_batches * B * T + 1:
        raise SystemExit(f"error: --train has {len(tokens)} tokens, --val {len(val)}: too few for "
                         f"B*T = {B * T} (val: {a.val_batches} windows)")
    opt = torch.optim.AdamW(v.param_groups(0.1, a.gain_lr), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    params = [p for g in opt.param_groups for p in g["params"]]
    rng = np.random.default_rng(a.seed)
    largest, blowups, t0 = 0.0, 0, time.time()

    def report(step):
        g = "" if v.gains is None else " gains " + " ".join("%.3f" % x for x in v.gains.detach().flatten().tolist())
        print(f"step {step} val {val_loss(v, val, B, T, a.val_batches):.4f} stream_rms {v.stream_rms:.4g} "
              f"largest_norm {largest:.3g} blowups {blowups} time {time.time() - t0:.0f}s{g}", file=out, flush=True)

    for step in range(a.steps):
        if step % a.every == 0:
            report(step)
        starts = rng.integers(0, len(tokens) - B * T - 1, size=B)
        x = torch.from_numpy(np.stack([tokens[s:s + T] for s in starts]).astype(np.int64))
        y = torch.from_numpy(np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64))
        loss = v.forward(x, y)[1]
        opt.zero_grad()
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        if not math.isfinite(norm) or norm > BLOWUP_NORM:
            blowups += 1
        largest = max(largest, norm) if math.isfinite(norm) else float("inf")
        for g in opt.param_groups:
            g["lr"] = float(lr_at(step, a.lr, a.warmup, a.total or a.steps, 0.1)) * g["lr_mul"]
        opt.step()
    report(a.steps)
    return v


def args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="L4C128H4T256V256", help="descriptor (train_gpt2.parse_descriptor)")
    p.add_argument("--kind", choices=tg.KINDS, default="mha", help="every layer's kind")
    p.add_argument("--ln", type=int, choices=(0, 1), default=0, help="ln_1 and ln_2 (1) or neither (0)")
    p.add_argument("--lnf", type=int, choices=(0, 1), default=1, help="keep ln_f (1) or drop it (0)")
    p.add_argument("--branch_scale", type=float, default=1.0, help="fixed factor on every branch output")
    p.add_argument("--gain", choices=("none", "in", "out"), default="none", help="learned scalar per sub-block")
    p.add_argument("--gain_lr", type=float, default=1.0, help="the gains' lr as a multiple of the schedule's")
    p.add_argument("--qk_scale", type=float, default=1.0, help="W_Q and W_K init times this (mha layers)")
    p.add_argument("--sd_init_u", type=float, default=0.02, help="std of U (sd layers)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--warmup", type=int, default=100, help="warmup steps")
    p.add_argument("--steps", type=int, default=400, help="steps to run")
    p.add_argument("--total", type=int, default=1920, help="the cosine's length (0: --steps)")
    p.add_argument("--seed", type=int, default=1, help="init and window order")
    p.add_argument("--B", type=int, default=16)
    p.add_argument("--T", type=int, default=256)
    p.add_argument("--train", default="dev/data/prose_bytes/prose_bytes_train_*.bin", help="train shards (glob)")
    p.add_argument("--val", default="dev/data/prose_bytes/prose_bytes_val_000000.bin", help="val shard")
    p.add_argument("--val_batches", type=int, default=16)
    p.add_argument("--every", type=int, default=100, help="val every this many steps")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    a = p.parse_args(argv)
    for name in ("steps", "B", "T", "val_batches", "every", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name} {getattr(a, name)}: expected at least 1")
    if a.warmup < 0 or a.total < 0 or not a.lr > 0 or not a.branch_scale > 0 or not a.gain_lr > 0:
        p.error("--warmup and --total must be >= 0, --lr, --branch_scale and --gain_lr > 0")
    if a.total and a.total < a.steps:
        p.error(f"--total {a.total}: the cosine must cover --steps {a.steps} (0: --steps)")
    if a.qk_scale != 1.0 and a.kind != "mha":
        p.error("--qk_scale scales standard attention's W_Q and W_K: it needs --kind mha")
    return a


def main(argv=None):
    a = args(argv)
    torch.set_num_threads(a.threads)
    print("noln_variants: " + " ".join(f"{k} {v}" for k, v in vars(a).items()), flush=True)
    try:
        train(a)
    except (tg.FormatError, ValueError, OSError) as e:
        raise SystemExit(f"error: {e}")


if __name__ == "__main__":
    main()
