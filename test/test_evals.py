"""test/test_evals.py: the zero-shot eval pipeline and the FineWeb writer (doc/evals.md).

Sections (all run by default; name some to run only those):
  writers    the five eval writers on the offline copies in ../shared/data/eval: item counts
             (10,042 / 1,838 / 2,376 / 1,267 / 5,153), versions, and the rendering of example 0
             against a direct tokenization of the raw text
  format     llm.c's version-1 byte layout, built independently here from doc/formats.md "Eval files and scoring", on the
             hand-made HellaSwag fixtures (raw jsonl and 6-line text forms give identical files);
             version-2 round trip; the Python reader's one-line errors
  agreement  eval_gpt2 (C) against the PyTorch model of train_gpt2.py on the first examples of
             every task, same random-init checkpoint: per-option mean losses within 1e-4 relative,
             identical greedy hits (LAMBADA has none for a random model, so also on greedy_own.bin:
             the model's own argmax continuations, 6 hits of 12), the JSON's accuracies those of
             the scores; flipped predictions
             and near-ties are reported, not checked (any flip lies within the loss tolerance,
             so a check of them could never fail on its own). Negative control: the Python scores of
             a model with another seed must miss the 1e-4 tolerance. Also: -b 2 and -b 8 pack the
             same WinoGrande examples differently and must give the same scores (1e-6 relative).
  cli        eval_gpt2's one-line errors: missing file (naming -dir and the working directory, also
             when run from another folder), truncated file, wrong magic, example longer
             than -t, too few rows for the options, unknown task, no model, -t above maxT; --help
  trainer    train_gpt2 -h 1 on the tiny checkpoint: prints "HellaSwag: k/n = f" at the val steps
             and the last step, logs "s:%d eval:%.4f", and its number equals eval_gpt2's acc_norm
             on the checkpoint of the same step; likewise -ht lambada (fed greedy_own.bin, so that
             the accuracy is not 0) equals eval_gpt2's acc; with the file missing, one message and the run
             completes, the message naming the working directory; -b 2 is one error line
  fineweb    dev/data/fineweb.py on the fixture test/fixtures/fineweb (shard size 40): shard 0 is
             val, names as llm.c's, every shard but the last full, an EOT before every document,
             a document split across a boundary, the concatenation equal to a direct tokenization;
             same tokens with 1 and 2 processes and with -t edu names; one-line errors

Run: /usr/bin/python3 test/test_evals.py [section ...]   (needs build/: make eval_gpt2 train_gpt2)
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA_SRC = os.path.join(REPO, "dev", "data")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401

from harness import check, finish  # noqa: E402
from dev.data import data_common  # noqa: E402
from dev.data import eval_common  # noqa: E402
from dev.data.gpt2_bpe import get_encoder  # noqa: E402

TMP = os.path.join(REPO, "build", "tmp_evals")
DATA = os.path.join(TMP, "data")  # a dev/data-like tree: <task>/<task>_<split>.bin
SHARED_EVAL = os.path.join(data_common.shared_data_dir(), "eval")
FIXTURES = os.path.join(HERE, "fixtures")
TS = os.path.join(REPO, "dev", "data", "tinyshakespeare")
EVAL_GPT2 = os.path.join(REPO, "eval_gpt2")
TRAIN_GPT2 = os.path.join(REPO, "train_gpt2")
MODEL = os.path.join(TMP, "model.bin")            # L2C64H2T256, random init, seed 7
MODEL_OTHER = os.path.join(TMP, "model_other.bin")  # the same shape, seed 8: negative control

TASKS = {  # name: (writer, split, items, version, scoring)
    "hellaswag": ("hellaswag.py", "val", 10042, 1, "choice"),
    "piqa": ("piqa.py", "val", 1838, 2, "choice"),
    "arc_easy": ("arc_easy.py", "test", 2376, 2, "choice"),
    "winogrande": ("winogrande.py", "val", 1267, 2, "choice"),
    "lambada": ("lambada.py", "test", 5153, 2, "greedy"),
}
# first examples of each task in the C-vs-PyTorch comparison; EVAL_AGREE_N=200 for a longer run
SUBSET = int(os.environ.get("EVAL_AGREE_N", "12"))
AGREE_REL = 1e-4  # per-option mean loss, C vs PyTorch (fp32 both; observed ~1e-7)

_enc = None


def enc():
    global _enc
    if _enc is None:
        _enc = get_encoder()
    return _enc


def run(cmd, cwd=None, env=None, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def task_path(task, root=DATA):
    _, split, _, _, _ = TASKS[task]
    return os.path.join(root, task, f"{task}_{split}.bin")


def one_error_line(rc, err, *needles):
    """Non-zero exit, exactly one stderr line, starting 'error: ' and containing every needle."""
    lines = err.strip().split("\n")
    return rc != 0 and len(lines) == 1 and lines[0].startswith("error: ") and all(n in lines[0] for n in needles)


# ---------------------------------------------------------------------------------------------
# writers

def write_all_tasks():
    """Write the five files into DATA (once per run of this test)."""
    ok = True
    for task, (writer, split, _, _, _) in TASKS.items():
        rc, out, err = run([sys.executable, os.path.join(DATA_SRC, writer), "--out", task_path(task)])
        ok &= check(rc == 0 and os.path.isfile(task_path(task)),
                    f"{writer} writes {os.path.relpath(task_path(task), REPO)} ({out.strip().splitlines()[-1] if rc == 0 else err.strip()})")
    return ok


def test_writers():
    if not write_all_tasks():
        return
    e = enc()
    loaded = {}
    for task, (_, _, items, version, scoring) in TASKS.items():
        info, ex = eval_common.read_evalfile(task_path(task))
        loaded[task] = ex
        check(info["num_examples"] == items and len(ex) == items and info["version"] == version
              and info["scoring"] == scoring,
              f"{task}: {len(ex)} examples (expected {items}), version {info['version']}, {info['scoring']}")
    import bz2
    with bz2.open(os.path.join(SHARED_EVAL, "hellaswag_val_full.txt.bz2"), "rt", encoding="utf-8") as f:
        hs = [next(f).rstrip("\n") for _ in range(6)]
    h0 = loaded["hellaswag"][0]
    check(h0.contexts == [e.encode(hs[0])] and h0.completions == [e.encode(" " + x) for x in hs[2:6]]
          and h0.label == int(hs[1]), "hellaswag example 0: context line, then ' ' + each ending; label line")

    def first_json(name):
        with open(os.path.join(SHARED_EVAL, name), encoding="utf-8") as f:
            return json.loads(f.readline())
    p = first_json("piqa_valid.jsonl")
    with open(os.path.join(SHARED_EVAL, "piqa_valid-labels.lst")) as f:
        labels = [int(x) for x in f.read().split()]
    p0 = loaded["piqa"][0]
    check(p0.contexts == [e.encode(p["goal"])] and p0.completions == [e.encode(" " + p["sol1"]), e.encode(" " + p["sol2"])]
          and [x.label for x in loaded["piqa"]] == labels, "piqa: goal, then ' ' + sol1/sol2; labels from the .lst file")
    a = first_json("arc_easy_test.jsonl")
    a0 = loaded["arc_easy"][0]
    check(a0.contexts == [e.encode(a["query"] + "\nAnswer:")] and a0.completions == [e.encode(" " + c) for c in a["choices"]]
          and a0.label == a["gold"], "arc_easy: query + '\\nAnswer:', then ' ' + each choice; gold")
    w = first_json("winogrande_dev.jsonl")
    w0 = loaded["winogrande"][0]
    check(w0.contexts == [e.encode(c) for c in w["context_options"]] and w0.completions == [e.encode(" " + w["continuation"])]
          and w0.label == w["gold"], "winogrande: one context per option, one shared ' ' + continuation (partial scoring)")
    lm = first_json("lambada_openai.jsonl")
    l0 = loaded["lambada"][0]
    check(l0.contexts == [e.encode(lm["context"])] and l0.completions == [e.encode(" " + lm["continuation"])]
          and l0.label == 0, "lambada: context, then ' ' + the last word; one row")
    rc, _, err = run([sys.executable, os.path.join(DATA_SRC, "piqa.py"), "--input", os.path.join(TMP, "nope.jsonl"),
                      "--out", os.path.join(TMP, "nope.bin")])
    check(one_error_line(rc, err, "nope.jsonl", "not found"), f"a missing --input is one error line: {err.strip()}")


# ---------------------------------------------------------------------------------------------
# format

def v1_bytes_by_hand(items):
    """doc/formats.md "Eval files and scoring", written out independently of eval_common: (ctx, endings, label) items."""
    e = enc()
    examples, longest = [], 0
    for idx, (ctx, endings, label) in enumerate(items):
        words = [idx, label, 4]
        c = e.encode(ctx)
        words += [len(c)] + c
        for end in endings:
            t = e.encode(" " + end)
            words += [len(t)] + t
        nbytes = 2 * (len(words) + 2)  # + delimiter and the byte count itself
        longest = max(longest, nbytes)
        examples.append(struct.pack(f"<{len(words) + 2}H", 65535, nbytes, *words))
    header = struct.pack("<4i", 20240522, 1, len(items), longest) + bytes(4 * 252)
    return header + b"".join(examples)


def test_format():
    os.makedirs(TMP, exist_ok=True)
    raw = os.path.join(FIXTURES, "eval", "hellaswag_raw.jsonl")
    text = os.path.join(FIXTURES, "eval", "hellaswag_text.txt")
    outs = {}
    for name, src in (("raw", raw), ("text", text)):
        outs[name] = os.path.join(TMP, f"hs_fixture_{name}.bin")
        rc, _, err = run([sys.executable, os.path.join(DATA_SRC, "hellaswag.py"), "--input", src, "--out", outs[name]])
        check(rc == 0, f"hellaswag.py reads the {name} fixture {err.strip()}")
    with open(raw) as f:
        items = [(o["ctx"], o["endings"], o["label"]) for o in map(json.loads, f)]
    expected = v1_bytes_by_hand(items)
    got = open(outs["raw"], "rb").read()
    check(got == expected, f"version-1 bytes equal doc/formats.md 'Eval files and scoring' built by hand ({len(got)} vs {len(expected)} bytes)")
    check(open(outs["text"], "rb").read() == got, "the 6-line text form of the same items gives the identical file")

    # version 2 round trip: 2-5 options, per-option contexts, shared completions, greedy
    rng = np.random.default_rng(5)

    def seq():
        return [int(t) for t in rng.integers(0, 50257, size=int(rng.integers(1, 12)))]
    choice = []
    for i in range(40):
        k = int(rng.integers(2, 6))
        kind = i % 3  # shared context / per-option contexts + shared completion / both per option
        ctxs = [seq()] if kind == 0 else [seq() for _ in range(k)]
        comps = [seq()] if kind == 1 else [seq() for _ in range(k)]
        choice.append(eval_common.Example(ctxs, comps, int(rng.integers(0, k))))
    greedy = [eval_common.Example([seq()], [seq()], 0) for _ in range(10)]
    for name, exs, scoring in (("choice", choice, "choice"), ("greedy", greedy, "greedy")):
        path = os.path.join(TMP, f"v2_{name}.bin")
        eval_common.write_evalfile(path, exs, version=2, scoring=scoring, name=f"rt_{name}")
        info, back = eval_common.read_evalfile(path)
        same = all(a.contexts == b.contexts and a.completions == b.completions and a.label == b.label
                   for a, b in zip(exs, back))
        check(same and len(back) == len(exs) and info["scoring"] == scoring and info["name"] == f"rt_{name}"
              and info["max_rows"] == max(x.n_rows for x in exs),
              f"version 2 round trip ({name}, {len(exs)} examples): tokens, labels, scoring, name")

    # the Python reader's errors (the C reader's are in test_evalloader.c)
    good = open(os.path.join(TMP, "v2_choice.bin"), "rb").read()

    def bad(name, data, *needles):
        path = os.path.join(TMP, f"bad_{name}.bin")
        with open(path, "wb") as f:
            f.write(data)
        try:
            eval_common.read_evalfile(path)
            msg = ""
        except ValueError as e:
            msg = str(e)
        check(msg and "\n" not in msg and path in msg and all(n in msg for n in needles), f"Python reader: {name}: {msg}")
    bad("truncated", good[:-6], "example 39", "truncated")
    bad("magic", struct.pack("<i", 20240520) + good[4:], "header[0] magic 20240520")
    bad("version", good[:4] + struct.pack("<i", 7) + good[8:], "header[1] version 7")
    w = bytearray(good)
    second = 1024 + struct.unpack_from("<H", good, 1026)[0]  # example 0's example_bytes
    struct.pack_into("<H", w, second + 4, 5)
    bad("order", bytes(w), "example 1: example_index 5", "expected 1")
    try:
        eval_common.write_evalfile(os.path.join(TMP, "x.bin"), [eval_common.Example([[1], [2]], [[3]], 0)], version=1)
        msg = ""
    except ValueError as e:
        msg = str(e)
    check("version 1 holds one context and 4 completions" in msg,
          f"the writer refuses a version-1 example it cannot hold: {msg}")


# ---------------------------------------------------------------------------------------------
# agreement

_models_written = False


def make_models():
    """The two random-init checkpoints, written fresh once per run (never a stale file)."""
    global _models_written
    if _models_written:
        return
    for path, seed in ((MODEL, 7), (MODEL_OTHER, 8)):
        rc, _, err = run([sys.executable, os.path.join(REPO, "train_gpt2.py"), "--model", "L2C64H2T256",
                          "--seed", str(seed), "--write_model", path])
        check(rc == 0, f"train_gpt2.py writes {os.path.relpath(path, REPO)} {err.strip()}")
    _models_written = True


def read_scores(path):
    """The -scores TSV: {task: {(example, option): (n_tok, sum_loss, mean_loss, all_argmax)}}."""
    out = {}
    with open(path) as f:
        next(f)
        for line in f:
            t, i, r, _, n, s, m, hit = line.rstrip("\n").split("\t")
            out.setdefault(t, {})[(int(i), int(r))] = (int(n), float(s), float(m), int(hit))
    return out


def compare(task, c_rows, py_scores, scoring):
    """Worst relative difference of the mean losses, greedy mismatches, and per-example
    (c_pred_sum, c_pred_mean, py_pred_sum, py_pred_mean, gap_sum, gap_mean, label)."""
    worst, worst_abs, hit_mismatch, preds = 0.0, 0.0, 0, []
    for i, rows in enumerate(py_scores):
        c_sum, c_mean = [], []
        for r, (s, n, hit) in enumerate(rows):
            cn, cs, cm, chit = c_rows[(i, r)]
            assert cn == n, (task, i, r)
            worst = max(worst, abs(cm - s / n) / abs(s / n))
            worst_abs = max(worst_abs, abs(cs - s), abs(cm - s / n))
            hit_mismatch += scoring == "greedy" and bool(chit) != hit
            c_sum.append(cs)
            c_mean.append(cm)

        def gap(v):
            srt = sorted(v)
            return srt[1] - srt[0] if len(srt) > 1 else float("inf")
        ps, pm = eval_common.predictions(rows)
        preds.append((eval_common.first_argmin(c_sum), eval_common.first_argmin(c_mean), ps, pm,
                      gap([s for s, _, _ in rows]), gap([s / n for s, n, _ in rows])))
    return worst, worst_abs, hit_mismatch, preds


def test_agreement():
    make_models()
    for task in TASKS:
        if not os.path.isfile(task_path(task)):
            write_all_tasks()
            break
    import torch
    import train_gpt2
    scores_tsv, out_json = os.path.join(TMP, "scores.tsv"), os.path.join(TMP, "out.json")
    tasks = ",".join(TASKS)
    worst_n = SUBSET
    rc, out, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", tasks, "-dir", DATA, "-n", str(worst_n), "-b", "8",
                        "-scores", scores_tsv, "-json", out_json])
    print(out)
    if not check(rc == 0, f"eval_gpt2 -tasks {tasks} -n {worst_n} -b 8 runs {err.strip()}"):
        return
    c_scores = read_scores(scores_tsv)
    report = json.load(open(out_json))["tasks"]
    model = train_gpt2.load_model(MODEL)
    other = train_gpt2.load_model(MODEL_OTHER)
    summary = []
    for task, (_, _, _, _, scoring) in TASKS.items():
        _, ex = eval_common.read_evalfile(task_path(task), limit=worst_n)
        py = eval_common.score_rows_torch(model, ex, scoring)
        worst, worst_abs, hit_mm, preds = compare(task, c_scores[task], py, scoring)
        check(worst <= AGREE_REL, f"{task}: per-option mean losses C vs PyTorch within {AGREE_REL:g} relative "
                                  f"(worst {worst:.2e}, {sum(len(r) for r in py)} options)")
        tie = 2 * worst_abs  # an argmin can flip only if its gap is below the two rows' errors
        if scoring == "greedy":
            check(hit_mm == 0, f"{task}: greedy hits identical ({hit_mm} mismatches; examples with hits: greedy_own below)")
            c_acc = sum(c_scores[task][(i, 0)][3] for i in range(len(ex))) / len(ex)
            py_acc = sum(r[0][2] for r in py) / len(ex)
            check(c_acc == py_acc == report[task]["acc"], f"{task}: acc C {c_acc:.4f} = PyTorch {py_acc:.4f} = JSON")
            py_ppl = float(np.exp(np.mean([r[0][0] for r in py])))
            check(abs(report[task]["ppl"] - py_ppl) <= 1e-4 * py_ppl,
                  f"{task}: continuation perplexity C {report[task]['ppl']:.4f} vs PyTorch {py_ppl:.4f} (1e-4 rel)")
            summary.append(f"{task}: worst rel {worst:.1e}, acc {c_acc:.4f}")
            continue
        # Flipped predictions are counted, not checked: a flip needs both options' losses to move by
        # the gap between them, so it always lies within `tie` of the loss check above, which already
        # bounds them (a flip check could never fail on its own).
        n_flip = sum(p[0] != p[2] or p[1] != p[3] for p in preds)
        near = sum(p[4] < tie or p[5] < tie for p in preds)
        labels = [x.label for x in ex]
        c_acc = np.mean([p[0] == y for p, y in zip(preds, labels)])
        c_norm = np.mean([p[1] == y for p, y in zip(preds, labels)])
        py_acc = np.mean([p[2] == y for p, y in zip(preds, labels)])
        py_norm = np.mean([p[3] == y for p, y in zip(preds, labels)])
        check(abs(c_acc - report[task]["acc"]) < 1e-6
              and ("acc_norm" not in report[task] or abs(report[task]["acc_norm"] - c_norm) < 1e-6),
              f"{task}: the JSON's acc {report[task]['acc']:.4f} and acc_norm are the scores' (C {c_acc:.4f} / "
              f"{c_norm:.4f}; PyTorch {py_acc:.4f} / {py_norm:.4f}, {n_flip} flipped, {near} near-ties)")
        check(("acc_norm" in report[task]) == (task != "winogrande"),
              f"{task}: acc_norm {'not reported (one shared continuation)' if task == 'winogrande' else 'reported (per-option completions)'}")
        summary.append(f"{task}: worst rel {worst:.1e}, {n_flip} flipped, {near} near-ties, acc {c_acc:.4f}, "
                       f"acc_norm {c_norm:.4f}")
    print("agreement: " + "; ".join(summary))

    # negative control: another model's scores must fail the same comparison
    _, ex = eval_common.read_evalfile(task_path("winogrande"), limit=4)
    worst, _, _, _ = compare("winogrande", c_scores["winogrande"], eval_common.score_rows_torch(other, ex), "choice")
    check(worst > AGREE_REL, f"negative control: a seed-8 model's scores miss the tolerance (worst {worst:.2e})")

    test_greedy_hits(model)

    # packing: -b 2 (one example per forward) and -b 8 (four) give the same scores
    tsv2 = os.path.join(TMP, "scores_b2.tsv")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "winogrande", "-dir", DATA, "-n", str(worst_n), "-b", "2",
                      "-scores", tsv2])
    b2 = read_scores(tsv2)["winogrande"] if rc == 0 else {}
    b8 = c_scores["winogrande"]
    d = max((abs(b2[k][2] - b8[k][2]) / b8[k][2] for k in b8), default=1.0) if b2 else 1.0
    check(rc == 0 and set(b2) == set(b8) and d <= 1e-6, f"winogrande with -b 2 vs -b 8: same scores (worst {d:.1e}) {err.strip()}")


_greedy_own = None


def greedy_own_file(model):
    """A greedy task a random model scores hits on (a random model never gets a LAMBADA word
    right): 2 greedy tokens of the PyTorch model's own argmax after each of 12 LAMBADA contexts
    (cut to their last 24 tokens), kept as they are for even examples (hits) and with the second
    token replaced for odd ones (misses). Contexts whose top-2 logit gap is below 1e-3 at either
    step are skipped (there rounding could legitimately pick another token). Written once per run
    to greedy_own.bin; returns (path, examples, expected hits [1, 0, 1, 0, ...])."""
    global _greedy_own
    if _greedy_own is not None:
        return _greedy_own
    import torch
    _, lam = eval_common.read_evalfile(task_path("lambada"), limit=40)
    exs, expect = [], []
    with torch.no_grad():
        for ex in lam:
            ctx = ex.contexts[0][-24:]
            seq, gaps = list(ctx), []
            for _ in range(2):
                logits, _ = model(torch.tensor([seq]))
                top = torch.topk(logits[0, -1], 2)
                gaps.append(float(top.values[0] - top.values[1]))
                seq.append(int(top.indices[0]))
            if min(gaps) < 1e-3:
                continue
            cont = seq[len(ctx):]
            if len(exs) % 2:
                cont = [cont[0], (cont[1] + 1) % 50257]
            exs.append(eval_common.Example([ctx], [cont], 0))
            expect.append(len(exs) % 2)  # 1 for the kept (even-index) ones
            if len(exs) == 12:
                break
    path = os.path.join(TMP, "greedy_own.bin")
    eval_common.write_evalfile(path, exs, version=2, scoring="greedy", name="greedy_own")
    _greedy_own = (path, exs, expect)
    return _greedy_own


def test_greedy_hits(model):
    """The greedy rule on greedy_own.bin (6 hits, 6 misses): C's hits equal the construction's and
    PyTorch's (score_rows_torch), and the JSON's acc is 6/12, so an always-miss (or always-hit)
    greedy path fails here, which it cannot on LAMBADA with a random model."""
    path, exs, expect = greedy_own_file(model)
    tsv, js = os.path.join(TMP, "scores_greedy.tsv"), os.path.join(TMP, "greedy_own.json")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", path, "-b", "4", "-scores", tsv, "-json", js])
    hits = [v[3] for _, v in sorted(read_scores(tsv)["greedy_own"].items())] if rc == 0 else []
    py_hits = [int(r[0][2]) for r in eval_common.score_rows_torch(model, exs, "greedy")]
    check(len(exs) == 12 and hits == expect and py_hits == expect,
          f"greedy rule on the model's own argmax continuations: C hits {hits}, PyTorch {py_hits} "
          f"(expected {expect}) {err.strip()}")
    acc = json.load(open(js))["tasks"]["greedy_own"]["acc"] if rc == 0 else None
    check(acc == 0.5, f"greedy_own: the JSON's acc {acc} = 6/12")


# ---------------------------------------------------------------------------------------------
# cli

def test_cli():
    make_models()
    if not os.path.isfile(task_path("piqa")):
        write_all_tasks()
    rc, out, _ = run([EVAL_GPT2, "--help"])
    check(rc == 0 and all(f in out for f in ("-e ", "-tasks", "-n ", "-b ", "-t ", "-dir", "-json", "-scores")),
          "eval_gpt2 --help exits 0 and lists every flag")
    empty = os.path.join(TMP, "empty_dir")
    os.makedirs(empty, exist_ok=True)
    for flag in ("-json", "-scores"):  # refused before any file is read or anything scored
        out_path = os.path.join(TMP, "no_such_dir", "out")
        rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa", flag, out_path])
        check(one_error_line(rc, err, flag, "no_such_dir does not exist") and not os.path.exists(out_path),
              f"{flag} into a missing directory is one error line before scoring: {err.strip()}")
        rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa", flag, empty])
        check(one_error_line(rc, err, flag, "is a directory"), f"{flag} naming a directory: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa", "-dir", empty])
    check(one_error_line(rc, err, "piqa/piqa_val.bin", "not found", "make evals", "dev/data/piqa.py"),
          f"missing eval file names the file, make evals and its writer: {err.strip()}")
    # the places it was looked for: -dir as given and the working directory it is relative to
    here = os.path.realpath(os.getcwd())
    check(one_error_line(rc, err, f"{empty}/piqa/piqa_val.bin: eval file not found", f"-dir {empty},",
                         f"working directory {here};"),
          f"missing eval file names the path tried, -dir and the working directory: {err.strip()}")
    # run from another folder without -dir: the default dev/data is relative to that folder
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa"], cwd=empty)
    check(one_error_line(rc, err, "dev/data/piqa/piqa_val.bin: eval file not found", "-dir dev/data (the default)",
                         f"working directory {os.path.realpath(empty)};", "python dev/data/piqa.py"),
          f"from another folder: the path tried, the default -dir and the working directory: {err.strip()}")
    p = subprocess.run(["make", "-s", "eval", f"CKPT={MODEL}", "EVAL_N=2"], cwd=REPO, capture_output=True, text=True)
    rows = [l for l in p.stdout.splitlines() if l.startswith("| ") and "examples/s" not in l and "task" not in l]
    check(p.returncode == 0 and len(rows) == 5 and all(r.split("|")[2].strip() == "2" for r in rows),
          f"make eval CKPT=... EVAL_N=2: the five tasks, 2 examples each ({len(rows)} rows) {p.stderr.strip()[-200:]}")
    p = subprocess.run(["make", "-s", "eval", f"CKPT={TMP}/none.bin"], cwd=REPO, capture_output=True, text=True)
    check(p.returncode != 0 and f"error: CKPT={TMP}/none.bin: no such checkpoint" in p.stderr,
          f"make eval with a missing CKPT: one line ({p.stderr.strip()[:120]})")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "all", "-dir", empty])
    check(one_error_line(rc, err, "5 eval files not found", "hellaswag_val.bin", "lambada_test.bin", "make evals"),
          f"-tasks all before make evals: every missing file in one line: {err.strip()}")
    check(one_error_line(rc, err, f"5 eval files not found (-dir {empty}, working directory {here}):"),
          f"-tasks all: the line names -dir and the working directory: {err.strip()}")
    good = open(task_path("piqa"), "rb").read()
    trunc = os.path.join(TMP, "piqa_truncated.bin")
    with open(trunc, "wb") as f:
        f.write(good[:1024 + 2 * ((len(good) - 1024) // 4)])  # half the body, whole words
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", trunc])
    check(one_error_line(rc, err, trunc, "example", "truncated"), f"truncated eval file: {err.strip()}")
    with open(trunc, "wb") as f:
        f.write(good[:-1])  # an odd byte count
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", trunc])
    check(one_error_line(rc, err, trunc, "body", "whole number of uint16"), f"odd-sized eval file: {err.strip()}")
    magic = os.path.join(TMP, "piqa_magic.bin")
    with open(magic, "wb") as f:
        f.write(struct.pack("<i", 20240326) + good[4:])
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", magic])
    check(one_error_line(rc, err, magic, "header[0] magic 20240326", "20240522"), f"wrong magic: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa", "-dir", DATA, "-t", "8"])
    check(one_error_line(rc, err, "piqa_val.bin", "example 0", "positions", "T = 8"),
          f"an example longer than -t: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "hellaswag", "-dir", DATA, "-b", "2"])
    check(one_error_line(rc, err, "hellaswag_val.bin", "4 options", "-b 4"), f"-b 2 for 4 options: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa,mmlu"])
    check(one_error_line(rc, err, "-tasks", "'mmlu'"), f"unknown task: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-tasks", "piqa"])
    check(one_error_line(rc, err, "-e", "required"), f"no model: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-tasks", "piqa", "-dir", DATA, "-t", "512"])
    check(one_error_line(rc, err, "-t 512", "maxT = 256"), f"-t above maxT: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", os.path.join(TMP, "missing_model.bin"), "-tasks", "piqa", "-dir", DATA])
    check(one_error_line(rc, err, "missing_model.bin", "not found"), f"missing checkpoint: {err.strip()}")
    rc, _, err = run([EVAL_GPT2, "-e", MODEL, "-n", "-3"])
    check(one_error_line(rc, err, "-n '-3'"), f"bad -n: {err.strip()}")


# ---------------------------------------------------------------------------------------------
# compare: dev/eval_compare.py, the check dev/gpu_check.sh applies to eval_gpt2cu against eval_gpt2

def test_compare():
    make_models()
    if not os.path.isfile(task_path("lambada")):
        write_all_tasks()
    tsv = {}
    for name, model in (("ref", MODEL), ("other", MODEL_OTHER)):
        tsv[name] = os.path.join(TMP, f"compare_{name}.tsv")
        rc, _, err = run([EVAL_GPT2, "-e", model, "-tasks", "piqa,lambada", "-dir", DATA, "-n", "12", "-b", "4",
                          "-scores", tsv[name]])
        if not check(rc == 0, f"eval_gpt2 -scores for {name} {err.strip()}"):
            return
    # a copy with every loss moved by 0.01 (bf16-sized): within the default tolerance
    shifted = os.path.join(TMP, "compare_shifted.tsv")
    with open(tsv["ref"]) as f, open(shifted, "w") as g:
        g.write(f.readline())
        for line in f:
            r = line.rstrip("\n").split("\t")
            r[5] = repr(float(r[5]) + 0.01 * int(r[4]))
            r[6] = repr(float(r[6]) + 0.01)
            g.write("\t".join(r) + "\n")
    cmp = [sys.executable, os.path.join(REPO, "dev", "eval_compare.py")]
    rc, out_self, err = run(cmp + [tsv["ref"], tsv["ref"]])
    check(rc == 0 and out_self.rstrip().endswith("0 failed"),
          f"eval_compare: a file against itself passes {err.strip()}")
    rc, out, err = run(cmp + [tsv["ref"], shifted])
    check(rc == 0 and "worst 1.000e-02" in out, f"eval_compare: losses moved by 0.01 pass {err.strip()}")
    rc, out, _ = run(cmp + [tsv["ref"], shifted, "--abs_tol", "0.005"])
    check(rc == 1 and "FAIL piqa: per-option mean loss" in out, "eval_compare: the same shift fails --abs_tol 0.005")
    rc, out, _ = run(cmp + [tsv["ref"], tsv["other"]])
    check(rc == 1 and "FAIL" in out, "eval_compare: another model's scores fail (negative control)")
    # choice tasks report flipped predictions (not a check: a flip is always within twice the loss
    # drift, which the loss check bounds): ref sums 10.00 / 10.05, candidate 10.10 / 10.00 flips
    # the sum-loss prediction but not the mean-loss one (0.5025 / 0.5 both pick option 1)
    head = "task\texample\toption\tlabel\tn_tok\tsum_loss\tmean_loss\tall_argmax\n"
    def tsv_rows(name, sums):
        path = os.path.join(TMP, name)
        with open(path, "w") as g:
            g.write(head)
            for opt, (n, sm) in enumerate(zip((10, 20), sums)):
                g.write(f"piqa\t0\t{opt}\t0\t{n}\t{sm!r}\t{sm / n!r}\t0\n")
        return path
    ref_t, cand_t = tsv_rows("tie_ref.tsv", (10.0, 10.05)), tsv_rows("tie_cand.tsv", (10.1, 10.0))
    rc, out, err = run(cmp + [ref_t, cand_t])
    check(rc == 0 and "predictions flipped on 1 (sum loss) and 0 (mean loss) of 1 examples; acc 1.0000 / 0.0000" in out,
          f"eval_compare: a sum-loss flip is reported with both accuracies: {out.strip()} {err.strip()}")
    # greedy: a reference without hits (a random model on LAMBADA) makes the hit agreement
    # uninformative, and eval_compare says so; a reference with hits does not get the note
    note = "NOTE lambada: the reference has 0 greedy hits in 12 examples, so the hit agreement is uninformative"
    check(note in out_self, "eval_compare: a reference without greedy hits gets the NOTE line (the self-comparison above)")
    hit_t = os.path.join(TMP, "greedy_hits.tsv")
    with open(hit_t, "w") as g:
        g.write(head)
        for i in range(4):
            g.write(f"lambada\t{i}\t0\t0\t2\t1.0\t0.5\t{i % 2}\n")
    rc, out, err = run(cmp + [hit_t, hit_t])
    check(rc == 0 and "PASS lambada: greedy hits identical on 1.000 of 4 examples" in out and "NOTE" not in out,
          f"eval_compare: a reference with greedy hits gets no NOTE: {out.strip()} {err.strip()}")
    broken = os.path.join(TMP, "compare_broken.tsv")
    with open(broken, "w") as g:
        g.write("task\texample\n")
    rc, _, err = run(cmp + [tsv["ref"], broken])
    check(rc == 2 and err.count("\n") == 1 and "compare_broken.tsv: line 1" in err,
          f"eval_compare: a malformed file is one error line: {err.strip()}")
    rc, _, err = run(cmp + [tsv["ref"], tsv["ref"], "--abs_tol", "x"])
    check(rc == 2 and err.count("\n") == 1 and "--abs_tol" in err,
          f"eval_compare: a bad flag value is one error line: {err.strip()}")
    rc, _, err = run(cmp + [tsv["ref"], os.path.join(TMP, "no_such.tsv")])
    check(rc == 2 and err.count("\n") == 1 and "no_such.tsv" in err,
          f"eval_compare: a missing file is one error line: {err.strip()}")


# ---------------------------------------------------------------------------------------------
# trainer

def test_trainer():
    make_models()
    if not os.path.isfile(task_path("hellaswag")):
        write_all_tasks()
    base = [TRAIN_GPT2, "-e", MODEL, "-i", os.path.join(TS, "tiny_shakespeare_train.bin"),
            "-j", os.path.join(TS, "tiny_shakespeare_val.bin"), "-t", "256", "-m", "1", "-s", "0", "-h", "1"]
    def fresh_cwd(name):
        """A working folder with the tokenizer file (read from the cwd) and nothing else."""
        cwd = os.path.join(TMP, name)
        shutil.rmtree(cwd, ignore_errors=True)
        os.makedirs(cwd)
        os.symlink(os.path.join(REPO, "gpt2_tokenizer.bin"), os.path.join(cwd, "gpt2_tokenizer.bin"))
        return cwd
    cwd = fresh_cwd("trainer_with_file")
    os.makedirs(os.path.join(cwd, "dev", "data", "hellaswag"))
    os.symlink(task_path("hellaswag"), os.path.join(cwd, "dev", "data", "hellaswag", "hellaswag_val.bin"))
    # the trainer's -ht lambada reads greedy_own.bin (examples with hits, see greedy_own_file): a
    # random model scores 0 on LAMBADA itself, and 0 = 0 would not tell a broken greedy path
    import train_gpt2
    own, _, _ = greedy_own_file(train_gpt2.load_model(MODEL))
    os.makedirs(os.path.join(cwd, "dev", "data", "lambada"))
    os.symlink(own, os.path.join(cwd, "dev", "data", "lambada", "lambada_test.bin"))
    rc, out, err = run(base + ["-b", "4", "-x", "2", "-v", "1", "-hn", "8", "-n", "1", "-ht", "hellaswag,lambada",
                               "-o", "out"], cwd=cwd)
    lines = [ln for ln in out.splitlines() if re.match(r"HellaSwag: \d+/\d+ = \d\.\d{6}$", ln)]
    check(rc == 0 and len(lines) == 2 and all(ln.split()[1].endswith("/8") for ln in lines),
          f"-h 1 -hn 8 -v 1 -x 2: 'HellaSwag: k/8 = f' at steps 1 and 2 ({lines}) {err.strip()[-200:]}")
    log = open(os.path.join(cwd, "out", "main.log")).read() if rc == 0 else ""
    evals = [ln for ln in log.splitlines() if " eval:" in ln]
    check(len(evals) == 2 and evals[0].startswith("s:1 eval:") and evals[1].startswith("s:2 eval:")
          and all(len(ln.split("eval:")[1]) == 6 for ln in evals), f"main.log: s:%d eval:%.4f at steps 1 and 2 ({evals})")
    lam = [ln for ln in out.splitlines() if re.match(r"lambada: \d+/8 = \d\.\d{6}$", ln)]
    lam_log = [ln for ln in log.splitlines() if " eval_lambada:" in ln]
    check(len(lam) == 2 and len(lam_log) == 2 and lam_log[0].startswith("s:1 eval_lambada:"),
          f"-ht hellaswag,lambada: 'lambada: k/8 = f' and 's:%d eval_lambada:' at steps 1 and 2 ({lam}, {lam_log})")
    rc2, out2, _ = run([EVAL_GPT2, "-e", os.path.join(cwd, "out", "model_00000001.bin"), "-tasks", "hellaswag,lambada",
                        "-dir", os.path.join(cwd, "dev", "data"), "-n", "8", "-t", "256",
                        "-json", os.path.join(TMP, "step1.json")])
    if rc == 0 and rc2 == 0 and lines and lam:
        acc = float(lines[0].split("=")[1])
        tasks = json.load(open(os.path.join(TMP, "step1.json")))["tasks"]
        c = tasks["hellaswag"]["acc_norm"]
        check(abs(acc - c) < 1e-6, f"the trainer's step-1 HellaSwag {acc:.4f} = eval_gpt2 acc_norm {c:.4f} on model_00000001.bin")
        acc_l, c_l = float(lam[0].split("=")[1]), tasks["lambada"]["acc"]
        check(abs(acc_l - c_l) < 1e-6 and c_l > 0,
              f"the trainer's step-1 'lambada' (greedy_own.bin) {acc_l:.4f} = eval_gpt2 acc {c_l:.4f} > 0 (greedy path, with hits)")
    else:
        check(False, "eval_gpt2 on the step-1 checkpoint")
    cwd = fresh_cwd("trainer_without_file")
    rc, out, err = run(base + ["-b", "4", "-x", "1", "-v", "1", "-o", "out"], cwd=cwd)
    msgs = [ln for ln in out.splitlines() if "HellaSwag" in ln]
    log = open(os.path.join(cwd, "out", "main.log")).read() if rc == 0 else ""
    check(rc == 0 and len(msgs) == 1 and "not found" in msgs[0] and "eval:" not in log and "s:1 tel:" in log,
          f"-h 1 without the file: one message ({msgs}), the run completes, no eval lines {err.strip()[-200:]}")
    check(len(msgs) == 1 and f"dev/data/hellaswag/hellaswag_val.bin not found in the working directory "
          f"{os.path.realpath(cwd)}," in msgs[0], f"-h 1 without the file: the message names the working directory ({msgs})")
    cwd = os.path.join(TMP, "trainer_with_file")
    rc, _, err = run(base + ["-b", "2", "-x", "1"], cwd=cwd)
    check(one_error_line(rc, err, "-h 1", "4 options", "-b 4"), f"-h 1 with -b 2: {err.strip()}")


# ---------------------------------------------------------------------------------------------
# fineweb

def shards(d):
    """Shard files in index order (the _%06d suffix; 'train' sorts before 'val' by name)."""
    return sorted(os.listdir(d), key=lambda n: n.rsplit("_", 1)[1])


def test_fineweb():
    e = enc()
    fixture = os.path.join(FIXTURES, "fineweb")
    docs = []
    for name in sorted(os.listdir(fixture)):
        if name.endswith(".jsonl"):
            with open(os.path.join(fixture, name), encoding="utf-8") as f:
                docs += [json.loads(ln)["text"] for ln in f if ln.strip()]
    expected = []
    starts = []
    for d in docs:
        starts.append(len(expected))
        expected += [50256] + e.encode(d)
    size = 40
    script = os.path.join(DATA_SRC, "fineweb.py")
    outs = {}
    for label, extra in (("classic2", ["--procs", "2"]), ("classic1", ["--procs", "1", "--pure"]),
                         ("edu", ["-t", "edu", "--procs", "1"])):
        outs[label] = os.path.join(TMP, f"fineweb_{label}")
        shutil.rmtree(outs[label], ignore_errors=True)
        rc, out, err = run([sys.executable, script, "--local", fixture, "-s", str(size), "--out_dir", outs[label]] + extra)
        check(rc == 0, f"fineweb.py --local fixture -s {size} {' '.join(extra)} {err.strip()}")
    names = shards(outs["classic2"])
    n = len(names)
    want = ["fineweb_val_000000.bin"] + [f"fineweb_train_{i:06d}.bin" for i in range(1, n)]
    check(names == want and n >= 3, f"shard 0 is fineweb_val_000000.bin, then fineweb_train_%06d.bin ({n} shards)")
    toks = [data_common.read_datafile(os.path.join(outs["classic2"], s)) for s in names]
    check(all(len(t) == size for t in toks[:-1]) and 0 < len(toks[-1]) <= size,
          f"every shard but the last holds exactly {size} tokens (last {len(toks[-1])})")
    flat = np.concatenate(toks).tolist()
    # encode() never emits the EOT id (the literal '<|endoftext|>' in a document is text:
    # test/test_data.py), so this also says: an EOT before each document and nowhere else
    check(flat == expected, f"the shards concatenate to [EOT] + tokens of every document, in file order "
                            f"({len(flat)} vs {len(expected)} tokens)")
    split = [k * size for k in range(1, n) if k * size not in starts]
    check(len(split) > 0, f"documents split across shard boundaries (at tokens {split})")
    same = all(open(os.path.join(outs["classic2"], s), "rb").read() == open(os.path.join(outs["classic1"], s), "rb").read()
               for s in names) and shards(outs["classic1"]) == names
    check(same, "1 process (pure-Python BPE) and 2 processes (tiktoken) write identical shards")
    edu = shards(outs["edu"])
    check(edu == [x.replace("fineweb_", "edu_fineweb_") for x in names], f"-t edu names: {edu[:2]}...")
    rc, _, err = run([sys.executable, script, "--local", os.path.join(TMP, "nowhere"), "--out_dir", os.path.join(TMP, "fw_x")])
    check(one_error_line(rc, err, "nowhere", "no such file"), f"missing --local path: {err.strip()}")
    bad = os.path.join(TMP, "fw_bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"text": "fine"}\n{"content": "no text field"}\n')
    rc, _, err = run([sys.executable, script, "--local", bad, "--out_dir", os.path.join(TMP, "fw_y"), "--procs", "2"])
    check(one_error_line(rc, err, "fw_bad.jsonl", "line 2", "'text'"), f"a record without 'text': {err.strip()}")
    # without --local, the HF path imports `datasets` lazily; a stub that fails to import stands in
    # for a machine without it, so this never touches the network
    stub = os.path.join(TMP, "stub_no_datasets", "datasets")
    os.makedirs(stub, exist_ok=True)
    with open(os.path.join(stub, "__init__.py"), "w") as f:
        f.write('raise ImportError("stub: datasets is not installed")\n')
    env = dict(os.environ, PYTHONPATH=os.path.dirname(stub))
    rc, _, err = run([sys.executable, script, "-t", "classic", "-v", "10B", "--out_dir", os.path.join(TMP, "fw_z")], env=env)
    check(one_error_line(rc, err, "datasets package", "--local"), f"no datasets package: {err.strip()}")


SECTIONS = {"writers": test_writers, "format": test_format, "agreement": test_agreement, "cli": test_cli,
            "compare": test_compare, "trainer": test_trainer, "fineweb": test_fineweb}


def main(argv):
    os.makedirs(TMP, exist_ok=True)
    names = argv or list(SECTIONS)
    for name in names:
        if name not in SECTIONS:
            check(False, f"unknown section '{name}' (expected {', '.join(SECTIONS)})")
            continue
        print(f"--- {name}", flush=True)
        SECTIONS[name]()
    finish()


if __name__ == "__main__":
    main(sys.argv[1:])
