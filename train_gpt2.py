"""train_gpt2.py: the PyTorch reference model for the C/CUDA trainer.

Defines
  - GPT: a GPT-2 pre-LN model (fp32, explicit attention; its GPTConfig is llmc_formats/checkpoint.py's)
    whose attention layers each have their own head count h_l, head size d_l and kind (the layer
    table, doc/formats.md "Per-layer heads"):
    mha softmax attention, sd S-D attention (doc/methods.md "Formulation A"), lin ELU+1 linear attention and
    sdlin (doc/methods.md "ELU+1 causal linear attention"), optionally without the per-block LayerNorms (-ln 0, doc/methods.md "Training without LayerNorm") and with the
    input scaled by emb_scale F (the blocks read F (wte[x] + wpe[t]); the head reads wte unscaled);
  - init_weights: the init of doc/formats.md "Random init and RNG order", drawn in the C trainer's order;
  - write_model / load_model: a GPT to and from a checkpoint, versions 3/5 (llm.c) and 103/105
    (with a layer table);
  - a command line that writes checkpoints, the debug-state file (with our AdamW trailer) that the
    C/CUDA tests compare against, and a val loss over a token shard.

The file formats are llmc_formats/'s (the package next to this file), and this module re-exports
what its users import from here: GPTConfig and the checkpoint constants (llmc_formats/checkpoint.py),
parse_descriptor (descriptor.py), parse_schedule (layer_table.py), read_shard (shards.py) and
FormatError.

Importing this module runs nothing. Everything runs on the CPU in fp32 and is deterministic.
"""
import argparse
import math
import os
import sys

import llmc_formats  # noqa: E402,F401  (puts the repository root on sys.path; llmc_formats/__init__.py)
llmc_formats.require(__file__, "numpy", "torch")  # else one line naming `make deps`
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Constants (doc/formats.md "Conventions and magic numbers", "Model checkpoint") and the formats, from llmc_formats/ (the package at the
# repository root, next to this file): checkpoints, descriptors, layer tables, shards. The names
# below are this module's too, for the code and tests that import them from here.

from llmc_formats import FormatError  # noqa: E402,F401
from llmc_formats.checkpoint import (FLAG_LIN_PRESCALE, FLAG_NO_LN, FLAG_SD_PLUS_D,  # noqa: E402,F401
                                     FLAG_SD_SCALAR_D, GPT2_VOCAB, KINDS, KNOWN_FLAGS, LINEAR_KINDS,
                                     MAX_TABLE_LAYERS, MODEL_MAGIC, SD_KINDS, SLOT_NAMES, GPTConfig,
                                     padded_vocab)
from llmc_formats import checkpoint  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402
from llmc_formats.descriptor import GPT2_SHAPES, GPT3_SHAPES, MAX_VOCAB, parse_descriptor  # noqa: E402,F401
from llmc_formats.layer_table import parse_schedule  # noqa: E402,F401
from llmc_formats.shards import SHARD_MAGIC, read_shard  # noqa: E402,F401

STATE_MAGIC = 20240327          # debug state
DEBUG_STATE_VERSION = 2         # v2 = gradients with the padded vocabulary
LIN_EPS = 1e-6                  # the linear-attention normalizer's epsilon, as the C kernels
# Weight decay applies to the 2-D slots only (doc/formats.md "Optimization semantics").
DECAY_SLOTS = frozenset((0, 1, 4, 6, 10, 12))
SDSKEW_SLOT = 16                # decayed only with --sd_decay_s (doc/methods.md "Parameter counts")


# ---------------------------------------------------------------------------------------------
# Model. Parameters are created uninitialized (torch.empty) so that building even a large model
# is cheap; init_weights (or load_model) gives them values.

def _param(*shape):
    return nn.Parameter(torch.empty(*shape, dtype=torch.float32))


def elu1(x):
    """phi(x) = elu(x) + 1 > 0, the feature map of linear attention (doc/methods.md "ELU+1 causal linear attention")."""
    return F.elu(x) + 1.0


def linear_mix(q, k, v, prescale):
    """Causal ELU+1 linear attention in its prefix-sum form (Katharopoulos et al. 2020):
    P_t = sum_{s<=t} phi(k_s)^T v_s, z_t = sum_{s<=t} phi(k_s),
    o_t = phi(q_t) P_t / (phi(q_t) . z_t + eps). (The C reference computes the equal O(T^2)
    normalized form, so the two implementations check each other.) q, k, v: (B, h, T, d)."""
    c = q.shape[-1] ** -0.25 if prescale else 1.0
    qf, kf = elu1(c * q), elu1(c * k)
    P = torch.einsum("bhtd,bhte->bhtde", kf, v).cumsum(dim=2)
    z = kf.cumsum(dim=2)
    num = torch.einsum("bhtd,bhtde->bhte", qf, P)
    den = (qf * z).sum(-1, keepdim=True) + LIN_EPS
    return num / den


def softmax_mix(q, k, v):
    """Causal softmax attention with scale 1/sqrt(d). q, k, v: (B, h, T, d)."""
    T, d = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v


class CausalSelfAttention(nn.Module):
    """One layer's attention: h heads of size d, width A = h*d (may differ from C), of a kind:
      mha / lin:   q, k, v from qkv_w (3A, C): the Q block, the K block, the V block, each A rows;
                   head k owns rows [k*d, (k+1)*d) of each block (doc/formats.md, doc/methods.md "Notation").
      sd / sdlin:  u, v from qkv_w (2A, C): the U block then the V block. Per head
                   L = S + sign*D with S skew from the packed strict upper triangle sd_skew (h,
                   d(d-1)/2) and D = diag(softplus(sd_theta)); logits u_i L u_j^T / sqrt(d)
                   (doc/methods.md "Formulation A"), computed as u . k' with k' = u L^T (the fold, doc/methods.md "Realization with the standard attention kernels").
    mha and sd mix with softmax, lin and sdlin with ELU+1 linear attention (doc/methods.md "ELU+1 causal linear attention")."""

    def __init__(self, cfg, n_head, head_size, kind):
        super().__init__()
        self.n_head, self.head_size, self.kind = n_head, head_size, kind
        self.sd = kind in SD_KINDS
        self.linear = kind in LINEAR_KINDS
        self.sd_sign, self.lin_prescale = cfg.sd_sign, cfg.lin_prescale
        width = n_head * head_size
        nqk = checkpoint.qkv_rows(kind)  # Q | K | V, or S-D's U | V
        self.qkv_w = _param(nqk * width, cfg.n_embd)
        self.qkv_b = _param(nqk * width)
        self.proj_w = _param(cfg.n_embd, width)
        self.proj_b = _param(cfg.n_embd)
        if self.sd:
            self.sd_skew = _param(n_head, head_size * (head_size - 1) // 2)
            self.sd_theta = _param(n_head) if cfg.sd_scalar_d else _param(n_head, head_size)

    def generator(self):
        """L (h, d, d) = S + sign * diag(softplus(theta)) for every head: the mirror of the C
        definition sd_build_generator (sd_attention/generator.h; doc/methods.md "Formulation A"), the same
        packing and softplus threshold; test/test_gpt2_cpu.sh checks the two models' S-D layers
        (forward and every gradient) against each other."""
        h, d = self.n_head, self.head_size
        iu, ju = torch.triu_indices(d, d, offset=1)
        A = torch.zeros(h, d, d, dtype=self.sd_skew.dtype)
        A[:, iu, ju] = self.sd_skew                       # S_ij = s for i < j (row-major)
        S = A - A.transpose(1, 2)                         # S_ji = -s
        D = F.softplus(self.sd_theta)
        D = D.unsqueeze(1).expand(h, d) if D.dim() == 1 else D
        return S + self.sd_sign * torch.diag_embed(D)

    def forward(self, x):
        B, T, _ = x.shape
        h, d = self.n_head, self.head_size
        heads = lambda t: t.reshape(B, T, h, d).transpose(1, 2)   # (B, T, h*d) -> (B, h, T, d)
        proj = F.linear(x, self.qkv_w, self.qkv_b)
        if self.sd:
            u, v = (heads(t) for t in proj.split(h * d, dim=-1))
            q, k = u, torch.einsum("nhti,hai->nhta", u, self.generator())   # k' = u L^T
        else:
            q, k, v = (heads(t) for t in proj.split(h * d, dim=-1))
        y = linear_mix(q, k, v, self.lin_prescale) if self.linear else softmax_mix(q, k, v)
        return F.linear(y.transpose(1, 2).reshape(B, T, h * d), self.proj_w, self.proj_b)


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)); with -ln 0 (flag bit 0)
    the sub-blocks read x itself (doc/methods.md "Training without LayerNorm", option 1: ln_f is kept)."""

    def __init__(self, cfg, n_head, head_size, kind):
        super().__init__()
        C = cfg.n_embd
        self.use_ln = cfg.use_ln
        if self.use_ln:
            self.ln1_w, self.ln1_b = _param(C), _param(C)
            self.ln2_w, self.ln2_b = _param(C), _param(C)
        self.attn = CausalSelfAttention(cfg, n_head, head_size, kind)
        self.fc_w, self.fc_b = _param(4 * C, C), _param(4 * C)
        self.fcproj_w, self.fcproj_b = _param(C, 4 * C), _param(C)

    def forward(self, x):
        C = x.shape[-1]
        norm1 = (lambda t: F.layer_norm(t, (C,), self.ln1_w, self.ln1_b, eps=1e-5)) if self.use_ln else (lambda t: t)
        norm2 = (lambda t: F.layer_norm(t, (C,), self.ln2_w, self.ln2_b, eps=1e-5)) if self.use_ln else (lambda t: t)
        x = x + self.attn(norm1(x))
        hid = F.linear(norm2(x), self.fc_w, self.fc_b)
        return x + F.linear(F.gelu(hid, approximate="tanh"), self.fcproj_w, self.fcproj_b)


class GPT(nn.Module):
    """GPT-2 with a per-layer attention table. wte is (Vp, C) and doubles as the LM head; only
    its first V rows produce logits, so the padded rows never receive gradient. The blocks' input
    is F (wte[x] + wpe[t]) with F = config.emb_scale (header[10], doc/formats.md "Per-layer heads"): with
    GPT-2's init (std 0.02) the stream enters the blocks at an RMS of about 0.03, which F = 35.36
    raises to 1 for blocks without LayerNorm; the tied head reads wte unscaled."""

    def __init__(self, config, seed=None):
        super().__init__()
        self.config = config
        C = config.n_embd
        self.wte = _param(config.padded_vocab_size, C)
        self.wpe = _param(config.block_size, C)
        self.blocks = nn.ModuleList(Block(config, h, d, kind) for h, d, kind in config.layers)
        self.lnf_w, self.lnf_b = _param(C), _param(C)
        if seed is not None:
            init_weights(self, seed)

    def slots(self):
        """The parameters as 18 lists in checkpoint order (doc/formats.md "The 16 parameter tensors", then the S-D slots),
        layer 0 first; a layer without a tensor (no LN; not S-D) contributes nothing."""
        bl = self.blocks
        ln = [b for b in bl if b.use_ln]
        sd = [b for b in bl if b.attn.sd]
        return [[self.wte], [self.wpe],
                [b.ln1_w for b in ln], [b.ln1_b for b in ln],
                [b.attn.qkv_w for b in bl], [b.attn.qkv_b for b in bl],
                [b.attn.proj_w for b in bl], [b.attn.proj_b for b in bl],
                [b.ln2_w for b in ln], [b.ln2_b for b in ln],
                [b.fc_w for b in bl], [b.fc_b for b in bl],
                [b.fcproj_w for b in bl], [b.fcproj_b for b in bl],
                [self.lnf_w], [self.lnf_b],
                [b.attn.sd_skew for b in sd], [b.attn.sd_theta for b in sd]]

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    def embed(self, idx):
        """idx (B, T) int64 -> the first block's input F (wte[idx] + wpe[:T]), F = emb_scale.
        F = 1 is skipped, so the unscaled model is computed exactly as without the option."""
        x = F.embedding(idx, self.wte) + self.wpe[:idx.shape[1]]
        if self.config.emb_scale != 1.0:
            x = x * self.config.emb_scale      # a float32 value (GPTConfig), as the C trainer's
        return x

    def forward(self, idx, targets=None):
        """idx (B, T) int64 -> logits (B, T, V) over the real vocabulary, and the mean
        cross-entropy against targets (or None)."""
        B, T = idx.shape
        cfg = self.config
        if T > cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds maxT={cfg.block_size}")
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, (cfg.n_embd,), self.lnf_w, self.lnf_b, eps=1e-5)
        logits = x @ self.wte[:cfg.vocab_size].t()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1))
        return logits, loss


@torch.no_grad()
def init_weights(model, seed=42):
    """doc/formats.md "Random init and RNG order": N(0, 0.02) weights, N(0, 0.02/sqrt(2L)) residual projections, zero biases
    and padded wte rows, unit LayerNorm weights. One normal_ call per tensor on one mt19937
    generator, in PyTorch module order (wte rows [0, V), wpe, then per layer qkvw, [S-D: the packed
    skew ~ N(0, sd_init_s^2)], attprojw, fcw, fcprojw), so the C trainer, which replays torch's
    normal_ algorithm, draws the same values. theta = sd_init_theta (no draw)."""
    cfg = model.config
    g = torch.Generator()
    g.manual_seed(seed)
    std = 0.02
    resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    model.wte.zero_()
    # A contiguous view of the first V rows: exactly V*C draws, as in llm.c.
    model.wte[:cfg.vocab_size].normal_(0.0, std, generator=g)
    model.wpe.normal_(0.0, std, generator=g)
    for b in model.blocks:
        b.attn.qkv_w.normal_(0.0, std, generator=g)
        if b.attn.sd:  # the packed skew belongs to the attention module: drawn right after qkv
            if cfg.sd_init_u != std:  # U rows rescaled after the one draw (stream unchanged)
                width = b.attn.n_head * b.attn.head_size
                b.attn.qkv_w[:width].mul_(np.float32(cfg.sd_init_u) / np.float32(std))
            b.attn.sd_skew.normal_(0.0, cfg.sd_init_s, generator=g)
            b.attn.sd_theta.fill_(cfg.sd_init_theta)
        b.attn.proj_w.normal_(0.0, resid_std, generator=g)
        b.fc_w.normal_(0.0, std, generator=g)
        b.fcproj_w.normal_(0.0, resid_std, generator=g)
        for p in (b.attn.qkv_b, b.attn.proj_b, b.fc_b, b.fcproj_b):
            p.zero_()
        if b.use_ln:
            b.ln1_b.zero_()
            b.ln2_b.zero_()
            b.ln1_w.fill_(1.0)
            b.ln2_w.fill_(1.0)
    model.lnf_w.fill_(1.0)
    model.lnf_b.zero_()
    return model


# ---------------------------------------------------------------------------------------------
# Checkpoints (doc/formats.md "Header", "Per-layer heads")

def write_model(model, path, dtype="fp32"):
    """Write a checkpoint: version 3/5 (byte-identical to llm.c) for a uniform table, else
    103/105 with the layer table in header[8], [9], [16+3l..18+3l] and emb_scale in header[10]
    (llmc_formats/checkpoint.py)."""
    checkpoint.encode_header(model.config, dtype, path)   # the dtype and table checks, before any write
    tensors = (t.detach().contiguous().numpy() for slot in model.slots() for t in slot)
    checkpoint.write(path, model.config, tensors, dtype)


def load_model(path):
    """Read a checkpoint of version 3, 5, 103 or 105 (bf16 widened to fp32) into a new GPT.
    Every inconsistency raises FormatError with one line naming the file and the field."""
    cfg, _, flat = checkpoint.read(path)
    model = GPT(cfg)
    pos = 0
    with torch.no_grad():
        for slot in model.slots():
            for p in slot:
                k = p.numel()
                p.copy_(torch.from_numpy(flat[pos:pos + k]).view(p.shape))
                pos += k
    return model


# ---------------------------------------------------------------------------------------------
# Token shards (doc/formats.md "Token shards"): read_shard is llmc_formats/shards.py's

def _window(tokens, start, B, T):
    # Inputs are B*T tokens from `start`, targets the same window shifted by 1 (doc/formats.md "DataLoader semantics").
    w = torch.from_numpy(tokens[start:start + B * T + 1].astype(np.int64))
    return w[:-1].view(B, T), w[1:].view(B, T)


@torch.no_grad()
def eval_loss(model, shard, B, T, batches):
    """Mean of the per-batch mean losses over the first `batches` consecutive B*T windows
    (llm.c's val loader: no shuffle, window k starts at token k*B*T)."""
    tokens = read_shard(shard)
    need = batches * B * T + 1
    if len(tokens) < need:
        raise ValueError(f"{shard}: {len(tokens)} tokens, {batches} batches of B*T={B * T} "
                         f"need {need}")
    total = 0.0
    for k in range(batches):
        x, y = _window(tokens, k * B * T, B, T)
        total += model(x, y)[1].item()
    return total / batches


# ---------------------------------------------------------------------------------------------
# Debug state and the reference AdamW trajectory (doc/formats.md "Debug-state file and tests", "Optimization semantics")

@torch.no_grad()
def adamw_step(model, m_bufs, v_bufs, t, lr, beta1, beta2, eps, wd, clip, decay_sd_skew=False):
    """One AdamW update written out (doc/formats.md "Optimization semantics"), t = step+1. Returns the pre-clip grad norm.
    The norm is accumulated in float64; clip <= 0 disables clipping. Decay: the 2-D slots, and
    the packed S-D skew only with decay_sd_skew (never theta, biases or LayerNorms)."""
    slots = model.slots()
    decayed = DECAY_SLOTS | ({SDSKEW_SLOT} if decay_sd_skew else set())
    params = [(p, i in decayed) for i, slot in enumerate(slots) for p in slot]
    norm = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p, _ in params))
    scale = clip / norm if (clip > 0 and norm > clip) else 1.0
    bc1 = 1.0 - beta1 ** t
    bc2 = 1.0 - beta2 ** t
    for (p, decay), m, v in zip(params, m_bufs, v_bufs):
        g = p.grad * scale
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        update = (m / bc1) / ((v / bc2).sqrt() + eps)
        if decay:
            update = update + wd * p
        p.sub_(lr * update)
    return norm


def debug_state(model, x, y, path, steps, lr, beta1, beta2, eps, wd, clip, decay_sd_skew=False):
    """Forward+backward on (x, y), then `steps`-1 AdamW updates on the same batch; writes the
    debug-state file (tmp + rename) and returns the losses. losses[i] is the loss after i updates,
    so losses[0] is the loss whose logits and gradients the file holds."""
    if steps < 1:
        raise ValueError(f"--steps must be >= 1, got {steps}")
    cfg = model.config
    B, T = x.shape
    params = [p for slot in model.slots() for p in slot]
    m_bufs = [torch.zeros_like(p) for p in params]
    v_bufs = [torch.zeros_like(p) for p in params]
    losses = []
    first = None
    for step in range(steps):
        model.zero_grad(set_to_none=True)
        logits, loss = model(x, y)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            # wte's gradient is (Vp, C) with zero padded rows: they never reach the logits.
            first = (logits.detach().clone(), loss.item(),
                     [p.grad.detach().clone() for p in params])
        if step + 1 < steps:
            adamw_step(model, m_bufs, v_bufs, step + 1, lr, beta1, beta2, eps, wd, clip,
                       decay_sd_skew)
    logits, loss0, grads = first
    header = np.zeros(256, dtype="<i4")
    header[:4] = (STATE_MAGIC, DEBUG_STATE_VERSION, B, T)
    header[4] = int(decay_sd_skew)   # ours: the trajectory decays the packed S-D skew
    chunks = [header.tobytes(),
              x.numpy().astype("<i4").tobytes(), y.numpy().astype("<i4").tobytes(),
              logits.numpy().astype("<f4", copy=False).tobytes(),
              np.array([loss0], dtype="<f4").tobytes()]
    chunks += [g.numpy().astype("<f4", copy=False).tobytes() for g in grads]
    # Our trailer; llm.c's readers stop after the gradients (doc/formats.md "Debug-state file and tests").
    chunks.append(np.array([steps], dtype="<i4").tobytes())
    chunks.append(np.array([lr, beta1, beta2, eps, wd, clip], dtype="<f4").tobytes())
    chunks.append(np.array(losses, dtype="<f4").tobytes())
    write_atomic(path, chunks)
    model.zero_grad(set_to_none=True)
    return losses


def debug_state_size(cfg, B, T, steps):
    """Expected byte size of a debug-state file."""
    return (1024 + 4 * 2 * B * T + 4 * B * T * cfg.vocab_size + 4 + 4 * cfg.num_params()
            + 4 + 6 * 4 + 4 * steps)


# ---------------------------------------------------------------------------------------------
# Command line

def build_model(model_arg, prism=None, layers=None, seed=42, flags=0,
                sd_init_s=0.0, sd_init_theta=0.1, sd_init_u=0.02, emb_scale=1.0):
    """A checkpoint path (existing file or *.bin) is loaded; anything else is a descriptor,
    optionally with a layer table replacing the uniform one (the file `layers`, as the trainers'
    -layers; or `prism`, the same held to Prism's rule, as -prism), model flags (header[9] bits)
    and the input scale emb_scale (header[10]), initialized with `seed`."""
    if prism and layers:
        raise ValueError("--layers and --prism both give a layer table: give one")
    if os.path.isfile(model_arg) or model_arg.endswith(".bin"):
        if prism or layers or flags or emb_scale != 1.0:
            raise ValueError("--layers, --prism and the model options apply to descriptors; a "
                             "checkpoint carries its own layer table, flags and emb_scale")
        return load_model(model_arg)
    cfg = parse_descriptor(model_arg)
    table = layers or prism
    layers = parse_schedule(table, cfg.n_embd, cfg.n_layer, unchecked=not prism) if table else None
    cfg = GPTConfig(n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_head=cfg.n_head,
                    block_size=cfg.block_size, vocab_size=cfg.vocab_size, layers=layers,
                    flags=flags, emb_scale=emb_scale, sd_init_s=sd_init_s,
                    sd_init_theta=sd_init_theta, sd_init_u=sd_init_u)
    return GPT(cfg, seed=seed)


@torch.no_grad()
def scale_qk(model, factor):
    """Multiply the query and key rows of every standard layer's qkv weight (mha, lin) by factor,
    so scores scale by factor^2. For test models only (--qk_scale): at the N(0, 0.02) init the
    scores are ~0.03, every layer's attention is nearly the same causal average, and a GPU model
    that reads another layer's saved probabilities or logsumexp passes every check. S-D layers have
    --sd_init_u for the same purpose. Applied after init, so the written model carries it."""
    for b in model.blocks:
        if not b.attn.sd:
            width = b.attn.n_head * b.attn.head_size
            b.attn.qkv_w[:2 * width].mul_(np.float32(factor))


def _args(argv):
    p = argparse.ArgumentParser(description="PyTorch reference for the C/CUDA GPT-2 trainer.")
    p.add_argument("--model", required=True,
                   help="descriptor (dN, gpt2:dN, gpt3:cC, tiny, L<l>C<c>H<h>[T<t>][V<v>]; V256: bytes) or .bin")
    p.add_argument("--layers", default=None, help="layer-table file replacing the uniform heads")
    p.add_argument("--prism", default=None,
                   help="a layer table held to Prism's rule (head counts non-decreasing)")
    p.add_argument("--seed", type=int, default=42, help="init seed (descriptors only)")
    p.add_argument("--ln", type=int, choices=(0, 1), default=1,
                   help="0: no per-block LayerNorm (descriptors only)")
    p.add_argument("--sd_scalar_d", type=int, choices=(0, 1), default=0,
                   help="1: one S-D filtering value per head")
    p.add_argument("--sd_sign", type=int, choices=(-1, 1), default=-1,
                   help="S-D logits u (S + sign D) u^T")
    p.add_argument("--sd_init_s", type=float, default=0.0, help="S-D init: std of packed S (the authors' code: 0.1)")
    p.add_argument("--sd_init_theta", type=float, default=0.1, help="S-D init: theta")
    p.add_argument("--sd_init_u", type=float, default=0.02, help="S-D init: std of U")
    p.add_argument("--lin_prescale", type=int, choices=(0, 1), default=0,
                   help="1: linear layers scale q, k by d^-1/4")
    p.add_argument("--emb_scale", type=float, default=1.0,
                   help="the blocks' input is F (wte[x] + wpe[t]); 35.36 gives unit RMS at init "
                        "(descriptors only)")
    p.add_argument("--qk_scale", type=float, default=1.0,
                   help="test models: multiply the Q and K rows of mha/lin layers' qkv weights after init")
    p.add_argument("--sd_decay_s", type=int, choices=(0, 1), default=0,
                   help="1: AdamW decays the packed S-D skew (debug-state trajectory)")
    p.add_argument("--write_model", default=None, help="write the model here (before any step)")
    p.add_argument("--write_dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--debug_state", default=None, help="write the debug-state file here")
    p.add_argument("--data", default=None, help="token shard for --debug_state")
    p.add_argument("--B", type=int, default=4)
    p.add_argument("--T", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--eval_loss", default=None, help="shard for a val loss")
    p.add_argument("--batches", type=int, default=20, help="windows for --eval_loss")
    return p.parse_args(argv)


def main(argv=None):
    args = _args(argv)
    try:
        if args.B < 1 or args.T < 1:
            raise ValueError(f"--B and --T must be >= 1 (got {args.B}, {args.T})")
        flags = ((FLAG_NO_LN if args.ln == 0 else 0) |
                 (FLAG_SD_SCALAR_D if args.sd_scalar_d else 0) |
                 (FLAG_SD_PLUS_D if args.sd_sign > 0 else 0) |
                 (FLAG_LIN_PRESCALE if args.lin_prescale else 0))
        if not checkpoint.emb_scale_ok(args.emb_scale):
            raise ValueError(f"--emb_scale {args.emb_scale}: expected a finite number in "
                             f"(0, {checkpoint.EMB_SCALE_MAX:g}]")
        model = build_model(args.model, args.prism, args.layers, args.seed, flags,
                            args.sd_init_s, args.sd_init_theta, args.sd_init_u, args.emb_scale)
        if not (math.isfinite(args.qk_scale) and args.qk_scale > 0):
            raise ValueError(f"--qk_scale {args.qk_scale}: expected a finite number > 0")
        if args.qk_scale != 1.0:
            if os.path.isfile(args.model) or args.model.endswith(".bin"):
                raise ValueError("--qk_scale applies to a new model (a descriptor), not to a checkpoint")
            scale_qk(model, args.qk_scale)
        cfg = model.config
        print(f"model: {cfg.describe()}")
        if args.T > cfg.block_size and (args.debug_state or args.eval_loss):
            raise ValueError(f"--T {args.T} exceeds the model's maxT {cfg.block_size}")
        if args.write_model:
            write_model(model, args.write_model, args.write_dtype)
            print(f"wrote {args.write_model} ({args.write_dtype})")
        if args.eval_loss:
            # Before --debug_state, whose AdamW steps change the weights.
            if args.batches < 1:
                raise ValueError(f"--batches must be >= 1, got {args.batches}")
            print(f"val loss {eval_loss(model, args.eval_loss, args.B, args.T, args.batches):.6f}")
        if args.debug_state:
            n = args.B * args.T + 1
            if args.data:
                toks = read_shard(args.data)
                if len(toks) < n:
                    raise ValueError(f"{args.data}: {len(toks)} tokens, B*T+1={n} needed")
                toks = torch.from_numpy(toks[:n].astype(np.int64))
                if int(toks.max()) >= cfg.vocab_size:
                    raise ValueError(f"{args.data}: token {int(toks.max())} >= V={cfg.vocab_size}")
            else:
                g = torch.Generator()
                g.manual_seed(1337)
                toks = torch.randint(0, cfg.vocab_size, (n,), generator=g)
            x, y = toks[:-1].view(args.B, args.T), toks[1:].view(args.B, args.T)
            losses = debug_state(model, x, y, args.debug_state, args.steps, args.lr, args.beta1,
                                 args.beta2, args.eps, args.wd, args.clip, bool(args.sd_decay_s))
            for i, l in enumerate(losses):
                print(f"step {i}: loss {l:.6f}")
            print(f"wrote {args.debug_state}")
    except (ValueError, NotImplementedError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
