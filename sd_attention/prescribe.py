"""sd_attention/prescribe.py: the S-D cascade's prescription (Jamil and Kapadia, arXiv 2605.18826:
"architectures sized by the cascade"; doc/sd_tools.md "Cascade-allocated d_head"). A measured
checkpoint (or its ./sd_spectrum -json output) -> a layer table with one head size per layer, to
train from scratch.

    python sd_attention/prescribe.py --checkpoint model.bin -o table.txt
    python sd_attention/prescribe.py --spectrum spectrum.json [--measure n90|grad|erank] [-c 2]
        [--min-head 8] [--max-head 64] [--kind keep|sd|mha] [--linear-plateau 0|1] [--heads H]
        [--seq-len T] [-o table.txt]

Per layer l: d_l = clamp(2^ceil(log2(c * r_l)), min, max), defaults c = 2, min 8, max 64 (an exact
power of two maps to itself; r_l = 0 gives min). r_l is the layer's routing rank in singular
values, the median over its heads of, by --measure:
  n90 (default)  2 x n90, the rotation planes holding 90 % of ||S||_F^2 (of R, the skew part of
                 W_Q W_K^T, for standard heads);
  grad           2 x grad_n90, the planes of S's mean gradient (sd_spectrum -grad_batches);
  erank          the Roy-Vetterli effective rank of S (or R).
The head count is the measured model's (header[5]) unless --heads is given, so entries are
`HxD:kind`. --kind keep keeps each layer's kind, sd or mha sets all; --linear-plateau 1 makes the
layers at minimal rank (median head erank < 2.5) linear (sd -> sdlin, mha -> lin).

Output: the measure, a per-layer table (measured and prescribed heads x size and kind, r_l, minimal
rank), and the attention parameters and FLOPs per token of the prescribed, uniform and measured
tables. -o writes the table (comment lines naming the source and the rule, then the entries,
run-length compressed) atomically. Errors are one line `error: <file or flag>: <what was
expected>` and exit 1.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from scripts.common import read_json  # noqa: E402  (scripts/common.py)
from llmc_formats import checkpoint  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

SD_SPECTRUM = os.path.join(ROOT, "sd_spectrum")
MAX_HEAD_SIZE = 4096     # LLMC_MAX_HEAD_SIZE (llmc/config.h)
MAX_ATTN_WIDTH = 65536   # LLMC_MAX_ATTN_WIDTH
DEFAULT_C, DEFAULT_MIN, DEFAULT_MAX = 2.0, 8, 64

# The kinds by the names of layer tables, and what each is, all from llmc_formats/checkpoint.py
# (doc/formats.md "Per-layer heads"): rows of qkvw per unit of attention width (Q | K | V, or S-D's U | V),
# whether the projection is S-D's, whether the mixer is ELU+1 linear; the kind with the same
# projection and the linear mixer.
KINDS = {name: (checkpoint.qkv_rows(k), k in checkpoint.SD_KINDS, k in checkpoint.LINEAR_KINDS)
         for k, name in enumerate(checkpoint.KINDS)}
LINEAR_OF = {name: checkpoint.KINDS[checkpoint.linear_of(k)] for k, name in enumerate(checkpoint.KINDS)}


class InputError(ValueError):
    """A bad argument or input; the message starts with the file or flag."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


# ---------------------------------------------------------------------------------------------
# The rule (doc/sd_tools.md "Cascade-allocated d_head")

def next_pow2(x):
    """The smallest power of two >= x (1 for x <= 1), exactly: no log2 rounding at 2^k."""
    p = 1
    while p < x:
        p *= 2
    return p


def head_size(erank, c, lo, hi):
    """d = clamp(2^ceil(log2(c * erank)), lo, hi); lo >= 1, so anything below lo gives lo."""
    return min(hi, max(lo, next_pow2(c * erank)))


def prescribe(layers, c, lo, hi, heads, kind, linear_plateau):
    """[(H, d, kind)] per layer from the measured layers (dicts with rank = r_l, kind, minimal)."""
    out = []
    for m in layers:
        k = m["kind"] if kind == "keep" else kind
        if linear_plateau and m["minimal"]:
            k = LINEAR_OF[k]
        out.append((heads, head_size(m["rank"], c, lo, hi), k))
    return out


MEASURES = {  # --measure: (per-head field, factor to singular values, words for the output)
    "n90": ("n90", 2, "rank90 = 2 x n90, the rotation planes holding 90% of the routing energy"),
    "grad": ("grad_n90", 2, "2 x grad_n90, the planes holding 90% of the mean gradient of S (sd_spectrum "
                            "-grad_batches; n90 of R for standard layers)"),
    "erank": ("erank", 1, "the Roy-Vetterli erank (the former rule; inflated by Adam, doc/methods.md 'Effective rank')"),
}


def run_length(table):
    """Entries HxD:kind[*N], consecutive equal layers merged (doc/prism.md syntax)."""
    entries, start = [], 0
    for l in range(1, len(table) + 1):
        if l < len(table) and table[l] == table[start]:
            continue
        h, d, k = table[start]
        n = l - start
        entries.append(f"{h}x{d}:{k}" + (f"*{n}" if n > 1 else ""))
        start = l
    return " ".join(entries)


# ---------------------------------------------------------------------------------------------
# Counting (the quantities of doc/sd_tools.md "Cascade-allocated d_head")

def attention_params(C, table, scalar_d):
    """Attention parameters of a table: per layer the tensors surg_attention_params counts
    (sd_attention/surgery.h; shapes doc/formats.md "Per-layer heads", per-head counts doc/methods.md "Parameter counts"):
    qkvw (rows A, C), qkvb (rows A), attprojw (C, A), attprojb (C) with A = H d and rows 3
    (Q | K | V) or 2 (S-D: U | V); S-D layers add sdskew H d(d-1)/2 and sdtheta H d (H with
    scalar D)."""
    n = 0
    for h, d, k in table:
        rows, sd, _ = KINDS[k]
        A = h * d
        n += rows * A * C + rows * A + C * A + C
        if sd:
            n += h * d * (d - 1) // 2 + (h if scalar_d else h * d)
    return n


def attention_flops(C, table, T):
    """Forward matmul FLOPs per token of the attention sub-blocks at sequence length T: the
    attention terms of model_matmul_flops_per_token (llmc/param_layout.h): the projection
    2 C rows A; S-D's fold K' = U L^T, 2 A d (doc/methods.md "Realization with the standard attention kernels"); the mixing, softmax Q K^T and
    att V over the full T x T square, 4 T A (doc/prism.md "Parameter and FLOP neutrality"), or the ELU+1 state, 4 A d (doc/methods.md "ELU+1 causal linear attention"); the output
    projection 2 A C."""
    f = 0
    for h, d, k in table:
        rows, sd, linear = KINDS[k]
        A = h * d
        f += 2 * C * rows * A + (2 * A * d if sd else 0) + (4 * A * d if linear else 4 * T * A) + 2 * A * C
    return f


# ---------------------------------------------------------------------------------------------
# Inputs

def want_int(v, lo=None):
    return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo)


def head_values(path, where, heads, field, sd):
    """The per-head values of `field`, checked; InputError naming the field."""
    out = []
    for k, h in enumerate(heads):
        v = h.get(field) if isinstance(h, dict) else None
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            hint = (" (run ./sd_spectrum -grad_batches N -j SHARDS -json, or use --measure n90)"
                    if field.startswith("grad") and sd else "")
            raise InputError(f"{where}.heads[{k}].{field}': {v!r}: expected a number >= 0{hint}")
        out.append(float(v))
    return out


def read_spectrum(path, measure="n90"):
    """The fields of an sd_spectrum -json file the rule needs; InputError naming the field."""
    data = read_json(path, "./sd_spectrum -json output", InputError)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object (./sd_spectrum -json output)")
    cfg = data.get("config")
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: field 'config': expected an object (./sd_spectrum -json output)")
    for key in ("num_layers", "channels"):
        if not want_int(cfg.get(key), 1):
            raise InputError(f"{path}: field 'config.{key}': expected an integer >= 1")
    L, C = cfg["num_layers"], cfg["channels"]
    layers = data.get("layers")
    if not isinstance(layers, list) or len(layers) != L:
        raise InputError(f"{path}: field 'layers': expected a list of config.num_layers = {L} layers")
    out = []
    for i, lay in enumerate(layers):
        where = f"{path}: field 'layers[{i}]"
        if not isinstance(lay, dict):
            raise InputError(f"{where}': expected an object")
        if lay.get("layer") != i or not want_int(lay.get("layer")):
            raise InputError(f"{where}.layer': expected {i}")
        for key in ("n_head", "head_size"):
            if not want_int(lay.get(key), 1):
                raise InputError(f"{where}.{key}': expected an integer >= 1")
        if lay.get("kind") not in KINDS:
            raise InputError(f"{where}.kind': expected one of {', '.join(KINDS)}")
        if not isinstance(lay.get("minimal"), bool):
            raise InputError(f"{where}.minimal': expected true or false")
        heads = lay.get("heads")
        if not isinstance(heads, list) or len(heads) != lay["n_head"]:
            raise InputError(f"{where}.heads': expected a list of n_head = {lay['n_head']} heads")
        sd = KINDS[lay["kind"]][1]
        field, factor, _ = MEASURES[measure]
        if field == "grad_n90" and not sd:
            field = "n90"
        vals = head_values(path, where, heads, field, sd)
        fam = ("G" if field == "grad_n90" else "S") if sd else "R"
        out.append({"n_head": lay["n_head"], "head_size": lay["head_size"], "kind": lay["kind"],
                    "family": fam, "minimal": lay["minimal"], "rank": factor * statistics.median(vals)})
    opts = {}
    for key in ("use_ln", "sd_scalar_d", "sd_d_sign"):
        if key in cfg:
            if not want_int(cfg[key]):
                raise InputError(f"{path}: field 'config.{key}': expected an integer")
            opts[key] = cfg[key]
    model = data.get("model") if isinstance(data.get("model"), str) else None
    return {"L": L, "C": C, "layers": out, "opts": opts, "model": model}


def read_header(path):
    """(maxT, L, base heads, C) from a checkpoint header (doc/formats.md "Header", "Per-layer heads"; read by
    llmc_formats/checkpoint.py), or None when the file is unreadable or not a checkpoint."""
    try:
        with open(path, "rb") as f:
            cfg, _ = checkpoint.decode_header(path, f.read(checkpoint.HEADER_BYTES))
    except (OSError, ValueError):
        return None
    return {"maxT": cfg.block_size, "L": cfg.n_layer, "heads": cfg.n_head, "C": cfg.n_embd}


def run_spectrum(ckpt, tmpdir):
    """./sd_spectrum -e ckpt -json tmpdir/spectrum.json; its path, or InputError."""
    if not os.path.isfile(ckpt):
        raise InputError(f"{ckpt}: no such file (expected a model checkpoint)")
    if not (os.path.isfile(SD_SPECTRUM) and os.access(SD_SPECTRUM, os.X_OK)):
        raise InputError(f"{SD_SPECTRUM}: not built; expected the spectrum tool: run make sd_spectrum")
    out = os.path.join(tmpdir, "spectrum.json")
    r = subprocess.run([SD_SPECTRUM, "-e", ckpt, "-json", out], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(out):
        msg = (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()[-1]
        if msg.startswith("error: "):
            msg = msg[len("error: "):]
        raise InputError(f"{ckpt}: ./sd_spectrum failed: {msg}")
    return out


def power_of_two(flag, v):
    if v < 1 or v & (v - 1):
        raise InputError(f"{flag}: {v}: expected a power of two >= 1")
    if v > MAX_HEAD_SIZE:
        raise InputError(f"{flag}: {v}: expected at most {MAX_HEAD_SIZE} (the largest head size)")


def check_output(path):
    if path is None:
        return
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise InputError(f"{path}: directory {d} does not exist (expected an existing directory for -o)")


# ---------------------------------------------------------------------------------------------
# Output

def fmt_pct(new, ref):
    return f"{100.0 * (new / ref - 1.0):+.1f}%" if ref else "n/a"


def report(src, spec, table, uniform, measured, c, lo, hi, T, measure="n90"):
    C = spec["C"]
    lines = [f"measure: {measure}: r_l = median over the layer's heads of {MEASURES[measure][2]}",
             f"source: {src} (L {spec['L']}, C {C}); rule d_l = clamp(2^ceil(log2({c:g} * r_l)), "
             f"{lo}, {hi}) (doc/sd_tools.md 'Cascade-allocated d_head'), r_l of S (S-D), G (S's mean gradient) or R "
             f"(standard), {table[0][0]} heads per layer",
             f"layer  measured         {'r_l ' + measure:>8s}  of  minimal  prescribed"]
    for l, (m, p) in enumerate(zip(spec["layers"], table)):
        lines.append(f"{l:5d}  {m['n_head']:3d} x {m['head_size']:4d} {m['kind']:<6s} {m['rank']:8.3f}  "
                     f"{m['family']:>2s}  {'yes' if m['minimal'] else 'no':<7s}  {p[0]:3d} x {p[1]:4d} {p[2]}")
    n_min = sum(m["minimal"] for m in spec["layers"])
    lines.append(f"minimal rank (sd_spectrum: median head erank < 2.5): {n_min} of {spec['L']} layers")
    sd = spec["opts"].get("sd_scalar_d", 0)
    P = [attention_params(C, t, sd) for t in (table, uniform, measured)]
    F = [attention_flops(C, t, T) for t in (table, uniform, measured)]
    ud = uniform[0][1]
    lines.append(f"attention parameters: prescribed {P[0]:,}, uniform ({uniform[0][0]} x {ud}) {P[1]:,} "
                 f"({fmt_pct(P[0], P[1])}), measured model {P[2]:,} ({fmt_pct(P[0], P[2])})")
    lines.append(f"attention FLOPs per token at T {T}: prescribed {F[0]:,}, uniform {F[1]:,} "
                 f"({fmt_pct(F[0], F[1])}), measured model {F[2]:,} ({fmt_pct(F[0], F[2])})")
    return "\n".join(lines) + "\n", P, F


def options_text(opts, has_sd):
    """The measured model's options as trainer flags; the S-D ones only for a table with S-D layers."""
    names = (("use_ln", "-ln"),) + ((("sd_scalar_d", "-sd_scalar_d"), ("sd_d_sign", "-sd_sign")) if has_sd else ())
    return " ".join(f"{flag} {opts[k]}" for k, flag in names if k in opts)


def table_file(src, entries, c, lo, hi, kind, linear_plateau, opts, desc, has_sd, measure="n90"):
    text = (f"# layer table prescribed by sd_attention/prescribe.py from the S-D cascade of {src}\n"
            f"# rule (doc/sd_tools.md 'Cascade-allocated d_head'): d_l = clamp(2^ceil(log2(c * r_l)), {lo}, {hi}), c = {c:g}, "
            f"--measure {measure}: r_l = median over the layer's heads of {MEASURES[measure][2]} (S for "
            f"S-D heads, R for standard ones); head count fixed; --kind {kind} --linear-plateau {linear_plateau}\n")
    if desc:
        text += f"# train with: ./train_gpt2 -e {desc} -layers THIS_FILE {options_text(opts, has_sd)}".rstrip() + "\n"
    elif options_text(opts, has_sd):
        text += f"# the measured model's options: {options_text(opts, has_sd)}\n"
    return text + entries + "\n"


def main(argv=None):
    p = Parser(allow_abbrev=False, description="the S-D cascade's prescription: a measured checkpoint -> a layer table "
               "with head sizes clamp(2^ceil(log2(c * r)), min, max), r the routing rank by --measure (doc/sd_tools.md 'Cascade-allocated d_head'; "
               "doc/sd_tools.md)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", help="model checkpoint: runs ./sd_spectrum -e FILE -json on it")
    src.add_argument("--spectrum", help="./sd_spectrum -json output of the checkpoint")
    p.add_argument("--measure", choices=tuple(MEASURES), default="n90",
                   help="r_l: n90 (default: 2 x the planes at 90%% energy of S), grad (of S's mean gradient, "
                        "from sd_spectrum -grad_batches), erank (the former rule)")
    p.add_argument("-c", "--c", type=float, default=DEFAULT_C, help="the constant c (> 0; default 2)")
    p.add_argument("--min-head", type=int, default=DEFAULT_MIN, help="smallest head size, a power of two (default 8)")
    p.add_argument("--max-head", type=int, default=DEFAULT_MAX, help="largest head size, a power of two (default 64)")
    p.add_argument("--kind", choices=("keep", "sd", "mha"), default="keep",
                   help="kind of every prescribed layer (keep: the measured layer's)")
    p.add_argument("--linear-plateau", type=int, choices=(0, 1), default=0,
                   help="1: layers at minimal rank become linear (sd -> sdlin, mha -> lin)")
    p.add_argument("--heads", type=int, default=None,
                   help="heads per layer (default: the measured model's base head count)")
    p.add_argument("--seq-len", type=int, default=None,
                   help="T of the FLOP count (default: the checkpoint's maxT)")
    p.add_argument("-o", default=None, help="write the layer table here (NAME.tmp, fsync, rename)")
    try:
        args = p.parse_args(argv)
        if args.checkpoint is None and args.spectrum is None:
            raise InputError("--checkpoint or --spectrum: expected one of them")
        if not (args.c > 0 and math.isfinite(args.c)):
            raise InputError(f"--c: {args.c:g}: expected a finite number > 0")
        power_of_two("--min-head", args.min_head)
        power_of_two("--max-head", args.max_head)
        if args.min_head > args.max_head:
            raise InputError(f"--min-head: {args.min_head}: expected at most --max-head {args.max_head}")
        if args.heads is not None and args.heads < 1:
            raise InputError(f"--heads: {args.heads}: expected an integer >= 1")
        if args.seq_len is not None and args.seq_len < 1:
            raise InputError(f"--seq-len: {args.seq_len}: expected an integer >= 1")
        check_output(args.o)
        with tempfile.TemporaryDirectory(prefix="prescribe.") as tmp:
            if args.checkpoint is not None:
                if args.measure == "grad":
                    raise InputError("--measure grad: expected --spectrum with the JSON of ./sd_spectrum "
                                     "-grad_batches N -j SHARDS (--checkpoint does not run the gradient)")
                spec = read_spectrum(run_spectrum(args.checkpoint, tmp), args.measure)
                ckpt, src_name = args.checkpoint, args.checkpoint
            else:
                spec = read_spectrum(args.spectrum, args.measure)
                ckpt = spec["model"]
                src_name = f"{ckpt or '(unnamed)'} (spectrum {args.spectrum})"
        where = args.checkpoint or args.spectrum
        hdr = read_header(ckpt) if ckpt else None
        if hdr is not None and (hdr["L"], hdr["C"]) != (spec["L"], spec["C"]):
            raise InputError(f"{ckpt}: header L {hdr['L']}, C {hdr['C']}: expected the spectrum's "
                             f"L {spec['L']}, C {spec['C']}")
        heads = args.heads
        if heads is None:
            counts = sorted({m["n_head"] for m in spec["layers"]})
            if hdr is not None:
                heads = hdr["heads"]
            elif len(counts) == 1:
                heads = counts[0]
            else:
                raise InputError(f"{where}: the layers have {', '.join(map(str, counts))} heads and the "
                                 f"checkpoint's header (base heads) is not readable: expected --heads H")
        T = args.seq_len if args.seq_len is not None else hdr["maxT"] if hdr is not None else None
        if T is None:
            raise InputError(f"{where}: the checkpoint's header (maxT) is not readable: expected "
                             f"--seq-len T for the FLOP count")
        if spec["C"] % heads:
            raise InputError(f"--heads: {heads}: expected a divisor of C = {spec['C']} (the uniform "
                             f"model of the same shape has C / H-wide heads)")
        if heads * args.max_head > MAX_ATTN_WIDTH:
            raise InputError(f"--max-head: {args.max_head}: {heads} heads x {args.max_head} exceeds the "
                             f"attention width {MAX_ATTN_WIDTH}")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    C = spec["C"]
    table = prescribe(spec["layers"], args.c, args.min_head, args.max_head, heads, args.kind,
                      args.linear_plateau)
    uniform = [(heads, C // heads, k) for _, _, k in table]
    measured = [(m["n_head"], m["head_size"], m["kind"]) for m in spec["layers"]]
    text, _, _ = report(src_name, spec, table, uniform, measured, args.c, args.min_head, args.max_head, T,
                        args.measure)
    entries = run_length(table)
    sys.stdout.write(text)
    print(f"table: {entries}")
    desc = f"L{spec['L']}C{C}H{heads}T{T}" if hdr is not None else None
    if args.o:
        write_atomic(args.o, table_file(src_name, entries, args.c, args.min_head, args.max_head, args.kind,
                                        args.linear_plateau, spec["opts"], desc,
                                        any(KINDS[k][1] for _, _, k in table), args.measure))
        print(f"wrote {args.o}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
