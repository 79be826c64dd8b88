#!/usr/bin/env python3
"""dev/eval_compare.py: do two evaluators agree on the same weights? (doc/evals.md)

    python dev/eval_compare.py REFERENCE.tsv CANDIDATE.tsv [--abs_tol 0.05] [--greedy_agree 0.95]

Both files are `-scores` outputs of eval_gpt2 / eval_gpt2cu (one line per option: task, example,
option, label, n_tok, sum_loss, mean_loss, all_argmax). dev/gpu_check.sh uses it with the fp32
CPU program as the reference and the bf16 GPU program as the candidate. Checks, per task:

  - the same (example, option) rows and token counts;
  - every option's mean completion loss within --abs_tol (bf16 weights and activations move a
    loss of a few nats by ~1e-2; the default leaves a margin of a few times that);
  - choice tasks, reported, not checked: how many predictions (argmin of the sum and of the mean
    loss) flipped, and both accuracies. A flip needs the two options' losses to move by the
    reference's gap between them, so every flip lies within twice the worst loss difference: the
    loss check above already bounds them, and a check of the flips could never fail on its own;
  - greedy tasks: hit/miss identical on at least --greedy_agree of the examples (a hit flips when
    a top-2 logit gap is within bf16 rounding, and the scores carry no gaps to tell those apart).
    This also bounds the accuracies: |acc_ref - acc_cand| <= 1 - agreement. When the reference
    has no hits at all (a random or barely trained model on LAMBADA), a candidate that never hits
    agrees everywhere: a NOTE line says the greedy comparison is then uninformative.

Prints one PASS/FAIL line per check and ends with "N passed, N failed"; exit status 1 on any
failure, 2 on unreadable input.
"""
import argparse
import csv
import sys
from collections import defaultdict


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_scores(path):
    """{task: {(example, option): (label, n_tok, sum_loss, mean_loss, all_argmax)}}"""
    out = defaultdict(dict)
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f, delimiter="\t")
            header = next(rows, None)
            want = ["task", "example", "option", "label", "n_tok", "sum_loss", "mean_loss", "all_argmax"]
            if header != want:
                raise ValueError(f"line 1: expected the header {' '.join(want)}")
            for lineno, r in enumerate(rows, start=2):
                if len(r) != 8:
                    raise ValueError(f"line {lineno}: expected 8 tab-separated fields, got {len(r)}")
                out[r[0]][(int(r[1]), int(r[2]))] = (int(r[3]), int(r[4]), float(r[5]), float(r[6]), int(r[7]))
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")
    if not out:
        die(f"{path}: no scores")
    return out


def predictions(rows):
    """{example: (argmin sum, argmin mean, label)} of one task's rows; the first option on a tie,
    as the C scorer (llmc/evalloader.h eval_example_finish)."""
    by_ex = defaultdict(dict)
    for (i, r), v in rows.items():
        by_ex[i][r] = v
    out = {}
    for i, opts in by_ex.items():
        keys = sorted(opts)
        ps = min(keys, key=lambda k: (opts[k][2], k))
        pm = min(keys, key=lambda k: (opts[k][3], k))
        out[i] = (ps, pm, opts[keys[0]][0])
    return out


class OneLineParser(argparse.ArgumentParser):
    """Flag errors as the project's one line (argparse prints its usage first)."""

    def error(self, message):
        die(message)


def first_correct(path, task, n):
    """Correct answers among the first n examples of task in a -scores file, by the evaluators'
    rules: a choice task takes the option with the lowest mean loss, the first on a tie (acc_norm,
    what the trainer's -h 1 reports); a greedy task counts the examples whose every completion
    token was the argmax. None when the file holds fewer than n examples of the task. (What
    dev/gpu_check.sh and test/test_gpt2_gpu_host.sh compare with the trainer's in-training count.)"""
    rows = {k: v for k, v in read_scores(path)[task].items() if k[0] < n}
    if len({k[0] for k in rows}) != n:
        return None
    if all(k[1] == 0 for k in rows):  # greedy: one row per example
        return sum(v[4] for v in rows.values())
    return sum(p[1] == p[2] for p in predictions(rows).values())


def main(argv=None):
    ap = OneLineParser(description=__doc__.split("\n")[0])
    ap.add_argument("reference")
    ap.add_argument("candidate")
    ap.add_argument("--abs_tol", type=float, default=0.05, help="max |difference| of an option's mean loss")
    ap.add_argument("--greedy_agree", type=float, default=0.95, help="min fraction of identical greedy hits")
    a = ap.parse_args(argv)
    ref, cand = read_scores(a.reference), read_scores(a.candidate)
    passed = failed = 0

    def check(ok, msg):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + msg)
        passed += bool(ok)
        failed += not ok

    check(set(ref) == set(cand), f"tasks: {sorted(ref)} vs {sorted(cand)}")
    for task in sorted(set(ref) & set(cand)):
        r, c = ref[task], cand[task]
        same = set(r) == set(c) and all(r[k][1] == c[k][1] and r[k][0] == c[k][0] for k in r)
        check(same, f"{task}: same {len(r)} options, labels and token counts")
        if not same:
            continue
        diffs = [abs(r[k][3] - c[k][3]) for k in r]
        worst = max(diffs)
        mean = sum(diffs) / len(diffs)
        check(worst <= a.abs_tol, f"{task}: per-option mean loss |ref - cand| worst {worst:.3e}, "
                                  f"mean {mean:.3e} <= {a.abs_tol:g}")
        if all(k[1] == 0 for k in r):  # one row per example: a greedy task (choice tasks have 2-5)
            hits_r = {k[0]: r[k][4] for k in r}
            hits_c = {k[0]: c[k][4] for k in c}
            agree = sum(hits_r[i] == hits_c[i] for i in hits_r) / len(hits_r)
            acc_r = sum(hits_r.values()) / len(hits_r)
            acc_c = sum(hits_c.values()) / len(hits_c)
            check(agree >= a.greedy_agree, f"{task}: greedy hits identical on {agree:.3f} of {len(hits_r)} examples "
                                           f"(>= {a.greedy_agree:g}); acc ref {acc_r:.4f} cand {acc_c:.4f}")
            if not any(hits_r.values()):
                print(f"NOTE {task}: the reference has 0 greedy hits in {len(hits_r)} examples, so the hit "
                      f"agreement is uninformative (a candidate that never hits would pass it)")
            continue
        pr, pc = predictions(r), predictions(c)
        flips = [sum(pr[i][idx] != pc[i][idx] for i in pr) for idx in (0, 1)]
        acc = [sum(p[0] == p[2] for p in x.values()) / len(x) for x in (pr, pc)]
        norm = [sum(p[1] == p[2] for p in x.values()) / len(x) for x in (pr, pc)]
        print(f"     {task}: predictions flipped on {flips[0]} (sum loss) and {flips[1]} (mean loss) of {len(pr)} "
              f"examples; acc {acc[0]:.4f} / {acc[1]:.4f}, acc_norm {norm[0]:.4f} / {norm[1]:.4f}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
