"""test/test_prescribe.py: sd_attention/prescribe.py, the S-D cascade's prescription of a layer table
(doc/sd_tools.md "Cascade-allocated d_head"; doc/sd_tools.md "Prescribing a layer table from a measured cascade").

Checks (the sizing measure, --measure, is n90 by default: r_l = 2 x the median n90 of the layer's
heads; the checks written for the former erank rule run with --measure erank, which keeps it, so
they still test the rule, the run-length table, the counts and the errors unchanged):
- the rule d = clamp(2^ceil(log2(c * r)), min, max) on hand-computed cases: clamping at both
  ends, exact powers of two (which map to themselves), a value just above a power of two, a zero
  routing (erank 0), other c and bounds;
- on synthetic sd_spectrum JSON (8 layers, 4 heads each, per-head eranks chosen so that the
  median and the mean give different sizes), with --measure erank: the written table's entries, run-length compressed,
  for --kind keep/sd/mha, --linear-plateau 1, -c 1 with other bounds; the file's comment lines
  (source, c, rule) and its one line of entries; the atomic write leaves no NAME.tmp;
- the attention parameters and FLOPs per token of small tables against numbers computed by hand
  (S-D, S-D linear, standard, linear; scalar D), and the tool's printed totals on a 2-layer
  spectrum against the same hand computation;
- the default measure n90 and --measure grad on synthetic JSON whose erank, n90 and grad_n90 give
  different tables (by hand), the measure named on the first output line and in the file; the
  standard layers of --measure grad use their n90;
- every error path: one line `error: ...` on stderr, nothing on stdout, exit 1, no table written
  (also: n90 or grad_n90 missing, --measure grad with --checkpoint);
- end to end: a 2-layer model (`4:sd 4`, -ln 0) trained 1 step by ./train_gpt2, prescribed with
  --checkpoint (sd_spectrum run by the tool, its temporary directory removed), the per-layer
  values equal to 2 x sd_spectrum's own n90_median, --spectrum on the same JSON giving the same
  table, and the written table accepted by ./train_gpt2 with the same descriptor (exit 0, the
  prescribed heads x sizes in its start-up lines).
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from harness import check, finish  # noqa: E402
from sd_attention import prescribe as pr  # noqa: E402  (sd_attention/prescribe.py)

TOOL = os.path.join(ROOT, "sd_attention", "prescribe.py")
TRAIN = os.path.join(ROOT, "train_gpt2")
SPECTRUM = os.path.join(ROOT, "sd_spectrum")
TS = os.path.join(ROOT, "dev", "data", "tinyshakespeare")
TMP = os.path.join(ROOT, "build", "tmp_prescribe")
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def run(*args, tool=TOOL, env=None):
    r = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, env=env or ENV)
    return r.returncode, r.stdout, r.stderr


def spectrum_json(path, layers, C=64, model="no/such/model.bin", opts=None, n90=None, grad_n90=None):
    """A synthetic sd_spectrum -json file: layers = [(kind, head_size, [head eranks], minimal)];
    n90 / grad_n90: per layer the heads' values (default n90 1 and grad_n90 null for every head)."""
    out = {"model": model, "eps": 1e-6, "config": dict({"num_layers": len(layers), "channels": C,
                                                         "use_ln": 0, "sd_d_sign": -1, "sd_scalar_d": 0},
                                                        **(opts or {})),
           "layers": []}
    for i, (kind, d, eranks, minimal) in enumerate(layers):
        out["layers"].append({"layer": i, "n_head": len(eranks), "head_size": d, "kind": kind,
                              "family": "S" if kind.startswith("sd") else "R", "minimal": minimal,
                              "erank_median": None,
                              "heads": [{"head": k, "erank": e, "n90": n90[i][k] if n90 else 1,
                                         "grad_n90": grad_n90[i][k] if grad_n90 else None}
                                        for k, e in enumerate(eranks)]})
    with open(path, "w") as f:
        json.dump(out, f)
    return path


def entries_of(path):
    """The non-comment lines of a table file."""
    with open(path) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


# ---------------------------------------------------------------------------------------------
# The rule

def rule_checks():
    cases = [  # (erank, c, lo, hi, expected d): by hand, 2^ceil(log2(c * erank)) then the clamp
        (2.0, 2.0, 8, 64, 8),       # 4 -> below the floor: 8
        (0.0, 2.0, 8, 64, 8),       # zero routing: the floor
        (4.0, 2.0, 8, 64, 8),       # exactly 8 = 2^3 stays 8
        (4.0001, 2.0, 8, 64, 16),   # just above 8: 16
        (8.0, 2.0, 8, 64, 16),      # exactly 16
        (12.3, 2.0, 8, 64, 32),     # 24.6 -> 32
        (16.0, 2.0, 8, 64, 32),     # exactly 32
        (16.5, 2.0, 8, 64, 64),     # 33 -> 64
        (40.0, 2.0, 8, 64, 64),     # 80 -> 128 -> the ceiling 64
        (32.0, 1.0, 8, 64, 32),     # c = 1: exactly 32
        (5.0, 3.0, 8, 64, 16),      # 15 -> 16
        (2.0, 1.0, 2, 64, 2),       # 2 -> 2 with a floor of 2
        (0.3, 1.0, 1, 64, 1),       # below 1: the floor 1
        (100.0, 2.0, 8, 128, 128),  # 200 -> 256 -> the ceiling 128
    ]
    bad = [(e, c, lo, hi, want, pr.head_size(e, c, lo, hi)) for e, c, lo, hi, want in cases
           if pr.head_size(e, c, lo, hi) != want]
    check(not bad, f"the rule on {len(cases)} hand-computed cases (floor, ceiling, exact powers of two, "
                   f"just above one, erank 0, c = 1 and 3){': ' + repr(bad) if bad else ''}")
    check([pr.next_pow2(x) for x in (1, 2, 3, 4, 5, 8, 9, 64, 64.0000001)] == [1, 2, 4, 4, 8, 8, 16, 64, 128],
          "next_pow2 is exact at powers of two")
    t = [(4, 8, "sd")] * 3 + [(4, 16, "sd")] + [(4, 64, "mha")] * 2 + [(4, 8, "sd")]
    check(pr.run_length(t) == "4x8:sd*3 4x16:sd 4x64:mha*2 4x8:sd",
          f"run_length: equal neighbours merged, no *1, a later repeat kept apart ({pr.run_length(t)})")


# ---------------------------------------------------------------------------------------------
# Synthetic spectra through the command line

# 8 layers of 4 heads (C 64, d 16). Median per layer, by hand, and the size at c = 2, [8, 64]:
LAYERS = [
    ("sd", 16, [2.0, 2.0, 2.0, 2.0], True),       # median 2      -> 4    -> 8 (floor)
    ("sd", 16, [2.2, 2.4, 2.3, 9.0], True),       # median 2.35   -> 4.7  -> 8
    ("sd", 16, [1.0, 3.0, 5.0, 100.0], False),    # median 4      -> 8 exactly (the mean, 27.25, would give 64)
    ("sd", 16, [4.5, 4.5, 4.5, 4.5], False),      # 4.5           -> 9    -> 16
    ("sd", 16, [8.0, 8.0, 8.0, 8.0], False),      # 8             -> 16 exactly
    ("sd", 16, [8.5, 8.5, 8.5, 8.5], False),      # 8.5           -> 17   -> 32
    ("mha", 16, [16.0, 16.0, 16.0, 16.0], False),  # 16           -> 32 exactly
    ("mha", 16, [40.0, 50.0, 60.0, 70.0], False),  # median 55    -> 110 -> 128 -> 64 (ceiling)
]
EXPECTED = {  # flags -> entries, by hand from the sizes above
    (): "4x8:sd*3 4x16:sd*2 4x32:sd 4x32:mha 4x64:mha",
    ("--kind", "sd"): "4x8:sd*3 4x16:sd*2 4x32:sd*2 4x64:sd",
    ("--kind", "mha"): "4x8:mha*3 4x16:mha*2 4x32:mha*2 4x64:mha",
    ("--linear-plateau", "1"): "4x8:sdlin*2 4x8:sd 4x16:sd*2 4x32:sd 4x32:mha 4x64:mha",
    ("--kind", "mha", "--linear-plateau", "1"): "4x8:lin*2 4x8:mha 4x16:mha*2 4x32:mha*2 4x64:mha",
    # c = 1, [4, 32]: 2 -> 4 (floor), 2.35 -> 4, 4 -> 4, 4.5 -> 8, 8 -> 8, 8.5 -> 16, 16 -> 16, 55 -> 32
    ("-c", "1", "--min-head", "4", "--max-head", "32"): "4x4:sd*3 4x8:sd*2 4x16:sd 4x16:mha 4x32:mha",
}


def synthetic_checks():
    js = spectrum_json(os.path.join(TMP, "synthetic.json"), LAYERS)
    for flags, want in EXPECTED.items():
        out = os.path.join(TMP, "syn.txt")
        if os.path.exists(out):
            os.remove(out)
        rc, so, se = run("--spectrum", js, "--seq-len", "32", "--measure", "erank", *flags, "-o", out)
        got = entries_of(out) if os.path.exists(out) else None
        check(rc == 0 and got == [want] and f"table: {want}" in so,
              f"synthetic spectrum {' '.join(flags) or '(defaults)'}: {want} (got {got}, rc {rc}{', ' + se.strip() if se.strip() else ''})")
    out = os.path.join(TMP, "syn.txt")
    rc, so, se = run("--spectrum", js, "--seq-len", "32", "--measure", "erank", "-o", out)
    with open(out) as f:
        lines = f.read().splitlines()
    head = [ln for ln in lines if ln.startswith("#")]
    check(lines[0].startswith("#") and "no/such/model.bin" in lines[0] and any("c = 2," in ln for ln in head)
          and any("clamp(2^ceil(log2(c * r_l)), 8, 64)" in ln and "--measure erank" in ln for ln in head)
          and len([ln for ln in lines if ln.strip() and not ln.startswith("#")]) == 1
          and not lines[-1].startswith("#"),
          "the table file: comments naming the source checkpoint, c and the rule first, then one line of entries")
    check(all(re.fullmatch(r"\d+x\d+:(mha|sd|lin|sdlin)(\*\d+)?", e) for e in entries_of(out)[0].split()),
          "every entry is HxD:kind[*N] (doc/prism.md)")
    check(not os.path.exists(out + ".tmp"), "no NAME.tmp left after the atomic write")
    rows = [ln for ln in so.splitlines() if re.match(r"^ +\d+ +4 x +16 ", ln)]
    check(len(rows) == 8 and rows[2].split()[5] == "4.000" and rows[7].split()[5] == "55.000"
          and [r.split()[7] for r in rows] == ["yes", "yes"] + ["no"] * 6,
          "the printed table: one row per layer with the median erank (4.000, 55.000) and the minimal flag")
    # a power of two exactly at the product: c = 0.5 on erank 16 gives 8
    js2 = spectrum_json(os.path.join(TMP, "exact.json"), [("sd", 16, [16.0], False)])
    rc, so, _ = run("--spectrum", js2, "--seq-len", "8", "-c", "0.5", "--measure", "erank")
    check(rc == 0 and "table: 1x8:sd" in so, "c = 0.5, erank 16: exactly 8")


# ---------------------------------------------------------------------------------------------
# The measures

# 4 layers of 2 heads (C 64, d 32). Per layer: eranks (an Adam-trained S: 13 for one plane), n90,
# grad_n90 (null for the mha layer), by hand at c = 2, [8, 64]:
#   erank medians 13, 13.5, 20, 40   -> 26 -> 32, 27 -> 32, 40 -> 64, 80 -> 64
#   n90 medians   1, 2.5, 4, 9        -> r 2, 5, 8, 18 -> 4 -> 8, 10 -> 16, 16, 36 -> 64
#   grad_n90      1, 1, 8.5, (n90 9)  -> r 2, 2, 17, 18 -> 8, 8, 34 -> 64, 64
MLAYERS = [("sd", 32, [13.0, 13.0], False), ("sd", 32, [13.0, 14.0], False), ("sdlin", 32, [20.0, 20.0], False),
           ("mha", 32, [40.0, 40.0], False)]
MN90 = [[1, 1], [2, 3], [4, 4], [9, 9]]
MGRAD = [[1, 1], [1, 1], [8, 9], [None, None]]
MEXPECTED = {"erank": "2x32:sd*2 2x64:sdlin 2x64:mha", "n90": "2x8:sd 2x16:sd 2x16:sdlin 2x64:mha",
             "grad": "2x8:sd*2 2x64:sdlin 2x64:mha"}


def measure_checks():
    js = spectrum_json(os.path.join(TMP, "measures.json"), MLAYERS, n90=MN90, grad_n90=MGRAD)
    for measure, want in MEXPECTED.items():
        out = os.path.join(TMP, f"m_{measure}.txt")
        flags = () if measure == "n90" else ("--measure", measure)
        rc, so, se = run("--spectrum", js, "--seq-len", "32", *flags, "-o", out)
        got = entries_of(out) if rc == 0 else None
        with open(out) if rc == 0 else open(os.devnull) as f:
            text = f.read()
        first = so.splitlines()[0] if so else ""
        check(rc == 0 and got == [want] and first.startswith(f"measure: {measure}:") and f"--measure {measure}" in text,
              f"--measure {measure}{' (the default)' if measure == 'n90' else ''}: {want}, named on the first line and "
              f"in the file (got {got}{', ' + se.strip() if se.strip() else ''})")
    rc, so, _ = run("--spectrum", js, "--seq-len", "32", "--measure", "grad")
    fams = [ln.split()[6] for ln in so.splitlines() if re.match(r"^ +\d+ +2 x +32 ", ln)]
    vals = [ln.split()[5] for ln in so.splitlines() if re.match(r"^ +\d+ +2 x +32 ", ln)]
    check(fams == ["G", "G", "G", "R"] and vals == ["2.000", "2.000", "17.000", "18.000"],
          f"--measure grad: r_l of G for the S-D layers, of R (its n90) for the mha layer: {vals} {fams}")


# ---------------------------------------------------------------------------------------------
# Counting

def count_checks():
    C, T = 64, 32
    # By hand (doc/formats.md "Per-layer heads" shapes, biases included; doc/methods.md "Parameter counts", "Realization with the standard attention kernels", "ELU+1 causal linear attention"):
    # sd 4x8, A 32: qkvw 2*32*64 = 4096, qkvb 64, attprojw 64*32 = 2048, attprojb 64,
    #   sdskew 4*8*7/2 = 112, sdtheta 32: 6416 (scalar D: 6416 - 32 + 4 = 6388);
    #   FLOPs 2*64*2*32 = 8192, fold 2*32*8 = 512, softmax 4*32*32 = 4096, out 2*32*64 = 4096: 16896
    # sdlin 4x8: params 6416; FLOPs 8192 + 512 + linear 4*32*8 = 1024 + 4096 = 13824
    # mha 4x16, A 64: 3*64*64 = 12288 + 192 + 4096 + 64 = 16640;
    #   FLOPs 2*64*3*64 = 24576 + 4*32*64 = 8192 + 2*64*64 = 8192: 40960
    # lin 4x16: params 16640; FLOPs 24576 + 4*64*16 = 4096 + 8192 = 36864
    cases = [((4, 8, "sd"), 6416, 6388, 16896), ((4, 8, "sdlin"), 6416, 6388, 13824),
             ((4, 16, "mha"), 16640, 16640, 40960), ((4, 16, "lin"), 16640, 16640, 36864)]
    ok = all(pr.attention_params(C, [t], 0) == p and pr.attention_params(C, [t], 1) == ps
             and pr.attention_flops(C, [t], T) == f for t, p, ps, f in cases)
    check(ok, "attention parameters (vector and scalar D) and FLOPs per token of sd, sdlin, mha, lin "
              "layers equal the hand computation")
    check(pr.attention_params(C, [c[0] for c in cases], 0) == 6416 * 2 + 16640 * 2
          and pr.attention_flops(C, [c[0] for c in cases], T) == 16896 + 13824 + 40960 + 36864,
          "a table's counts are the sums over its layers")
    # The tool's totals on 2 layers: sd erank 2 (minimal) -> 4x8:sd, mha erank 20 -> 40 -> 4x64:mha.
    # mha 4x64, A 256: 3*256*64 = 49152 + 768 + 64*256 = 16384 + 64 = 66368 params;
    #   FLOPs 2*64*3*256 = 98304 + 4*32*256 = 32768 + 2*256*64 = 32768: 163840.
    # prescribed: 6416 + 66368 = 72784 params, 16896 + 163840 = 180736 FLOPs.
    # uniform (4 x 16, the same kinds): sd 4x16, A 64: 8192 + 128 + 4096 + 64 + 4*120 + 64 = 13024
    #   params, FLOPs 2*64*2*64 = 16384 + 2*64*16 = 2048 + 4*32*64 = 8192 + 8192 = 34816;
    #   with mha 4x16: 13024 + 16640 = 29664 params, 34816 + 40960 = 75776 FLOPs (the measured model too).
    # 72784 / 29664 - 1 = +145.4%; 180736 / 75776 - 1 = +138.5%.
    js = spectrum_json(os.path.join(TMP, "two.json"), [("sd", 16, [2.0] * 4, True), ("mha", 16, [20.0] * 4, False)])
    rc, so, se = run("--spectrum", js, "--seq-len", "32", "--measure", "erank")
    check(rc == 0 and "attention parameters: prescribed 72,784, uniform (4 x 16) 29,664 (+145.4%), "
          "measured model 29,664 (+145.4%)" in so
          and "attention FLOPs per token at T 32: prescribed 180,736, uniform 75,776 (+138.5%), "
          "measured model 75,776 (+138.5%)" in so,
          f"the printed parameters and FLOPs against uniform and measured equal the hand computation{'' if rc == 0 else ': ' + se}")
    # --linear-plateau 1: 4x8:sdlin; uniform sdlin 4x16 FLOPs 16384 + 2048 + 4*64*16 = 4096 + 8192 = 30720,
    # + 40960 = 71680; prescribed 13824 + 163840 = 177664 (+147.9%); measured still 75776 (+134.5%).
    rc, so, se = run("--spectrum", js, "--seq-len", "32", "--linear-plateau", "1", "--measure", "erank")
    check(rc == 0 and "table: 4x8:sdlin 4x64:mha" in so
          and "prescribed 177,664, uniform 71,680 (+147.9%), measured model 75,776 (+134.5%)" in so,
          "with --linear-plateau 1: the linear FLOPs of the minimal layer, by hand")


# ---------------------------------------------------------------------------------------------
# Errors

def error_checks(ckpt):
    good = spectrum_json(os.path.join(TMP, "good.json"), LAYERS)

    def bad_json(name, mutate):
        with open(good) as f:
            d = json.load(f)
        mutate(d)
        p = os.path.join(TMP, name)
        with open(p, "w") as f:
            json.dump(d, f)
        return p

    notjson = os.path.join(TMP, "notjson.json")
    with open(notjson, "w") as f:
        f.write("{not json")
    garbage = os.path.join(TMP, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"\0" * 4096)
    varying = bad_json("varying.json", lambda d: d["layers"][0].update(n_head=2, heads=d["layers"][0]["heads"][:2]))
    mismatch = bad_json("mismatch.json", lambda d: d.update(model=ckpt))   # 8 layers vs the 2-layer file
    # a copy of the tool in a tree without ./sd_spectrum
    fake = os.path.join(TMP, "fake_root")
    os.makedirs(os.path.join(fake, "sd_attention"), exist_ok=True)
    os.makedirs(os.path.join(fake, "scripts"), exist_ok=True)
    shutil.copy(TOOL, os.path.join(fake, "sd_attention", "prescribe.py"))
    shutil.copy(os.path.join(ROOT, "scripts", "common.py"), os.path.join(fake, "scripts", "common.py"))
    if not os.path.exists(os.path.join(fake, "llmc_formats")):  # the package, as in the checkout
        shutil.copytree(os.path.join(ROOT, "llmc_formats"), os.path.join(fake, "llmc_formats"),
                        ignore=shutil.ignore_patterns("__pycache__"))
    out = os.path.join(TMP, "err_table.txt")
    T = ["--seq-len", "32"]
    cases = [
        ("a missing spectrum file", [good + ".missing", *T], "good.json.missing: no such file"),
        ("a spectrum that is not JSON", [notjson, *T], "notjson.json: not JSON"),
        ("no config", [bad_json("b1.json", lambda d: d.pop("config")), *T], "field 'config'"),
        ("no config.channels", [bad_json("b2.json", lambda d: d["config"].pop("channels")), *T], "config.channels"),
        ("no layers", [bad_json("b3.json", lambda d: d.pop("layers")), *T], "field 'layers'"),
        ("a layer count other than num_layers", [bad_json("b4.json", lambda d: d["layers"].pop()), *T],
         "expected a list of config.num_layers = 8 layers"),
        ("a layer without kind", [bad_json("b5.json", lambda d: d["layers"][3].pop("kind")), *T], "layers[3].kind"),
        ("a layer without minimal", [bad_json("b6.json", lambda d: d["layers"][1].pop("minimal")), *T], "layers[1].minimal"),
        ("a layer without heads", [bad_json("b7.json", lambda d: d["layers"][2].pop("heads")), *T], "layers[2].heads"),
        ("a head with a null erank", [bad_json("b8.json", lambda d: d["layers"][4]["heads"][1].update(erank=None)), *T,
                                      "--measure", "erank"], "layers[4].heads[1].erank': None: expected a number >= 0"),
        ("a head without n90", [bad_json("b11.json", lambda d: d["layers"][2]["heads"][0].pop("n90")), *T],
         "layers[2].heads[0].n90': None: expected a number >= 0"),
        ("--measure grad without gradient fields", [good, *T, "--measure", "grad"],
         "layers[0].heads[0].grad_n90': None: expected a number >= 0 (run ./sd_spectrum -grad_batches"),
        ("a head count other than n_head", [bad_json("b9.json", lambda d: d["layers"][0].update(n_head=3)), *T],
         "n_head = 3 heads"),
        ("a wrong layer index", [bad_json("b10.json", lambda d: d["layers"][5].update(layer=7)), *T], "layers[5].layer"),
    ]
    results = []
    for what, (path, *rest), needle in cases:
        results.append((what, ["--spectrum", path, *rest, "-o", out], needle))
    results += [
        ("c = 0", ["--spectrum", good, *T, "-c", "0", "-o", out], "--c: 0: expected a finite number > 0"),
        ("c < 0", ["--spectrum", good, *T, "-c", "-1.5", "-o", out], "--c: -1.5: expected a finite number > 0"),
        ("min > max", ["--spectrum", good, *T, "--min-head", "64", "--max-head", "16", "-o", out],
         "--min-head: 64: expected at most --max-head 16"),
        ("a min that is not a power of two", ["--spectrum", good, *T, "--min-head", "12", "-o", out],
         "--min-head: 12: expected a power of two"),
        ("a max that is not a power of two", ["--spectrum", good, *T, "--max-head", "48", "-o", out],
         "--max-head: 48: expected a power of two"),
        ("a zero min", ["--spectrum", good, *T, "--min-head", "0", "-o", out], "--min-head: 0: expected a power of two"),
        ("neither input", [*T, "-o", out], "--checkpoint or --spectrum: expected one of them"),
        ("both inputs", ["--spectrum", good, "--checkpoint", ckpt, "-o", out], "not allowed with"),
        ("an unknown --kind", ["--spectrum", good, *T, "--kind", "lin", "-o", out], "--kind"),
        ("a bad --linear-plateau", ["--spectrum", good, *T, "--linear-plateau", "2", "-o", out], "--linear-plateau"),
        ("a missing checkpoint", ["--checkpoint", ckpt + ".missing", "-o", out], ".bin.missing: no such file"),
        ("--measure grad with --checkpoint", ["--checkpoint", ckpt, "--measure", "grad", "-o", out],
         "--measure grad: expected --spectrum"),
        ("a checkpoint sd_spectrum rejects", ["--checkpoint", garbage, "-o", out], "garbage.bin: ./sd_spectrum failed"),
        ("no --seq-len without a readable checkpoint", ["--spectrum", good, "-o", out], "expected --seq-len T"),
        ("varying head counts without a readable checkpoint", ["--spectrum", varying, *T, "-o", out],
         "the layers have 2, 4 heads"),
        ("--heads not dividing C", ["--spectrum", good, *T, "--heads", "5", "-o", out], "--heads: 5: expected a divisor of C = 64"),
        ("a checkpoint whose header is not the spectrum's model", ["--spectrum", mismatch, "-o", out],
         "header L 2, C 64: expected the spectrum's L 8, C 64"),
        ("-o into a missing directory", ["--spectrum", good, *T, "-o", os.path.join(TMP, "nowhere", "t.txt")],
         "nowhere/t.txt: directory"),
    ]
    for what, args, needle in results:
        if os.path.exists(out):
            os.remove(out)
        rc, so, se = run(*args)
        lines = se.strip().splitlines()
        check(rc == 1 and so == "" and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
              and not os.path.exists(out), f"error, {what}: {lines[0] if lines else '(nothing on stderr)'}")
    rc, so, se = run("--checkpoint", ckpt, tool=os.path.join(fake, "sd_attention", "prescribe.py"))
    lines = se.strip().splitlines()
    check(rc == 1 and so == "" and len(lines) == 1 and lines[0].startswith("error: ") and "make sd_spectrum" in lines[0],
          f"error, ./sd_spectrum not built: {lines[0] if lines else '(nothing)'}")


# ---------------------------------------------------------------------------------------------
# End to end

def train(desc, table, out_dir=None, extra=()):
    args = [TRAIN, "-e", desc, "-layers", table, "-ln", "0", "-i", os.path.join(TS, "tiny_shakespeare_train.bin"),
            "-j", os.path.join(TS, "tiny_shakespeare_val.bin"), "-b", "2", "-t", "32", "-x", "1", "-v", "1",
            "-m", "1", "-s", "0", *extra]
    if out_dir:
        args += ["-n", "1", "-o", out_dir]
    return subprocess.run(args, capture_output=True, text=True, env=ENV)


def end_to_end():
    mixed = os.path.join(TMP, "mixed.txt")
    with open(mixed, "w") as f:
        f.write("4:sd 4\n")
    r = train("L2C64H4T32", mixed, os.path.join(TMP, "run"))
    ckpt = os.path.join(TMP, "run", "model_00000001.bin")
    if not check(r.returncode == 0 and os.path.isfile(ckpt), "./train_gpt2 wrote a 1-step L2C64H4T32 checkpoint (4:sd 4, -ln 0)"):
        print(r.stdout[-2000:] + r.stderr[-2000:])
        return ckpt
    ref = os.path.join(TMP, "ref.json")
    subprocess.run([SPECTRUM, ckpt, "-json", ref], capture_output=True, env=ENV)
    with open(ref) as f:
        medians = [2 * lay["n90_median"] for lay in json.load(f)["layers"]]
    tmpdir = os.path.join(TMP, "tmpdir")
    os.makedirs(tmpdir, exist_ok=True)
    table = os.path.join(TMP, "e2e_table.txt")
    rc, so, se = run("--checkpoint", ckpt, "-o", table, env=dict(ENV, TMPDIR=tmpdir))
    check(rc == 0 and se == "" and os.path.isfile(table), f"--checkpoint: exit 0, a table written{': ' + se if se else ''}")
    check(os.listdir(tmpdir) == [], "the temporary sd_spectrum JSON and its directory are removed")
    rows = [ln.split() for ln in so.splitlines() if re.match(r"^ +[01] +4 x +16 ", ln)]
    got = [float(rw[5]) for rw in rows]
    check(len(got) == 2 and all(abs(g - m) < 5e-4 for g, m in zip(got, medians)),
          f"the printed r_l are 2 x sd_spectrum's n90_median per layer ({got} vs {medians})")
    want = pr.run_length(pr.prescribe([{"rank": m, "kind": k, "minimal": False} for m, k in zip(medians, ["sd", "mha"])],
                                      2.0, 8, 64, 4, "keep", 0))
    check(entries_of(table) == [want], f"the table is the rule applied to those medians ({want})")
    with open(table) as f:
        text = f.read()
    check(ckpt in text.splitlines()[0] and "-e L2C64H4T32 -layers" in text and "-ln 0" in text,
          "the table names the checkpoint, the descriptor and the measured model's -ln 0")
    rc2, so2, _ = run("--spectrum", ref)
    check(rc2 == 0 and f"table: {want}" in so2 and "at T 32" in so2,
          "--spectrum on sd_spectrum's JSON: the same table, maxT and base heads from the checkpoint it names")
    r = train("L2C64H4T32", table)
    sizes = re.findall(r"(\d+) heads x +(\d+) \((\w+)\)", r.stdout + r.stderr)
    expect = [(str(h), str(d), k) for h, d, k in ((e.split("x")[0], e.split("x")[1].split(":")[0],
                                                   e.split(":")[1].split("*")[0]) for e in want.split())]
    check(r.returncode == 0 and sizes == expect,
          f"./train_gpt2 -e L2C64H4T32 -layers TABLE -ln 0 -x 1 accepts the table: exit {r.returncode}, layers {sizes}")
    table3 = os.path.join(TMP, "e2e_table3.txt")
    rc4, _, _ = run("--checkpoint", ckpt, "--kind", "mha", "-o", table3)
    with open(table3) as f:
        train_line = [ln for ln in f if ln.startswith("# train with:")]
    check(rc4 == 0 and "-sd_sign -1" in text and len(train_line) == 1 and "-ln 0" in train_line[0]
          and "-sd_" not in train_line[0],
          f"--kind mha: the train line keeps -ln 0 and drops the S-D options ({train_line})")
    # a linear plateau and a narrow ceiling, also accepted (layer kinds sdlin / lin exist)
    table2 = os.path.join(TMP, "e2e_table2.txt")
    rc3, so3, se3 = run("--checkpoint", ckpt, "--kind", "sd", "--max-head", "8", "-o", table2)
    r = train("L2C64H4T32", table2)
    check(rc3 == 0 and entries_of(table2) == ["4x8:sd*2"] and r.returncode == 0,
          f"--kind sd --max-head 8: 4x8:sd*2 (H*D = 32 < C = 64), accepted by the trainer (exit {r.returncode})")
    return ckpt


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    rule_checks()
    synthetic_checks()
    measure_checks()
    count_checks()
    if not all(os.access(p, os.X_OK) for p in (TRAIN, SPECTRUM)):
        check(False, "./train_gpt2 and ./sd_spectrum are built (make sd_spectrum train_gpt2)")
        finish()
    ckpt = end_to_end()
    error_checks(ckpt)
    finish()


if __name__ == "__main__":
    main()
