"""test/test_export_hf.py: dev/export_hf.py against the CPU trainer, and sd_attention/import_hf.py back.

Small models are trained by ./train_gpt2 (so the S-D parameters and the attention have moved off
their init), one per layer table and option: a uniform model with LayerNorms (GPT-2's vocabulary:
the stock GPT2LMHeadModel path and the tokenizer), and on the byte vocabulary (V 256; the custom
LlmcGptForCausalLM path) per-layer heads and head sizes, sd, lin, sdlin, -ln 0, scalar D, the +D
sign, the linear prescale; then two of them as bf16 checkpoints (v5, v105), one of those exported
with --dtype bf16; then two of them read with the input scale emb_scale 35.36 (header[10]: the
uniform one, which must then leave the stock path, and the -ln 0 one). For each (doc/export.md):
  - transformers loads the export with no missing, unexpected or mismatched key, as the expected
    class (stock: GPT2LMHeadModel without remote code; custom: trust_remote_code=True);
  - its logits on two windows of 64 real val tokens equal the CPU trainer's (build/dump_logits,
    the C forward of llmc/cpu/gpt2_cpu.h) within 1e-4 max abs; its loss with labels equals the
    cross-entropy of the C logits within 1e-4;
  - generate() with greedy decoding gives the same 8 tokens as greedy decoding from the C logits
    (build/dump_logits greedy; the smallest top-2 gap is printed);
  - import_hf.py on the export writes the checkpoint byte for byte (bf16: with --dtype bf16).
The emb_scale cases (the trained checkpoints rewritten with input scale 35.36, header[10]) are
checked the same way; a config.json without emb_scale (an unscaled model's, as every export of
F = 1 writes it) is their negative control.
Then: left and right padding with an attention_mask leave the real tokens' logits as unpadded
(1e-5; a softmax and a linear model), and for the stock class without position_ids they do not
(its control); doc/export.md's usage snippet runs as written; the tokenizer files give GPT-2's ids for TinyShakespeare
(the val shard's first 600 tokens, made by the project's own BPE); negative controls (a
regrouped head table, the S-D sign, the linear prescale edited in config.json change the logits
by more than 1e-2, 100 times the tolerance); and the one-line errors of both programs.

Needs ./train_gpt2, build/dump_logits and make data's TinyShakespeare shards (GPT-2 and bytes).
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TMP = os.path.join(ROOT, "build", "tmp_export_hf")
# transformers copies trust_remote_code modules into this cache: one of our own, and no network
os.environ["HF_MODULES_CACHE"] = os.path.join(TMP, "hf_modules")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from llmc_formats import checkpoint  # noqa: E402
from llmc_formats.shards import read_shard  # noqa: E402
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

TRAINER = os.path.join(ROOT, "train_gpt2")
DUMP = os.path.join(ROOT, "build", "dump_logits")
EXPORT = os.path.join(ROOT, "dev", "export_hf.py")
IMPORT = os.path.join(ROOT, "sd_attention", "import_hf.py")
TS = os.path.join(ROOT, "dev", "data", "tinyshakespeare")
DATA = {"gpt2": (os.path.join(TS, "tiny_shakespeare_train.bin"), os.path.join(TS, "tiny_shakespeare_val.bin")),
        "bytes": (os.path.join(TS, "tiny_shakespeare_bytes_train.bin"),
                  os.path.join(TS, "tiny_shakespeare_bytes_val.bin"))}
TOL = 1e-4          # fp32 logits of two implementations of the same model (logits up to ~10)
PAD_TOL = 1e-5      # the same implementation with and without padding
CONTROL = 1e-2      # a wrong table or flag must move the logits by at least 100x TOL
B, T, PROMPT, NEW = 2, 64, 24, 8
SD_INIT = ["-sd_init_s", "0.1", "-sd_init_theta", "0.5", "-sd_init_u", "0.3"]
EMB_SCALE = 35.36   # the input scale of the emb_scale cases: unit RMS at GPT-2's init std 0.02

# name, descriptor, layer table (None: the descriptor's), trainer flags, data, steps, lr, stock?
CASES = [
    ("uniform", "L2C64H4T64", None, [], "gpt2", 12, "3e-3", True),
    ("heads", "L3C64H4T64V256", "2 4x8 1x48", [], "bytes", 60, "1e-2", False),
    ("sd", "L2C64H4T64V256", "4:sd 2x24:sd", SD_INIT, "bytes", 60, "1e-2", False),
    ("lin", "L2C64H4T64V256", "4:lin 2x16:lin", [], "bytes", 60, "1e-2", False),
    ("sdlin", "L2C64H4T64V256", "4:sdlin 4", SD_INIT, "bytes", 60, "1e-2", False),
    ("noln", "L2C64H4T64V256", None, ["-ln", "0"], "bytes", 60, "3e-3", False),
    ("scalar_d", "L2C64H4T64V256", "4:sd 4:sdlin", ["-sd_scalar_d", "1"] + SD_INIT, "bytes", 60, "1e-2", False),
    ("plus_d", "L2C64H4T64V256", "4:sd 2x32:sd", ["-sd_sign", "1"] + SD_INIT, "bytes", 60, "1e-2", False),
    ("prescale", "L2C64H4T64V256", "4:lin 4:sdlin", ["-lin_prescale", "1"] + SD_INIT, "bytes", 60, "1e-2", False),
]


def run_main(module, argv):
    """A program's main(argv) in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = module.main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def run(*cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def one_line_error(rc, err, *words):
    return rc == 1 and err.count("\n") == 1 and err.startswith("error: ") and all(w in err for w in words)


def train(name, desc, table, flags, data, steps, lr):
    d = os.path.join(TMP, name)
    cmd = [TRAINER, "-e", desc, "-i", DATA[data][0], "-j", DATA[data][1], "-b", "4", "-t", str(T),
           "-x", str(steps), "-l", lr, "-v", "0", "-m", "1", "-s", "0", "-n", "1000", "-o", d] + flags
    if table:
        path = os.path.join(TMP, name + "_layers.txt")
        with open(path, "w") as f:
            f.write(table + "\n")
        cmd += ["-layers", path]
    rc, out, err = run(*cmd)
    ckpt = os.path.join(d, f"model_{steps:08d}.bin")
    loss = [line for line in out.splitlines() if line.startswith("val loss")]
    ok = rc == 0 and os.path.isfile(ckpt)
    check(ok, f"{name}: ./train_gpt2 {desc} {table or ''} {' '.join(flags)}: {steps} steps, "
              f"{loss[-1] if loss else err.strip()[-200:]}")
    return ckpt if ok else None


def c_logits(ckpt, tokens):
    path = os.path.join(TMP, "tokens.bin")
    tokens.astype("<i4").tofile(path)
    out = os.path.join(TMP, "logits.bin")
    rc, _, err = run(DUMP, ckpt, path, out, "logits", B, T)
    if rc != 0:
        raise RuntimeError(f"dump_logits: {err.strip()}")
    return np.fromfile(out, dtype="<f4").reshape(B, T, -1)


def c_greedy(ckpt, prompt):
    path = os.path.join(TMP, "prompt.bin")
    prompt.astype("<i4").tofile(path)
    out = os.path.join(TMP, "greedy.bin")
    rc, _, err = run(DUMP, ckpt, path, out, "greedy", NEW)
    if rc != 0:
        raise RuntimeError(f"dump_logits: {err.strip()}")
    return (np.fromfile(out, dtype="<i4", count=NEW).tolist(),
            np.fromfile(out, dtype="<f4", offset=4 * NEW).reshape(NEW, -1))


def load(out_dir, stock):
    """(model, loading info) through the Auto class, as a user loads it."""
    from transformers import AutoModelForCausalLM
    kw = {} if stock else {"trust_remote_code": True}
    model, info = AutoModelForCausalLM.from_pretrained(out_dir, output_loading_info=True, **kw)
    model.eval()
    return model, info


def logits_of(model, ids, mask=None, positions=None):
    t = lambda a: None if a is None else torch.from_numpy(a.astype(np.int64))
    with torch.no_grad():
        return model(t(ids), attention_mask=t(mask), position_ids=t(positions)).logits.numpy()


def windows(data):
    val = read_shard(DATA[data][1]).astype(np.int64)
    return np.stack([val[0:T], val[5000:5000 + T]])


def check_case(name, ckpt, out_dir, stock, data, dtype_back, results, export_dtype="fp32"):
    """Every check of one export against the C model of ckpt; returns the loaded model."""
    from transformers import GPT2LMHeadModel
    model, info = load(out_dir, stock)
    cls = "GPT2LMHeadModel" if stock else "LlmcGptForCausalLM"
    empty = not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"))
    check(type(model).__name__ == cls and empty and (not stock or isinstance(model, GPT2LMHeadModel)),
          f"{name}: loads as {type(model).__name__} (expected {cls}), no missing/unexpected/mismatched "
          f"keys ({ {k: v for k, v in info.items() if v} })")
    ref_logits, ref_greedy, ref_name = c_logits, c_greedy, "CPU trainer's"
    win = windows(data)
    ref = ref_logits(ckpt, win)
    got = logits_of(model, win)
    diff = float(np.abs(got - ref).max()) if got.shape == ref.shape else float("inf")
    results[name] = (diff, float(np.abs(ref).max()))
    check(diff <= TOL, f"{name}: logits equal the {ref_name} on {B}x{T} val tokens "
                       f"(max |diff| {diff:.2e} <= {TOL:g}; logits up to {np.abs(ref).max():.2f})")
    with torch.no_grad():
        ids = torch.from_numpy(win)
        loss = float(model(ids, labels=ids).loss)
        ref_loss = float(F.cross_entropy(torch.from_numpy(ref[:, :-1]).double().reshape(-1, ref.shape[-1]),
                                         ids[:, 1:].reshape(-1)))
    check(abs(loss - ref_loss) <= TOL, f"{name}: loss with labels {loss:.6f} = cross-entropy of the "
                                       f"{ref_name} logits {ref_loss:.6f} (|diff| <= {TOL:g})")
    prompt = win[0, :PROMPT]
    want, rows = ref_greedy(ckpt, prompt)
    top2 = np.sort(rows, axis=1)[:, -2:]
    margin = float((top2[:, 1] - top2[:, 0]).min())
    ids = torch.from_numpy(prompt)[None]
    with torch.no_grad():
        # eos off: the C decoding does not stop; synced_gpus=False: decided here, so that
        # generate() does not import torch.distributed.fsdp to ask (which fails with this
        # machine's torch 1.13 on Python 3.11)
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=NEW, eos_token_id=None, pad_token_id=0,
                             synced_gpus=False, output_logits=True, return_dict_in_generate=True)
    got_tokens = gen.sequences[0, PROMPT:].tolist()
    step_logits = torch.stack(gen.logits, dim=1)[0].numpy()
    gdiff = float(np.abs(step_logits - rows).max()) if step_logits.shape == rows.shape else float("inf")
    check(got_tokens == want and gdiff <= TOL,
          f"{name}: generate() greedy = the {ref_name} greedy decoding: tokens {want} (got {got_tokens}), "
          f"each step's logits within {gdiff:.1e} <= {TOL:g} (smallest top-2 gap {margin:.2e})")
    back = os.path.join(TMP, name + "_back.bin")
    rc, _, err = run_main(import_hf, [out_dir, "-o", back, "--dtype", dtype_back])
    same = rc == 0 and open(back, "rb").read() == open(ckpt, "rb").read()
    check(same, f"{name}: import_hf.py{' --dtype bf16' if dtype_back == 'bf16' else ''} on the "
                f"{export_dtype} export writes the checkpoint back byte for byte "
                f"({os.path.getsize(ckpt)} bytes, version {checkpoint.read_header(ckpt)[1]}) {err.strip()}")
    return model


def check_emb_scale(ckpts, results, models):
    """The trained uniform and -ln 0 checkpoints read with emb_scale 35.36 (their blocks' input
    F (wte[x] + wpe[t]), doc/formats.md "Per-layer heads"): v103 checkpoints that export as the custom model
    with emb_scale in config.json, give the CPU trainer's logits, and import back byte for byte."""
    import dataclasses
    F32 = float(np.float32(EMB_SCALE))
    for src, stock_src, data in (("uniform", True, "gpt2"), ("noln", False, "bytes")):
        if src not in ckpts:
            continue
        name = f"{src}_emb_scale"
        cfg, _, flat = checkpoint.read(ckpts[src])
        ckpt = os.path.join(TMP, name + ".bin")
        checkpoint.write(ckpt, dataclasses.replace(cfg, emb_scale=EMB_SCALE), [flat])
        out_dir = os.path.join(TMP, name + "_hf")
        rc, _, err = run_main(export_hf, [ckpt, out_dir])
        conf = json.load(open(os.path.join(out_dir, "config.json"))) if rc == 0 else {}
        plain = json.load(open(os.path.join(TMP, src + "_hf", "config.json")))
        check(rc == 0 and checkpoint.read_header(ckpt)[1] == 103 and conf.get("model_type") == "llmc_gpt"
              and conf.get("emb_scale") == F32 and "emb_scale" not in plain,
              f"{name}: version {checkpoint.read_header(ckpt)[1]}, exported as the custom layout with "
              f"emb_scale {conf.get('emb_scale')!r} in config.json (the {src} export, F = 1, has no "
              f"emb_scale field; model_type {plain.get('model_type')}) {err.strip()}")
        if rc != 0:
            continue
        models[name] = check_case(name, ckpt, out_dir, False, data, "fp32", results)
        control(name, out_dir, models[name], data, lambda c: c.pop("emb_scale"),
                "emb_scale removed from config.json (F = 1)")
        if stock_src:
            check_padding(name, models[name], data)


def check_padding(name, model, data, left_positions=False):
    """Right and left padding with an attention_mask. left_positions: pass the positions of the
    left-padded row explicitly, as generate() does for transformers' GPT-2 (our model derives
    them from the mask)."""
    win = windows(data)[0]
    n, pad = 40, 8
    plain = logits_of(model, win[None, :n])[0]
    right = np.zeros((1, n + pad), np.int64)
    right[0, :n] = win[:n]
    rmask = np.zeros((1, n + pad), np.int64)
    rmask[0, :n] = 1
    left = np.zeros((1, n + pad), np.int64)
    left[0, pad:] = win[:n]
    lmask = np.zeros((1, n + pad), np.int64)
    lmask[0, pad:] = 1
    dr = float(np.abs(logits_of(model, right, rmask)[0, :n] - plain).max())
    pos = np.clip(np.cumsum(lmask, axis=1) - 1, 0, None) if left_positions else None
    dl = float(np.abs(logits_of(model, left, lmask, pos)[0, pad:] - plain).max())
    check(dr <= PAD_TOL and dl <= PAD_TOL, f"{name}: with an attention_mask, right and left padding leave "
          f"the real tokens' logits as unpadded (max |diff| right {dr:.1e}, left {dl:.1e} <= {PAD_TOL:g})")
    if left_positions:   # doc/export.md "Using the export": the stock class needs them
        d0 = float(np.abs(logits_of(model, left, lmask)[0, pad:] - plain).max())
        check(d0 > 100 * PAD_TOL, f"control, {name}: left padding without position_ids counts positions "
              f"from 0 and moves the real tokens' logits (max |diff| {d0:.2f})")


def check_snippet(out_dir):
    """doc/export.md's "Using the export" block, run as written with OUT_DIR replaced."""
    doc = open(os.path.join(ROOT, "doc", "export.md")).read()
    sec = doc[doc.index("## Using the export"):]
    code = sec[sec.index("```python\n") + len("```python\n"):sec.index("\n```", sec.index("```python"))]
    code = code.replace('"OUT_DIR"', repr(out_dir))
    env = {}
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(code, "doc/export.md", "exec"), env)
        n_in, n_out = env["ids"]["input_ids"].shape[1], env["out"].shape[1]
        ok, what = n_out > n_in and printed.getvalue().startswith("ROMEO:"), \
            f"{n_in} prompt tokens, {n_out} out; printed {printed.getvalue()[:40]!r}"
    except Exception as e:  # noqa: BLE001  (the doc's code failing is the finding)
        ok, what = False, f"{type(e).__name__}: {e}"
    check(ok, f"doc/export.md's snippet runs as written on the stock export ({what})")


def control(name, out_dir, ref_model, data, edit, what):
    """A copy of out_dir with config.json edited must give logits far from the true ones."""
    from transformers import AutoModelForCausalLM
    d = out_dir + "_control"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(out_dir, d)
    path = os.path.join(d, "config.json")
    conf = json.load(open(path))
    edit(conf)
    json.dump(conf, open(path, "w"))
    model = AutoModelForCausalLM.from_pretrained(d, trust_remote_code=True).eval()
    win = windows(data)
    diff = float(np.abs(logits_of(model, win) - logits_of(ref_model, win)).max())
    check(diff > CONTROL, f"negative control, {name} with {what}: the logits move by {diff:.2e} (> {CONTROL:g})")


def check_tokenizer(out_dir):
    from transformers import AutoTokenizer
    from dev.data.tinyshakespeare import default_input, sections
    tok = AutoTokenizer.from_pretrained(out_dir)
    text = open(default_input(), encoding="utf-8").read()
    want = read_shard(DATA["gpt2"][1])[:600].tolist()
    got = []
    for sec in sections(text):
        got += [tok.eos_token_id] + tok(sec)["input_ids"]
        if len(got) >= len(want):
            break
    check(type(tok).__name__.startswith("GPT2Tokenizer") and tok.eos_token_id == 50256 and
          got[:len(want)] == want and tok.decode(tok(text[:3000])["input_ids"]) == text[:3000],
          f"AutoTokenizer.from_pretrained(export) is GPT-2's ({type(tok).__name__}, eos 50256): the "
          f"val shard's first {len(want)} TinyShakespeare tokens, and back to the text")


def check_errors(ckpts):
    stock, sd = ckpts["uniform"], ckpts["sd"]
    # OUT_DIR not empty: refused through the command line, replaced with --force
    d = os.path.join(TMP, "nonempty")
    os.makedirs(d)
    open(os.path.join(d, "keep.txt"), "w").write("x")
    rc, _, err = run(sys.executable, EXPORT, sd, d)
    check(one_line_error(rc, err, d, "not empty", "--force") and os.listdir(d) == ["keep.txt"],
          f"an OUT_DIR that is not empty: one line, nothing written: {err.strip()}")
    rc, _, err = run(sys.executable, EXPORT, sd, d, "--force")
    left = [n for n in os.listdir(TMP) if n.startswith(".nonempty")]
    check(rc == 0 and "keep.txt" not in os.listdir(d) and "model.safetensors" in os.listdir(d) and not left,
          f"--force replaces it, no temporary directory left {err.strip()}")
    # wte's padded rows not zero: the export cannot represent the checkpoint
    cfg, _, flat = checkpoint.read(stock)
    flat = flat.copy()
    flat[cfg.vocab_size * cfg.n_embd + 5] = 0.5          # a value in row V
    bad = os.path.join(TMP, "padded_rows.bin")
    checkpoint.write(bad, cfg, [flat])
    out_dir = os.path.join(TMP, "x_padded")
    rc, _, err = run_main(export_hf, [bad, out_dir])
    check(one_line_error(rc, err, bad, "padded", "cannot represent") and not os.path.exists(out_dir),
          f"a checkpoint with non-zero padded wte rows: one line, no OUT_DIR: {err.strip()}")
    # an attention kind the format does not know (header[18], layer 0's kind)
    raw = bytearray(open(sd, "rb").read())
    raw[18 * 4:19 * 4] = (7).to_bytes(4, "little")
    bad = os.path.join(TMP, "kind7.bin")
    open(bad, "wb").write(bytes(raw))
    rc, _, err = run_main(export_hf, [bad, os.path.join(TMP, "x_kind")])
    check(one_line_error(rc, err, bad, "header[18]"), f"an unknown layer kind in the header: {err.strip()}")
    # a tokenizer file missing
    tok = os.path.join(TMP, "tok_missing")
    os.makedirs(tok)
    shutil.copyfile(os.path.join(export_hf.default_tokenizer_dir(), "encoder.json"), os.path.join(tok, "encoder.json"))
    out_dir = os.path.join(TMP, "x_tok")
    rc, _, err = run_main(export_hf, [stock, out_dir, "--tokenizer_dir", tok])
    check(one_line_error(rc, err, os.path.join(tok, "vocab.bpe"), "--tokenizer_dir") and not os.path.exists(out_dir),
          f"a missing tokenizer file: one line naming it, no OUT_DIR: {err.strip()}")
    # the importer: a custom config.json with an unknown kind, a tensor missing
    src = os.path.join(TMP, "sd_hf")
    d = os.path.join(TMP, "x_import_kind")
    shutil.copytree(src, d)
    conf = json.load(open(os.path.join(d, "config.json")))
    conf["layer_kinds"][1] = "rope"
    json.dump(conf, open(os.path.join(d, "config.json"), "w"))
    rc, _, err = run_main(import_hf, [d, "-o", os.path.join(TMP, "x.bin")])
    check(one_line_error(rc, err, "config.json", "'layer_kinds'[1]", "rope"),
          f"import of a custom config.json with an unknown kind: {err.strip()}")
    d = os.path.join(TMP, "x_import_emb_scale")
    shutil.copytree(src, d)
    conf = json.load(open(os.path.join(src, "config.json")))
    for bad in (-1.0, "2", 1e5):
        conf["emb_scale"] = bad
        json.dump(conf, open(os.path.join(d, "config.json"), "w"))
        rc, _, err = run_main(import_hf, [d, "-o", os.path.join(TMP, "x.bin")])
        check(one_line_error(rc, err, "config.json", "'emb_scale'", "(0, 10000]"),
              f"import of a custom config.json with emb_scale {bad!r}: {err.strip()}")
    from safetensors.numpy import load_file, save_file
    d = os.path.join(TMP, "x_import_missing")
    shutil.copytree(src, d)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    del tensors["transformer.h.1.attn.sd_theta"]
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    rc, _, err = run_main(import_hf, [d, "-o", os.path.join(TMP, "x.bin")])
    check(one_line_error(rc, err, "key 'transformer.h.1.attn.sd_theta': missing"),
          f"import of a custom export without a tensor: {err.strip()}")
    check(not os.path.exists(os.path.join(TMP, "x.bin")), "the failed imports wrote no checkpoint")


def main():
    t0 = time.time()
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    need = [TRAINER, DUMP] + [p for pair in DATA.values() for p in pair]
    missing = [p for p in need if not os.path.isfile(p)]
    if missing:
        check(False, f"prerequisites: missing {missing} (make train_gpt2 build/dump_logits data)")
        finish()
    global export_hf, import_hf
    from dev import export_hf
    from sd_attention import import_hf

    ckpts, results, models = {}, {}, {}
    for name, desc, table, flags, data, steps, lr, stock in CASES:
        ckpt = train(name, desc, table, flags, data, steps, lr)
        if ckpt is None:
            continue
        ckpts[name] = ckpt
        out_dir = os.path.join(TMP, name + "_hf")
        if name in ("uniform", "sd"):     # the command line itself; the others through main()
            rc, out, err = run(sys.executable, EXPORT, ckpt, out_dir)
        else:
            rc, out, err = run_main(export_hf, [ckpt, out_dir])
        layout = "stock" if stock else "custom"
        want = {"config.json", "generation_config.json", "model.safetensors"}
        want |= ({"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}
                 if data == "gpt2" else set())
        want |= set() if stock else {"configuration_llmc_gpt.py", "modeling_llmc_gpt.py"}
        files = set(os.listdir(out_dir)) if rc == 0 else set()
        model_type = json.load(open(os.path.join(out_dir, "config.json")))["model_type"] if rc == 0 else None
        check(rc == 0 and files == want and model_type == ("gpt2" if stock else "llmc_gpt"),
              f"{name}: exported as the {layout} layout (model_type {model_type}; files {sorted(files)}) "
              f"{err.strip()}")
        if rc != 0:
            continue
        models[name] = check_case(name, ckpt, out_dir, stock, data, "fp32", results)

    # bf16 checkpoints (v5, v105): the exporter widens them; --dtype bf16 keeps bf16 in the file
    for name, src, stock, data in (("uniform_bf16", "uniform", True, "gpt2"), ("sd_bf16", "sd", False, "bytes")):
        if src not in ckpts:
            continue
        cfg, _, flat = checkpoint.read(ckpts[src])
        ckpt = os.path.join(TMP, name + ".bin")
        checkpoint.write(ckpt, cfg, [flat], "bf16")
        out_dir = os.path.join(TMP, name + "_hf")
        rc, _, err = run_main(export_hf, [ckpt, out_dir])
        check(rc == 0 and checkpoint.read_header(ckpt)[1] in (5, 105), f"{name}: version "
              f"{checkpoint.read_header(ckpt)[1]} exported {err.strip()}")
        if rc == 0:
            check_case(name, ckpt, out_dir, stock, data, "bf16", results)
        if name == "sd_bf16":
            out16 = os.path.join(TMP, name + "_hf16")
            rc, _, err = run_main(export_hf, [ckpt, out16, "--dtype", "bf16"])
            from safetensors import safe_open
            with safe_open(os.path.join(out16, "model.safetensors"), framework="np") as f:
                dtypes = {str(f.get_slice(k).get_dtype()) for k in f.keys()}
            check(rc == 0 and dtypes == {"BF16"}, f"{name}: --dtype bf16 writes BF16 tensors only ({dtypes})")
            check_case(name + " (--dtype bf16)", ckpt, out16, stock, data, "bf16", results, "bf16")

    check_emb_scale(ckpts, results, models)

    if "sd" in models and "sdlin" in models:
        check_padding("sd", models["sd"], "bytes")
        check_padding("sdlin", models["sdlin"], "bytes")
    if "uniform" in models:
        check_padding("uniform (GPT2LMHeadModel)", models["uniform"], "gpt2", left_positions=True)
        check_tokenizer(os.path.join(TMP, "uniform_hf"))
        check_snippet(os.path.join(TMP, "uniform_hf"))
    if "heads" in models:
        def regroup(c):
            c["layer_heads"][0], c["layer_head_sizes"][0] = 4, 16     # 2x32 read as 4x16
        control("heads", os.path.join(TMP, "heads_hf"), models["heads"], "bytes", regroup,
                "layer 0's 2 heads of 32 read as 4 of 16")
    if "sd" in models:
        control("sd", os.path.join(TMP, "sd_hf"), models["sd"], "bytes",
                lambda c: c.update(sd_sign=1), "sd_sign +1 instead of -1")
    if "prescale" in models:
        control("prescale", os.path.join(TMP, "prescale_hf"), models["prescale"], "bytes",
                lambda c: c.update(lin_prescale=False), "lin_prescale off")
    if len(ckpts) == len(CASES):
        check_errors(ckpts)
    print("max |logit diff| against the CPU trainer: " +
          ", ".join(f"{k} {d:.1e} (|logit| <= {m:.1f})" for k, (d, m) in results.items()))
    print(f"took {time.time() - t0:.1f} s")
    if harness._failed == 0:
        shutil.rmtree(TMP, ignore_errors=True)   # about 130 MB; kept when a check failed
    finish()


if __name__ == "__main__":
    main()
