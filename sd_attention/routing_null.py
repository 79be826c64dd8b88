"""sd_attention/routing_null.py: null models of the routing rank an Adam-trained S-D head reports
(doc/methods.md "Effective rank", "Adam's nulls"; doc/sd_tools.md).

    python sd_attention/routing_null.py --d 32 --steps 600 --lr 1e-3 --warmup 20 --final-frac 0.1
        [--draws 8] [--noise 0,1,3,10] [--grad-batches 20] [--grad-scale 1] [--clip-jitter 0]
        [--init-s 0] [--weight-decay 0] [--seed 1] [--json out.json]

    from sd_attention import routing_null; routing_null.nulls(d, steps, lr, warmup, final_frac, noise_ratios, draws, seed)

What is simulated: one head's packed skew parameters s (d(d-1)/2 values, the strict upper triangle
of S, llmc/param_layout.h) trained by exactly the trainer's AdamW (llmc/cpu/gpt2_cpu.h
gpt2_update, llmc/optimizer.h adamw_gpt2), in fp32 like the trainer:

    m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  s <- s - lr_t (m / bc1 / (sqrt(v / bc2) + eps) + wd s)

with b1 = 0.9, b2 = 0.95, eps = 1e-8, bc_i = 1 - b_i^t (t = 1, 2, ...), wd = 0 (the trainer decays S
only with -sd_decay_s 1: --weight-decay), the schedule lr_t of llmc/schedulers.h (-k cosine: linear
warmup lr (t+1)/u for t < u, then cosine from lr to final_frac * lr over the remaining steps) and
S starting at the trainer's init (-sd_init_s, default 0: --init-s is the std of the packed values).

The gradient of step t is g_t = c_t * grad_scale * (A + r * Z_t), as packed values of skew matrices:

- A, the signal: k rotation planes (k = 1, 2) of equal weight in a random orientation (the first
  2k columns of a random orthogonal matrix), ||A||_F = 1 (the d x d matrix); the same every step.
  k = 0 is pure noise: A = 0 and g_t = Z_t.
- Z_t, the noise: an isotropic skew Gaussian (i.i.d. normal packed values, invariant under
  S -> Q S Q^T), scaled to E ||Z_t||_F^2 = 1, fresh every step.
- r, the noise/signal ratio: the ratio of the per-step norms ||r Z_t||_F / ||A||_F. r = 0 is a
  constant gradient; r = 10 a signal that is 1 % of each step's gradient energy.
- grad_scale: the absolute norm of a step's signal. Adam is invariant to it except through eps
  (per coordinate, eps against sqrt(v) ~ |g_i| ~ grad_scale / d): at grad_scale ~ eps * d or
  below, Adam no longer normalizes and moves S like SGD. Default 1 (eps negligible).
- c_t, the global-norm clip factor min(1, 1 / ||grad of all parameters||) of the trainer. A
  constant c leaves Adam's step unchanged up to eps (m and sqrt(v) both scale by c; tested), so
  c = 1 models any run whose clip factor is constant; --clip-jitter J draws c_t = exp(-J u_t),
  u_t uniform on [0, 1], to model a global norm that fluctuates by up to e^J.

Reported per (k, r), over `draws` draws of A and the noise (mean and sd):
- s_erank, s_n90: Roy-Vetterli erank and the planes at 90 % energy of the final S (doc/methods.md
  "Effective rank", as spectrum.h's spec_rank_stats): what ./sd_spectrum reports after training;
- g_erank, g_n90: the same of the mean gradient A + r mean(Z_1..Z_N) over N = grad_batches fresh
  noise draws: what ./sd_spectrum -grad_batches N reports at the end;
- s_cos: cos(S, -A), how well S points along the signal.
The reference value `sign_erank_k1` is the erank of sign(A) for one plane: the limit of Adam under
a constant one-plane gradient (m / sqrt(v) = sign(g) per coordinate), 12.904 at d = 32 and 20.524
at d = 64, with n90 = 2, whatever the plane's orientation.

Errors: one line `error: <flag>: <what was expected>` and exit 1.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats.atomic import write_atomic

BETA1, BETA2, EPS = 0.9, 0.95, 1e-8        # llmc/optimizer.h ADAMW_GPT2_*
SV_REL_TOL = 1e-6                           # doc/methods.md "Effective rank" (spectrum.h SPEC_SV_REL_TOL)
ENERGY_FRACTION = 0.9
DEFAULT_NOISE = (0.0, 1.0, 3.0, 10.0)


class InputError(ValueError):
    """A bad argument; the message starts with the flag."""


# ---------------------------------------------------------------------------------------------
# The trainer's pieces

def lr_at(t, lr, warmup, steps, final_frac):
    """llmc/schedulers.h lr_at for -k cosine, in fp32 as the trainer computes it."""
    f = np.float32
    eta, eta_min = f(lr), f(final_frac) * f(lr)
    if t < warmup:
        return eta * f(t + 1) / f(warmup)
    r = f(t - warmup) / f(steps - warmup) if steps > warmup else f(1.0)
    return eta_min + f(0.5) * (f(1.0) + f(math.cos(f(math.pi) * r))) * (eta - eta_min)


def adamw(grads, steps, lr, warmup, final_frac, init=None, weight_decay=0.0, scale=None):
    """Run the trainer's AdamW (gpt2_update) on packed parameters of shape (draws, n), fp32.
    grads(t) -> the (draws, n) gradient of step t (0-based); scale: per-step factors c_t or None.
    Returns the final parameters."""
    f = np.float32
    g0 = grads(0)
    p = np.zeros_like(g0, dtype=f) if init is None else init.astype(f).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2, eps, wd = f(BETA1), f(BETA2), f(EPS), f(weight_decay)
    for t in range(steps):
        g = (g0 if t == 0 else grads(t)).astype(f)
        if scale is not None:
            g = g * f(scale[t])
        n = t + 1
        bc1 = f(1.0) - b1 ** f(n)
        bc2 = f(1.0) - b2 ** f(n)
        m = b1 * m + (f(1.0) - b1) * g
        v = b2 * v + (f(1.0) - b2) * g * g
        step = (m / bc1) / (np.sqrt(v / bc2) + eps)
        p = p - lr_at(t, lr, warmup, steps, final_frac) * (step + wd * p)
    return p


# ---------------------------------------------------------------------------------------------
# Skew matrices and their ranks

def unpack(packed, d):
    """(..., d(d-1)/2) packed values -> (..., d, d) skew matrices, S_ij = s, S_ji = -s for i < j."""
    iu, ju = np.triu_indices(d, 1)
    S = np.zeros(packed.shape[:-1] + (d, d))
    S[..., iu, ju] = packed
    S[..., ju, iu] = -packed
    return S


def pack(S):
    d = S.shape[-1]
    iu, ju = np.triu_indices(d, 1)
    return S[..., iu, ju]


def rank_stats(S):
    """(erank, n90) of a skew matrix, as spectrum.h spec_rank_stats (0, 0 for a zero matrix)."""
    sv = np.linalg.svd(np.asarray(S, dtype=np.float64), compute_uv=False)
    if not sv[0] > 0:
        return 0.0, 0
    sv = sv[sv > SV_REL_TOL * sv[0]]
    p = sv / sv.sum()
    e2 = np.cumsum(sv ** 2)
    j90 = int(np.argmax(e2 >= ENERGY_FRACTION * e2[-1] * (1.0 - 1e-12))) + 1
    return float(np.exp(-(p * np.log(p)).sum())), (j90 + 1) // 2


def planes(d, k, rng):
    """A unit-Frobenius skew matrix of k equal rotation planes in a random orientation."""
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A = np.zeros((d, d))
    for i in range(k):
        a, b = Q[:, 2 * i], Q[:, 2 * i + 1]
        A += np.outer(a, b) - np.outer(b, a)
    return A / math.sqrt(2.0 * k)


def noise(shape, d, rng):
    """Packed isotropic skew Gaussian noise with E ||Z||_F^2 = 1 (||Z||_F^2 = 2 sum of packed^2)."""
    n = d * (d - 1) // 2
    return rng.standard_normal(shape + (n,)) / math.sqrt(2.0 * n)


def sign_erank(d):
    """erank and n90 of sign(A) for one plane A (orientation-independent): Adam's constant-gradient limit."""
    A = planes(d, 1, np.random.default_rng(0))
    return rank_stats(np.sign(A))


# ---------------------------------------------------------------------------------------------
# The nulls

def simulate(d, k, ratio, steps, lr, warmup, final_frac, draws, rng, grad_batches=20, grad_scale=1.0,
             clip_jitter=0.0, init_s=0.0, weight_decay=0.0):
    """One (k, ratio) cell: per draw (erank, n90) of the final S and of the mean gradient, cos(S, -A)."""
    A = np.stack([planes(d, k, rng) if k > 0 else np.zeros((d, d)) for _ in range(draws)])
    a = pack(A)
    r = 1.0 if k == 0 else ratio
    Zs = noise((steps, draws), d, rng) if r > 0 else None

    def grads(t):
        return grad_scale * (a + r * Zs[t]) if Zs is not None else grad_scale * a

    scale = np.exp(-clip_jitter * rng.random(steps)) if clip_jitter > 0 else None
    init = init_s * rng.standard_normal(a.shape) if init_s > 0 else None
    s = adamw(grads, steps, lr, warmup, final_frac, init=init, weight_decay=weight_decay, scale=scale)
    G = a + (r * noise((grad_batches, draws), d, rng).mean(axis=0) if r > 0 else 0.0)
    S, Gm = unpack(s.astype(np.float64), d), unpack(G, d)
    out = []
    for i in range(draws):
        se, sn = rank_stats(S[i])
        ge, gn = rank_stats(Gm[i])
        ns, na = np.linalg.norm(S[i]), np.linalg.norm(A[i])
        cos = float(-(S[i] * A[i]).sum() / (ns * na)) if ns > 0 and na > 0 else float("nan")
        out.append((se, sn, ge, gn, cos))
    return out


def _ms(x):
    x = np.asarray(x, dtype=np.float64)
    if np.all(np.isnan(x)):
        return None, None
    return float(np.nanmean(x)), float(np.nanstd(x))


def nulls(d, steps, lr, warmup, final_frac, noise_ratios=DEFAULT_NOISE, draws=8, seed=1, grad_batches=20,
          grad_scale=1.0, clip_jitter=0.0, init_s=0.0, weight_decay=0.0):
    """The null table: a dict with the settings, `sign_erank_k1`, `sign_n90_k1` and `rows`, one per
    (k, noise_ratio) for k = 1, 2 and each ratio, then k = 0 (pure noise, noise_ratio null); each row
    has s_erank, s_erank_sd, s_n90, s_n90_sd, g_erank, g_erank_sd, g_n90, g_n90_sd, s_cos, s_cos_sd
    (mean and population sd over the draws; s_cos null for k = 0)."""
    check_args(d, steps, lr, warmup, final_frac, noise_ratios, draws, grad_batches, grad_scale, clip_jitter)
    rng = np.random.default_rng(seed)
    cells = [(k, float(r)) for k in (1, 2) for r in noise_ratios] + [(0, None)]
    rows = []
    for k, r in cells:
        res = simulate(d, k, r or 0.0, steps, lr, warmup, final_frac, draws, rng, grad_batches, grad_scale,
                       clip_jitter, init_s, weight_decay)
        cols = list(zip(*res))
        row = {"k": k, "noise_ratio": r}
        for name, col in zip(("s_erank", "s_n90", "g_erank", "g_n90", "s_cos"), cols):
            row[name], row[name + "_sd"] = _ms(col)
        rows.append(row)
    se, sn = sign_erank(d)
    return {"d": d, "capacity": d, "steps": steps, "lr": lr, "warmup": warmup, "final_frac": final_frac,
            "noise_ratios": [float(r) for r in noise_ratios], "draws": draws, "seed": seed,
            "grad_batches": grad_batches, "grad_scale": grad_scale, "clip_jitter": clip_jitter,
            "init_s": init_s, "weight_decay": weight_decay, "beta1": BETA1, "beta2": BETA2, "eps": EPS,
            "sign_erank_k1": se, "sign_n90_k1": sn, "rows": rows}


def check_args(d, steps, lr, warmup, final_frac, noise_ratios, draws, grad_batches, grad_scale, clip_jitter):
    if not (isinstance(d, int) and d >= 4):
        raise InputError(f"--d: {d}: expected an integer >= 4 (two rotation planes)")
    if not (isinstance(steps, int) and steps >= 1):
        raise InputError(f"--steps: {steps}: expected an integer >= 1")
    if not (lr > 0 and math.isfinite(lr)):
        raise InputError(f"--lr: {lr}: expected a finite number > 0")
    if not (isinstance(warmup, int) and 0 <= warmup <= steps):
        raise InputError(f"--warmup: {warmup}: expected an integer in [0, --steps]")
    if not 0.0 <= final_frac <= 1.0:
        raise InputError(f"--final-frac: {final_frac}: expected a number in [0, 1]")
    if not noise_ratios or any(not (r >= 0 and math.isfinite(r)) for r in noise_ratios):
        raise InputError(f"--noise: {noise_ratios}: expected a list of finite numbers >= 0")
    if not (isinstance(draws, int) and draws >= 1):
        raise InputError(f"--draws: {draws}: expected an integer >= 1")
    if not (isinstance(grad_batches, int) and grad_batches >= 1):
        raise InputError(f"--grad-batches: {grad_batches}: expected an integer >= 1")
    if not (grad_scale > 0 and math.isfinite(grad_scale)):
        raise InputError(f"--grad-scale: {grad_scale}: expected a finite number > 0")
    if not (clip_jitter >= 0 and math.isfinite(clip_jitter)):
        raise InputError(f"--clip-jitter: {clip_jitter}: expected a finite number >= 0")


def fmt(m, sd, prec):
    return "n/a" if m is None else f"{m:.{prec}f} ± {sd:.{prec}f}"


def table(res):
    lines = [f"d {res['d']}, {res['steps']} steps, lr {res['lr']:g}, warmup {res['warmup']}, final {res['final_frac']:g}, "
             f"{res['draws']} draws; erank(sign(one plane)) = {res['sign_erank_k1']:.3f} (n90 {res['sign_n90_k1']})",
             f"{'k':>2} {'noise':>6} {'erank(S)':>16} {'n90(S)':>12} {'erank(mean grad)':>17} {'n90(grad)':>12} {'cos(S,-A)':>14}"]
    for r in res["rows"]:
        lines.append(f"{r['k']:>2} {'-' if r['noise_ratio'] is None else format(r['noise_ratio'], 'g'):>6} "
                     f"{fmt(r['s_erank'], r['s_erank_sd'], 2):>16} {fmt(r['s_n90'], r['s_n90_sd'], 1):>12} "
                     f"{fmt(r['g_erank'], r['g_erank_sd'], 2):>17} {fmt(r['g_n90'], r['g_n90_sd'], 1):>12} "
                     f"{fmt(r['s_cos'], r['s_cos_sd'], 3):>14}")
    return "\n".join(lines) + "\n"


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def main(argv=None):
    p = Parser(allow_abbrev=False, description="nulls of the routing rank of an Adam-trained S-D head "
               "(doc/methods.md 'Effective rank'; doc/sd_tools.md)")
    p.add_argument("--d", type=int, default=32, help="head size d (default 32)")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate, -l (default 1e-3)")
    p.add_argument("--warmup", type=int, default=20, help="warmup steps, -u (default 20)")
    p.add_argument("--final-frac", type=float, default=0.1, help="final lr fraction, -q (default 0.1)")
    p.add_argument("--draws", type=int, default=8, help="random draws per cell (default 8)")
    p.add_argument("--noise", default="0,1,3,10", help="noise/signal ratios, comma-separated (default 0,1,3,10)")
    p.add_argument("--grad-batches", type=int, default=20, help="batches of the mean gradient (default 20)")
    p.add_argument("--grad-scale", type=float, default=1.0, help="norm of a step's signal (default 1)")
    p.add_argument("--clip-jitter", type=float, default=0.0, help="J: clip factors exp(-J u), u ~ U(0,1) (default 0)")
    p.add_argument("--init-s", type=float, default=0.0, help="std of the initial packed S, -sd_init_s (default 0)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="decay of S (-c with -sd_decay_s 1; default 0)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--json", default=None, help="also write the result here (JSON)")
    try:
        a = p.parse_args(argv)
        try:
            ratios = [float(x) for x in a.noise.split(",")]
        except ValueError:
            raise InputError(f"--noise: {a.noise}: expected comma-separated numbers >= 0") from None
        if a.json is not None and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
            raise InputError(f"--json: {a.json}: expected a file in an existing directory")
        res = nulls(a.d, a.steps, a.lr, a.warmup, a.final_frac, ratios, a.draws, a.seed, a.grad_batches,
                    a.grad_scale, a.clip_jitter, a.init_s, a.weight_decay)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(table(res))
    if a.json:
        write_atomic(a.json, json.dumps(res, indent=1) + "\n")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
