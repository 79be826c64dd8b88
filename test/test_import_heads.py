"""test/test_import_heads.py: sd_attention/import_heads.py and sd_attention/pool_spectra.py on tiny
randomly initialised Hugging Face models.

transformers builds a BertModel and a GPTNeoXModel (2 layers, hidden 64, 4 heads of 16,
intermediate 256, vocab 100, 32 positions, init std 0.15 so that logits are O(1); torch seed 0;
in layer 0, head 1 gets W_K = -W_Q + small noise, a stable head next to unstable random ones).
Each is saved with save_pretrained as model.safetensors and as pytorch_model.bin, and the
"ForMaskedLM" / "ForCausalLM" classes with the same weights are saved too (keys with `bert.` /
`gpt_neox.`, plus their LM heads, which the importer skips). Checks:

- the per-head slices of the HF tensors used below as W_Q, W_K (BERT: rows [h*d, (h+1)*d) of
  query/key; GPT-NeoX: rows [3hd, 3hd+d) and [3hd+d, 3hd+2d) of the fused query_key_value) give
  HF's own attention logits (from output_attentions, layer 0, GPT-NeoX at position 0 so that the
  rotary rotation is the identity) to 1e-4; the GPT-2-style slice of the fused weight (Q block
  first) does not (negative control); at positions 0..T-1 GPT-NeoX's logits equal
  x_m W_Q P(n-m) W_K^T x_n (rotary on the first rotary_pct * d dims, pairs (i, i + r/2)) and
  differ from the offset-0 kernel;
- every slot of the written checkpoint equals the HF tensor doc/sd_tools.md maps to it
  (bit-exact); every input variant gives a byte-identical file;
- ./sd_spectrum -json on it: every head's erank (of R), rho_F, alpha/rho and unstable flag equal
  numpy on M = W_Q W_K^T of the raw HF slices (numpy SVD/eig, test_spectrum_numpy.py's
  definitions), relative tolerance 1e-6 (alpha/rho absolute 1e-6: it is relative to rho already);
  negative control: the GPT-NeoX file with the fused weight copied without de-interleaving
  disagrees on most heads;
- one-line errors: missing config.json, unsupported model_type, missing tensor, wrong shape,
  unknown key, intermediate_size != 4C, missing output directory;
- pool_spectra.py on two hand-written JSON files against numbers computed by hand (per model and
  the head-weighted "all" row), on the two real spectra, and its one-line errors.
"""
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from harness import check, finish  # noqa: E402
from test_spectrum_numpy import abscissa, close, rank_metrics, split  # noqa: E402  (numpy reference)

IMPORT = os.path.join(ROOT, "sd_attention", "import_heads.py")
POOL = os.path.join(ROOT, "sd_attention", "pool_spectra.py")
SPECTRUM = os.path.join(ROOT, "sd_spectrum")
L, C, H, V, MAXT = 2, 64, 4, 100, 32
D, VP = C // H, 128
RTOL = 1e-6
UNSTABLE_EPS = 1e-6   # sd_spectrum's default -eps

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
try:
    import transformers
except ModuleNotFoundError:
    check(False, f"transformers is not installed for {sys.executable}: pip install transformers "
                 f"(make deps installs it)")
    finish()


def run(script, *args):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


# ---------------------------------------------------------------------------------------------
# The models

def build(family):
    torch.manual_seed(0)
    common = dict(vocab_size=V, hidden_size=C, num_hidden_layers=L, num_attention_heads=H,
                  intermediate_size=4 * C, max_position_embeddings=MAXT, initializer_range=0.15,
                  attn_implementation="eager")
    if family == "bert":
        cfg = transformers.BertConfig(**common)
        model = transformers.BertModel(cfg).eval()
    else:
        cfg = transformers.GPTNeoXConfig(**common)
        model = transformers.GPTNeoXModel(cfg).eval()
    with torch.no_grad():   # biases O(0.1) (HF initialises them to 0) so that the logit check sees them
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.1)
        wq, wk = qk_rows(family, model.state_dict(), 0, 1)
        wk.copy_(-wq + 0.1 * wq.std() * torch.randn(wq.shape))   # a stable head: M ~ -W_Q W_Q^T
    return model


def qk_rows(family, sd, l, h, wrong=False, bias=False):
    """Head h's query and key rows (d, C) of layer l, sliced from the HF tensors (views)."""
    suffix = "bias" if bias else "weight"
    if family == "bert":
        q = sd[f"encoder.layer.{l}.attention.self.query.{suffix}"]
        k = sd[f"encoder.layer.{l}.attention.self.key.{suffix}"]
        return q[h * D:(h + 1) * D], k[h * D:(h + 1) * D]
    w = sd[f"layers.{l}.attention.query_key_value.{suffix}"]
    if wrong:   # GPT-2's layout: all queries, then all keys
        return w[h * D:(h + 1) * D], w[C + h * D:C + (h + 1) * D]
    return w[3 * h * D:3 * h * D + D], w[3 * h * D + D:3 * h * D + 2 * D]


def numpy_sd(model):
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def save_variants(family, model, base):
    """Saves model as safetensors, pytorch_model.bin and the LM-head class; returns the dirs."""
    dirs = {}
    for form, safe in (("safetensors", True), ("bin", False)):
        dirs[form] = os.path.join(base, f"{family}_{form}")
        model.save_pretrained(dirs[form], safe_serialization=safe)
    lm_cls = transformers.BertForMaskedLM if family == "bert" else transformers.GPTNeoXForCausalLM
    lm = lm_cls(model.config)
    inner = lm.bert if family == "bert" else lm.gpt_neox
    missing, unexpected = inner.load_state_dict(model.state_dict(), strict=False)
    left = missing + unexpected   # BertForMaskedLM has no pooler
    check(all(k.startswith("pooler.") for k in left),
          f"{family}: the LM-head model holds the same weights (not copied: {left})")
    dirs["lm"] = os.path.join(base, f"{family}_lm")
    lm.save_pretrained(dirs["lm"])
    return dirs


# ---------------------------------------------------------------------------------------------
# 1. the slices against HF's own attention logits

def rotate(x, pos, r, base=10000.0):
    """GPT-NeoX's rotary on the first r dims of x (T, d): pairs (i, i + r/2), angle pos * base^(-2i/r)."""
    half = r // 2
    ang = pos[:, None] * base ** (-np.arange(half) * 2.0 / r)[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    out = x.copy()
    a, b = x[:, :half], x[:, half:r]
    out[:, :half], out[:, half:r] = a * cos - b * sin, b * cos + a * sin
    return out


def check_logits(family, model):
    T = 8
    ids = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(1))
    sd = {k: v.double().numpy() for k, v in model.state_dict().items()}
    with torch.no_grad():
        if family == "bert":
            att = model(ids, output_attentions=True).attentions[0][0].double().numpy()
            x = model.embeddings(ids)[0].double().numpy()
        else:
            att = model(ids, position_ids=torch.zeros(1, T, dtype=torch.long),
                        output_attentions=True).attentions[0][0].double().numpy()
            rot = model(ids, output_attentions=True).attentions[0][0].double().numpy()
            x = model.layers[0].input_layernorm(model.embed_in(ids))[0].double().numpy()
    rows = range(T) if family == "bert" else [T - 1]   # GPT-NeoX is causal: the last row sees all

    def logits(h, wrong=False):
        (wq, wk), (bq, bk) = qk_rows(family, sd, 0, h, wrong=wrong), qk_rows(family, sd, 0, h, wrong=wrong, bias=True)
        return (x @ wq.T + bq) @ (x @ wk.T + bk).T / np.sqrt(D), x @ wq.T + bq, x @ wk.T + bk

    def gap(probs, s):   # log p_ij / p_i0 against s_ij - s_i0 over the visible j
        return max(np.abs(np.log(probs[i, :i + 1 if family != "bert" else T] / probs[i, 0])
                          - (s[i, :i + 1 if family != "bert" else T] - s[i, 0])).max() for i in rows)

    err = max(gap(att[h], logits(h)[0]) for h in range(H))
    scale = max(np.abs(logits(h)[0]).max() for h in range(H))
    check(err < 1e-4, f"{family}: the per-head W_Q, W_K slices (+ biases) give HF's attention logits "
                      f"(max error {err:.1e}, logits up to {scale:.2f})")
    if family == "bert":
        return
    bad = min(gap(att[h], logits(h, wrong=True)[0]) for h in range(H))
    check(bad > 1e-2, f"gpt_neox: negative control: the GPT-2-style slice of the fused weight misses "
                      f"HF's logits (error >= {bad:.2f})")
    r = int(D * model.config.rotary_pct)
    pos = np.arange(T, dtype=np.float64)
    err_rot = max(gap(rot[h], rotate(logits(h)[1], pos, r) @ rotate(logits(h)[2], pos, r).T / np.sqrt(D))
                  for h in range(H))
    off0 = min(gap(rot[h], logits(h)[0]) for h in range(H))
    check(err_rot < 1e-4 and off0 > 1e-3,
          f"gpt_neox: at positions 0..{T - 1} HF's logits are the rotary ones on the first {r} of {D} "
          f"dims (error {err_rot:.1e}) and differ from the offset-0 kernel W_Q W_K^T ({off0:.1e})")


# ---------------------------------------------------------------------------------------------
# 2. the written checkpoint, slot by slot

def expected_slots(family, sd):
    pad = lambda w: np.concatenate([w, np.zeros((VP - V, C), np.float32)])
    per = lambda f: np.stack([f(l) for l in range(L)])
    if family == "bert":
        e = lambda l, n: sd[f"encoder.layer.{l}.{n}"]
        lnin = lambda l, n: sd[f"embeddings.LayerNorm.{n}"] if l == 0 else e(l - 1, f"output.LayerNorm.{n}")
        qkv = lambda l, n: np.concatenate([e(l, f"attention.self.{p}.{n}") for p in ("query", "key", "value")])
        return [pad(sd["embeddings.word_embeddings.weight"]),
                sd["embeddings.position_embeddings.weight"] + sd["embeddings.token_type_embeddings.weight"][0],
                per(lambda l: lnin(l, "weight")), per(lambda l: lnin(l, "bias")),
                per(lambda l: qkv(l, "weight")), per(lambda l: qkv(l, "bias")),
                per(lambda l: e(l, "attention.output.dense.weight")), per(lambda l: e(l, "attention.output.dense.bias")),
                per(lambda l: e(l, "attention.output.LayerNorm.weight")),
                per(lambda l: e(l, "attention.output.LayerNorm.bias")),
                per(lambda l: e(l, "intermediate.dense.weight")), per(lambda l: e(l, "intermediate.dense.bias")),
                per(lambda l: e(l, "output.dense.weight")), per(lambda l: e(l, "output.dense.bias")),
                e(L - 1, "output.LayerNorm.weight"), e(L - 1, "output.LayerNorm.bias")]
    e = lambda l, n: sd[f"layers.{l}.{n}"]

    def qkv(l, n):   # per head, slice by slice: all heads' q, then k, then v
        w = e(l, f"attention.query_key_value.{n}")
        return np.concatenate([w[3 * h * D + j * D:3 * h * D + (j + 1) * D] for j in range(3) for h in range(H)])
    return [pad(sd["embed_in.weight"]), np.zeros((MAXT, C), np.float32),
            per(lambda l: e(l, "input_layernorm.weight")), per(lambda l: e(l, "input_layernorm.bias")),
            per(lambda l: qkv(l, "weight")), per(lambda l: qkv(l, "bias")),
            per(lambda l: e(l, "attention.dense.weight")), per(lambda l: e(l, "attention.dense.bias")),
            per(lambda l: e(l, "post_attention_layernorm.weight")), per(lambda l: e(l, "post_attention_layernorm.bias")),
            per(lambda l: e(l, "mlp.dense_h_to_4h.weight")), per(lambda l: e(l, "mlp.dense_h_to_4h.bias")),
            per(lambda l: e(l, "mlp.dense_4h_to_h.weight")), per(lambda l: e(l, "mlp.dense_4h_to_h.bias")),
            sd["final_layer_norm.weight"], sd["final_layer_norm.bias"]]


SLOT_NAMES = ("wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
              "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb")


def check_slots(family, ckpt, sd):
    hdr = np.fromfile(ckpt, dtype="<i4", count=256)
    check(list(hdr[:8]) == [20240326, 3, MAXT, V, L, H, C, VP] and not hdr[8:].any(),
          f"{family}: header {list(hdr[:8])} = magic, v3, maxT, V, L, heads, C, Vp; rest 0")
    body = np.fromfile(ckpt, dtype="<f4", offset=1024)
    pos, bad = 0, []
    for name, a in zip(SLOT_NAMES, expected_slots(family, sd)):
        a = np.ascontiguousarray(a, dtype=np.float32).ravel()
        if not np.array_equal(body[pos:pos + a.size], a):
            bad.append(name)
        pos += a.size
    check(not bad and pos == body.size, f"{family}: all 16 slots hold the mapped HF tensors, bit-exact "
                                        f"({pos} floats; wrong: {bad})")
    return 1024 + 4 * (VP * C + MAXT * C + 2 * L * C)   # byte offset of qkvw


# ---------------------------------------------------------------------------------------------
# 3. sd_spectrum against numpy

def numpy_heads(family, sd, wrong=False):
    out = []
    for l in range(L):
        for h in range(H):
            wq, wk = (a.astype(np.float64) for a in qk_rows(family, sd, l, h, wrong=wrong))
            M = wq.T @ wk            # W_Q W_K^T with W_Q = the rows transposed (C x d)
            sp, svR = split(M)
            alpha, rho = abscissa(M)
            out.append(dict(erank=rank_metrics(svR)["erank"], rho_F=sp["rho_F"], alpha_rel=alpha / rho,
                            unstable=bool(alpha > UNSTABLE_EPS * rho)))
    return out


def tool_heads(ckpt, json_path):
    r = subprocess.run([SPECTRUM, ckpt, "-json", json_path], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    data = json.load(open(json_path))
    return [hd for lay in data["layers"] for hd in lay["heads"]], ""


def mismatches(ref, got):
    bad = []
    for i, (a, b) in enumerate(zip(ref, got)):
        for key in ("erank", "rho_F"):
            if b[key] is None or not close(a[key], b[key], 1e-12):
                bad.append(f"head {i} {key}: numpy {a[key]:.9g} vs tool {b[key]}")
        if b["alpha_rel"] is None or abs(a["alpha_rel"] - b["alpha_rel"]) > RTOL:
            bad.append(f"head {i} alpha/rho: numpy {a['alpha_rel']:.9g} vs tool {b['alpha_rel']}")
        if a["unstable"] != b["unstable"]:
            bad.append(f"head {i} unstable: numpy {a['unstable']} vs tool {b['unstable']}")
    return bad


# ---------------------------------------------------------------------------------------------

def expect_error(label, pattern, *args, out=None):
    rc, so, se = run(IMPORT, *args)
    ok = rc == 1 and se.count("\n") == 1 and se.startswith("error: ") and pattern in se
    check(ok and (out is None or not os.path.exists(out)), f"{label}: {se.strip()}")


def import_errors(tmp, dirs):
    out = os.path.join(tmp, "err.bin")
    d = os.path.join(tmp, "no_config")
    os.makedirs(d)
    shutil.copy(os.path.join(dirs["gpt_neox"]["safetensors"], "model.safetensors"), d)
    expect_error("a missing config.json", "config.json: no such file", d, "-o", out, out=out)

    def with_config(name, src, **change):
        d = os.path.join(tmp, name)
        shutil.copytree(src, d)
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg.update(change)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        return d
    expect_error("an unsupported model_type", "model_type 'llama': expected 'bert' or 'gpt_neox'",
                 with_config("llama", dirs["bert"]["safetensors"], model_type="llama"), "-o", out, out=out)
    expect_error("model_type gpt2 points to import_hf.py", "sd_attention/import_hf.py",
                 with_config("gpt2", dirs["bert"]["safetensors"], model_type="gpt2"), "-o", out, out=out)
    expect_error("intermediate_size != 4 C", "intermediate_size 128: expected 4 * hidden_size = 256",
                 with_config("inter", dirs["bert"]["safetensors"], intermediate_size=128), "-o", out, out=out)

    def with_state(name, src, edit):
        d = os.path.join(tmp, name)
        shutil.copytree(src, d)
        p = os.path.join(d, "pytorch_model.bin")
        sd = torch.load(p)
        edit(sd)
        torch.save(sd, p)
        return d
    expect_error("a missing tensor", "key 'layers.1.attention.dense.bias': missing",
                 with_state("missing", dirs["gpt_neox"]["bin"], lambda sd: sd.pop("layers.1.attention.dense.bias")),
                 "-o", out, out=out)
    key = "encoder.layer.0.intermediate.dense.weight"
    expect_error("a wrong shape", f"key '{key}': shape [64, 256], expected [256, 64]",
                 with_state("shape", dirs["bert"]["bin"], lambda sd: sd.update({key: sd[key].t().contiguous()})),
                 "-o", out, out=out)
    expect_error("an unknown key", "key 'layers.2.attention.dense.bias': not a tensor of a 2-layer GPT-NeoX",
                 with_state("extra", dirs["gpt_neox"]["bin"],
                            lambda sd: sd.update({"layers.2.attention.dense.bias": torch.zeros(C)})),
                 "-o", out, out=out)
    expect_error("a missing output directory", "does not exist", dirs["bert"]["safetensors"],
                 "-o", os.path.join(tmp, "nowhere", "x.bin"))


def pool_checks(tmp, spectra):
    def head(rho_F, erank, unstable):
        return {"rho_F": rho_F, "rho_R": 1 - rho_F, "erank": erank, "unstable": unstable}
    a = {"eps": 1e-6, "layers": [{"heads": [head(0.2, 10.0, True)]}, {"heads": [head(0.4, 20.0, False)]}]}
    b = {"eps": 1e-6, "layers": [{"heads": [head(0.5, 3.0, True), head(0.5, 6.0, True), head(0.8, 9.0, True)]}]}
    pa, pb = os.path.join(tmp, "a.json"), os.path.join(tmp, "modelb.json")
    json.dump(a, open(pa, "w"))
    json.dump(b, open(pb, "w"))
    out_csv, out_json = os.path.join(tmp, "pool.csv"), os.path.join(tmp, "pool.json")
    rc, so, se = run(POOL, f"A={pa}", pb, "--csv", out_csv, "--json", out_json)
    # by hand: A 2 heads, rho_F (0.2+0.4)/2 = 0.3, erank 15, 1 of 2 unstable; modelb 3 heads, 0.6,
    # 6, 3 of 3; all 5 heads: rho_F 2.4/5 = 0.48, erank 48/5 = 9.6, 4 of 5 (the mean of the model
    # means would give 0.45, 10.5, 0.75)
    want = [("A", 2, 0.3, 15.0, 0.5, 1), ("modelb", 3, 0.6, 6.0, 1.0, 3), ("all", 5, 0.48, 9.6, 0.8, 4)]
    got = json.load(open(out_json)) if rc == 0 else {"models": [], "all": {}}
    rows = got["models"] + [got["all"]]
    ok = len(rows) == 3 and all(
        r["model"] == w[0] and r["heads"] == w[1] and r["n_unstable"] == w[5]
        and all(abs(r[k] - v) < 1e-12 for k, v in zip(("rho_F_mean", "erank_mean", "frac_unstable"), w[2:5]))
        for r, w in zip(rows, want))
    check(rc == 0 and ok, f"pool_spectra: per model and pooled rows equal the hand computation ({se.strip()})")
    md = ["| A | 2 | 0.3000 | 15.00 | 0.5000 (1) |", "| modelb | 3 | 0.6000 | 6.00 | 1.0000 (3) |",
          "| **all** | 5 | 0.4800 | 9.60 | 0.8000 (4) |"]
    check(all(line in so.splitlines() for line in md), "pool_spectra: the Markdown rows (NAME= and the file stem)")
    crows = list(csv.DictReader(open(out_csv))) if os.path.exists(out_csv) else []
    check(len(crows) == 3 and all((r["model"], int(r["heads"])) == w[:2] and abs(float(r["rho_F_mean"]) - w[2]) < 1e-12
                                  and abs(float(r["erank_mean"]) - w[3]) < 1e-12 for r, w in zip(crows, want)),
          "pool_spectra: the CSV holds the same rows")

    names = list(spectra)
    rc, so, se = run(POOL, *[f"{n}={p}" for n, p in spectra.items()], "--json", out_json)
    got = json.load(open(out_json)) if rc == 0 else {"models": [], "all": {}}
    heads = {n: [hd for lay in json.load(open(p))["layers"] for hd in lay["heads"]] for n, p in spectra.items()}
    every = [hd for n in names for hd in heads[n]]
    ok = rc == 0 and [m["heads"] for m in got["models"]] == [L * H] * 2 and got["all"]["heads"] == 2 * L * H
    ok = ok and all(abs(m["rho_F_mean"] - np.mean([hd["rho_F"] for hd in heads[m["model"]]])) < 1e-12
                    for m in got["models"])
    ok = ok and abs(got["all"]["erank_mean"] - np.mean([hd["erank"] for hd in every])) < 1e-12
    ok = ok and abs(got["all"]["frac_unstable"] - np.mean([hd["unstable"] for hd in every])) < 1e-12
    check(ok, f"pool_spectra on the BERT and GPT-NeoX spectra: {L * H} heads each, means of their heads")

    def pool_error(label, pattern, *args):
        rc, so, se = run(POOL, *args)
        check(rc == 1 and se.count("\n") == 1 and se.startswith("error: ") and pattern in se and so == "",
              f"pool_spectra {label}: {se.strip()}")
    pool_error("a missing file", "nothing.json: no such file", pa, os.path.join(tmp, "nothing.json"))
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write("{not json")
    pool_error("a file that is not JSON", "bad.json: not JSON", bad)
    del b["layers"][0]["heads"][1]["rho_F"]
    json.dump(b, open(bad, "w"))
    pool_error("a head without rho_F", "bad.json: layers[0].heads[1].rho_F", bad)
    json.dump({"model": "x"}, open(bad, "w"))
    pool_error("a JSON file that is not sd_spectrum's", "bad.json: field 'layers'", bad)
    missing_dir = os.path.join(tmp, "nowhere", "p.csv")
    pool_error("a missing output directory (checked before the inputs)", "directory", os.path.join(tmp, "nothing.json"),
               "--csv", missing_dir)
    pool_error("a model name given twice", "given twice", f"A={pa}", f"A={pb}")


def main():
    tmp = os.path.join(ROOT, "build", "tmp_import_heads")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    if not os.access(SPECTRUM, os.X_OK):
        check(False, f"{SPECTRUM} is built (make sd_spectrum)")
        finish()
    check(True, f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}")
    dirs, spectra = {}, {}
    for family in ("bert", "gpt_neox"):
        model = build(family)
        sd = numpy_sd(model)
        check_logits(family, model)
        dirs[family] = save_variants(family, model, tmp)
        outs = {}
        for form, d in dirs[family].items():
            outs[form] = os.path.join(tmp, f"{family}_{form}.bin")
            rc, so, se = run(IMPORT, d, "-o", outs[form])
            lines = so.splitlines()
            check(rc == 0 and se == "" and len(lines) == 2 and lines[0].startswith("note: ")
                  and "not a runnable GPT-2" in lines[0] and f"{family}, L {L}, C {C}, heads {H}" in lines[1]
                  and outs[form] in lines[1],
                  f"{family} ({form}): imported with the note and the summary (exit {rc}): {lines[-1:]} {se.strip()}")
        qkv_at = check_slots(family, outs["safetensors"], sd)
        same = [f for f in outs if open(outs[f], "rb").read() == open(outs["safetensors"], "rb").read()]
        check(same == list(outs), f"{family}: every input variant gives the same file ({same} of {list(outs)})")

        spectra[family] = os.path.join(tmp, f"{family}.json")
        got, err = tool_heads(outs["safetensors"], spectra[family])
        ref = numpy_heads(family, sd)
        bad = mismatches(ref, got) if got is not None else [err]
        check(got is not None and len(got) == L * H and not bad,
              f"{family}: erank, rho_F, alpha/rho, unstable of all {L * H} heads equal numpy on the raw "
              f"HF slices (rtol {RTOL}; {bad[:3]})")
        flags = [r["unstable"] for r in ref]
        check(any(flags) and not all(flags), f"{family}: the fixture has stable and unstable heads ({flags})")

        if family == "gpt_neox":   # negative control: the fused weight without de-interleaving
            wrong = os.path.join(tmp, "neox_not_deinterleaved.bin")
            blob = bytearray(open(outs["safetensors"], "rb").read())
            raw = np.concatenate([sd[f"layers.{l}.attention.query_key_value.weight"] for l in range(L)])
            blob[qkv_at:qkv_at + raw.nbytes] = raw.astype("<f4").tobytes()
            open(wrong, "wb").write(bytes(blob))
            got_w, err = tool_heads(wrong, os.path.join(tmp, "wrong.json"))
            n_bad = len({m.split()[1] for m in mismatches(ref, got_w)}) if got_w else 0
            check(n_bad >= L * H - 1, f"negative control: without the de-interleave {n_bad} of {L * H} heads "
                                      f"disagree with numpy")
            n_ref = len({m.split()[1] for m in mismatches(numpy_heads(family, sd, wrong=True), got)})
            check(n_ref >= L * H - 1, f"negative control: numpy on the GPT-2-style slice disagrees with the "
                                      f"tool on {n_ref} of {L * H} heads")
    import_errors(tmp, dirs)
    pool_checks(tmp, {"BERT": spectra["bert"], "Pythia": spectra["gpt_neox"]})
    finish()


if __name__ == "__main__":
    main()
