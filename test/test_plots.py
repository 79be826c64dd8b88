"""test/test_plots.py: scripts/plot_logs.py and prism/plot_attn_distance.py on small synthetic
inputs.

- The main.log parser: train/val/eval records of llm.c's format (doc/formats.md "main.log and stdout"), eval_<task>
  records, older trl-only lines, and a resumed run whose repeated steps replace the earlier ones.
- Each script writes a PNG that exists, is a PNG, and shows its curves: each curve's colour (the
  first N of matplotlib's colour cycle, one per run or model) covers at least 300 pixels. Axes,
  labels, grid and gray reference lines are black or gray, and one legend entry is about 60
  pixels, so the negative control, the script's own figure with its curves not drawn (Axes.plot
  made a no-op while the script runs), fails this check. Each prints "wrote <file>" and leaves no
  .tmp file.
- Malformed inputs (a bad line in main.log, a non-number or a missing column in a CSV, a missing
  run) are one error line naming the file (and line), with a non-zero exit.
"""
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from harness import check, finish  # noqa: E402

PY = os.environ.get("PYTHON", sys.executable)
TMP = os.path.join(ROOT, "build", "tmp_plots")


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(*args):
    p = subprocess.run([PY, *args], cwd=ROOT, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


# A drawn curve covers over a thousand pixels here (measured 1067 to 4443); a legend entry alone ~60.
CURVE_PIXELS = 300


def curves_png(path, n_curves):
    """(ok, description): a PNG in which each of the first n_curves colours of matplotlib's colour
    cycle (those the scripts give their runs or models) covers >= CURVE_PIXELS pixels (each
    channel within 0.08 of the colour: the opaque part of the lines and markers)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    from matplotlib.colors import to_rgb
    if not os.path.isfile(path):
        return False, "missing"
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            return False, "not a PNG"
    img = mpimg.imread(path)[..., :3]
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][:n_curves]
    counts = [int((np.abs(img - np.array(to_rgb(c))).max(-1) < 0.08).sum()) for c in cycle]
    return min(counts) >= CURVE_PIXELS, f"pixels per curve colour {counts}"


def without_curves(script, argv):
    """Run the script's main(argv) in this process with Axes.plot a no-op: the script's
    own layout (axes, titles, grid, legend, gray reference lines) without its curves."""
    import contextlib
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.axes
    import warnings
    plot = matplotlib.axes.Axes.plot
    matplotlib.axes.Axes.plot = lambda self, *args, **kwargs: []
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # "No artists with labels found to put in legend"
            return load(script).main(argv)
    finally:
        matplotlib.axes.Axes.plot = plot


def synthetic_logs():
    """Three runs: plain; with evals; resumed (steps 6..8 logged twice, the second time lower)."""
    def train(s, loss):
        return f"s:{s} trl:{loss:.4f} lr:0.000600 norm:{1.0 + 0.1 * s:.2f}\n"
    a = "".join(train(s, 10.0 - 0.5 * s) for s in range(10))
    a += "s:0 tel:10.9000\ns:5 tel:8.1000\ns:10 tel:5.9000\n"
    b = "".join(train(s, 10.2 - 0.45 * s) for s in range(10))
    b += "s:0 tel:11.0000\ns:0 eval:0.2500\ns:0 eval_piqa:0.5100\ns:10 tel:6.2000\n"
    b += "s:10 eval:0.2700\ns:10 eval_piqa:0.5400\n"
    c = "".join(train(s, 10.0 - 0.4 * s) for s in range(9))       # crashed after step 8
    c += "s:0 tel:10.9\ns:5 tel:8.5\n"
    c += "s:5 tel:8.4000\n" + "".join(train(s, 9.0 - 0.4 * s) for s in range(5, 10))  # resumed at 5
    c += "s:10 tel:6.1000\n"
    old = "s:0 trl:10.8000\ns:1 trl:10.1000\ns:1 tel:10.5000\n"    # older llm.c: trl alone
    return a, b, c, old


def test_parser(pl, paths):
    a = pl.parse_main_log(paths["a"])
    check(len(a["train"]) == 10 and a["train"][3] == (3, 8.5) and a["val"][-1] == (10, 5.9)
          and a["lr"][0] == (0, 0.0006) and a["norm"][2] == (2, 1.2),
          "parser: 10 train points (trl, lr, norm) and 3 val points")
    b = pl.parse_main_log(paths["b"])
    check(b["eval"] == [(0, 0.25), (10, 0.27)] and b["eval_piqa"] == [(0, 0.51), (10, 0.54)],
          "parser: eval and eval_piqa series")
    c = pl.parse_main_log(paths["c"])
    steps = [s for s, _ in c["train"]]
    check(steps == list(range(10)) and c["train"][6] == (6, 9.0 - 2.4) and
          c["val"] == [(0, 10.9), (5, 8.4), (10, 6.1)],
          "parser: the resumed run's repeated steps 5..8 replace the crashed run's")
    old = pl.parse_main_log(paths["old"])
    check(old["train"] == [(0, 10.8), (1, 10.1)] and "lr" not in old,
          "parser: older trl-only train lines")


def test_plot_logs(paths):
    out = os.path.join(TMP, "loss.png")
    args = [os.path.dirname(paths["a"]), os.path.dirname(paths["b"]), paths["c"], "--baseline", "3.28:target"]
    rc, so, se = run("scripts/plot_logs.py", *args, "-o", out)
    ok, desc = curves_png(out, 3)
    check(rc == 0 and ok, f"plot_logs.py: 3 runs (one with evals) -> a PNG with each run's curves ({desc}); {se.strip()}")
    check(f"wrote {out}" in so.splitlines(), "plot_logs.py prints where it wrote the PNG")
    check(not os.path.exists(out + ".tmp"), "plot_logs.py leaves no .tmp file")
    empty = os.path.join(TMP, "loss_no_curves.png")
    rc = without_curves("scripts/plot_logs.py", args + ["-o", empty])
    ok, desc = curves_png(empty, 3)
    check(rc == 0 and not ok, f"negative control: plot_logs.py's figure without its curves fails the check ({desc})")


def test_missing_modules(paths):
    """An interpreter without the dependencies (here the same one with -S: no site-packages) gets one
    line naming it, the interpreter that has them and the set-up command, not a traceback."""
    for script, module in (("scripts/plot_logs.py", "matplotlib"), ("sd_attention/plot_cascade.py", "matplotlib"),
                           ("train_gpt2.py", "numpy"), ("dev/data/tinyshakespeare.py", "numpy")):
        args = [os.path.dirname(paths["a"]), "-o", os.path.join(TMP, "nomod.png")] if script.endswith("plot_logs.py") else ["--help"]
        p = subprocess.run([PY, "-S", script, *args], cwd=ROOT, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        check(p.returncode != 0 and len(lines) == 1 and f"{module} is not installed for" in lines[0]
              and "/usr/bin/python3" in lines[0] and "make deps" in lines[0], f"{script} without {module}: one line naming make deps ({p.stderr.strip()[:160]})")


def test_plot_logs_errors(paths):
    bad = os.path.join(TMP, "bad", "main.log")
    write(bad, "s:0 trl:10.0 lr:0.1 norm:1.0\ns:0 tel:10.5\ns:1 trl:9.0 lr:0.1\nstep 2 loss 3\n")
    rc, so, se = run("scripts/plot_logs.py", os.path.dirname(bad), "-o", os.path.join(TMP, "x.png"))
    lines = se.strip().splitlines()
    check(rc != 0 and len(lines) == 1 and lines[0].startswith(f"error: {bad}:4: expected 's:<step>"),
          f"plot_logs.py: malformed line 4 is one error line: {se.strip()}")
    write(bad, "s:0 trl:10.0 lr:0.1 norm:1.0\ns:1 trl:nine lr:0.1 norm:1.0\n")
    rc, so, se = run("scripts/plot_logs.py", bad, "-o", os.path.join(TMP, "x.png"))
    check(rc != 0 and se.strip() == f"error: {bad}:2: trl: expected a number, got 'nine'",
          f"plot_logs.py: a non-number is one error line: {se.strip()}")
    write(bad, "s:0 trl:10.0 lr:0.1 norm:1.0\ns:1 foo:3.0\n")
    rc, so, se = run("scripts/plot_logs.py", bad, "-o", os.path.join(TMP, "x.png"))
    check(rc != 0 and len(se.strip().splitlines()) == 1 and f"{bad}:2:" in se and "foo" in se,
          f"plot_logs.py: an unknown key is one error line: {se.strip()}")
    rc, so, se = run("scripts/plot_logs.py", os.path.join(TMP, "nowhere"))
    check(rc != 0 and len(se.strip().splitlines()) == 1 and "no main.log" in se,
          f"plot_logs.py: a missing run is one error line: {se.strip()}")
    check(not os.path.exists(os.path.join(TMP, "x.png")), "no PNG is written after an error")


CSV_HEADER = ("model,layer,head,n_head,head_size,kind,D,D_norm,sink,D_nosink,median,entropy,"
              "entropy_norm,T,sequences,val,note\n")


def csv_rows(model, Ds, T=64, seqs=8, skip=()):
    out = ""
    for l, D in enumerate(Ds):
        if l in skip:
            out += f"{model},{l},mean,4,16,lin,,,,,,,,{T},{seqs},val.bin,skipped: no matrix\n"
            continue
        vals = f"{D},{D / T:.4f},0.1,{D - 1},{D - 2},2.0,0.7"
        out += f"{model},{l},mean,4,16,mha,{vals},{T},{seqs},val.bin,\n"
        for k in range(2):
            out += f"{model},{l},{k},4,16,mha,{vals},{T},{seqs},val.bin,\n"
    return out


def test_plot_attn():
    both = os.path.join(TMP, "pu.csv")
    write(both, CSV_HEADER + csv_rows("p.bin", [5, 9, 14, 16]) + csv_rows("u.bin", [7, 10, 12, 15]))
    out = os.path.join(TMP, "attn.png")
    rc, so, se = run("prism/plot_attn_distance.py", both, "-o", out, "--stats", "D,D_norm,entropy_norm")
    ok, desc = curves_png(out, 2)
    check(rc == 0 and ok, f"plot_attn_distance.py: a -e2 CSV -> a PNG with both models' curves ({desc}); {se.strip()}")
    empty = os.path.join(TMP, "attn_no_curves.png")
    rc_empty = without_curves("prism/plot_attn_distance.py", [both, "-o", empty, "--stats", "D,D_norm,entropy_norm"])
    ok, desc = curves_png(empty, 2)
    check(rc_empty == 0 and not ok,
          f"negative control: plot_attn_distance.py's figure without its curves fails the check ({desc})")
    check("Delta D_l (p - u): 0:-2.000 1:-1.000 2:+2.000 3:+1.000" in so,
          "plot_attn_distance.py prints Delta D_l = first minus second")
    check(f"wrote {out}" in so.splitlines() and not os.path.exists(out + ".tmp"),
          "plot_attn_distance.py prints where it wrote the PNG, no .tmp left")
    one, two = os.path.join(TMP, "p.csv"), os.path.join(TMP, "u.csv")
    write(one, CSV_HEADER + csv_rows("p.bin", [5, 9, 14, 16], skip=(1,)))
    write(two, CSV_HEADER + csv_rows("u.bin", [7, 10, 12, 15]))
    rc, so, se = run("prism/plot_attn_distance.py", one, two, "-o", out)
    check(rc == 0 and "Delta D_l (p - u): 0:-2.000 1:- 2:+2.000" in so,
          f"two single-model CSVs on the same tokens: Delta, with the skipped layer as a gap: {so.strip()}")
    write(two, CSV_HEADER + csv_rows("u.bin", [7, 10, 12, 15], seqs=16))
    rc, so, se = run("prism/plot_attn_distance.py", one, two, "-o", out)
    check(rc == 0 and "no Delta row: the two CSVs were measured on different tokens" in so,
          "two CSVs on different tokens: no Delta, and the script says why")


def test_plot_attn_errors():
    bad = os.path.join(TMP, "bad.csv")
    write(bad, CSV_HEADER + csv_rows("p.bin", [5, 9]).replace("9,0.1406", "nine,0.1406", 1))
    rc, so, se = run("prism/plot_attn_distance.py", bad, "-o", os.path.join(TMP, "y.png"))
    check(rc != 0 and se.strip() == f"error: {bad}:5: D: expected a number or empty, got 'nine'",
          f"plot_attn_distance.py: a non-number is one error line: {se.strip()}")
    write(bad, "model,layer,head,D\np.bin,0,mean,3.0\n")
    rc, so, se = run("prism/plot_attn_distance.py", bad, "-o", os.path.join(TMP, "y.png"))
    check(rc != 0 and len(se.strip().splitlines()) == 1 and se.startswith(f"error: {bad}:1: missing column"),
          f"plot_attn_distance.py: missing columns are one error line: {se.strip()}")
    rc, so, se = run("prism/plot_attn_distance.py", bad, "--stats", "D,foo")
    check(rc != 0 and se.strip().startswith("error: --stats: 'foo' is not one of"),
          f"plot_attn_distance.py: an unknown statistic is one error line: {se.strip()}")
    check(not os.path.exists(os.path.join(TMP, "y.png")), "no PNG is written after an error")


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    a, b, c, old = synthetic_logs()
    paths = {k: os.path.join(TMP, k, "main.log") for k in ("a", "b", "c", "old")}
    for k, text in zip(("a", "b", "c", "old"), (a, b, c, old)):
        write(paths[k], text)
    test_parser(load("scripts/plot_logs.py"), paths)
    test_plot_logs(paths)
    test_plot_logs_errors(paths)
    test_missing_modules(paths)
    test_plot_attn()
    test_plot_attn_errors()
    finish()


if __name__ == "__main__":
    main()
