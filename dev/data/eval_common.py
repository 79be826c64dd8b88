"""dev/data/eval_common.py: the zero-shot eval files (doc/evals.md) shared by the eval writers.

Defines
- Example: one multiple-choice (or greedy-continuation) item as token lists: contexts (one shared
  context, or one per option), completions (one per option, or one shared continuation), label;
- encode_example(enc, contexts, completions, label): the text form -> an Example;
- write_evalfile(path, examples, version, scoring, name): version 1 is llm.c's HellaSwag format
  (doc/formats.md "Eval files and scoring": one context, exactly 4 completions) byte for byte; version 2 is ours: 1-16
  options, per-option contexts, and a scoring kind (choice or greedy) in the header;
- read_evalfile(path): parse and validate either version, raising ValueError with one line
  naming the file and the field;
- shared_eval_input(name), offline_input(name, source), eval_output_path(task, split),
  writer_main(...): the common CLI of dev/data/{hellaswag,piqa,arc_easy,winogrande,lambada}.py
  (their JSON-lines input goes through data_common.read_jsonl and parse_error);
- score_rows_torch(model, examples, scoring) and predictions(...): the Python reference scorer
  (train_gpt2.py's GPT forward) that test/test_evals.py compares with eval_gpt2.

Scoring (llm.c's completion style, doc/formats.md "Eval files and scoring"): option i is scored by the cross-entropy of its
completion tokens given its context. acc takes the option with the lowest summed loss, acc_norm
the lowest mean loss (llm.c's argmin; on an exact tie the first option wins). Greedy tasks
(LAMBADA) count an example correct when every continuation token is the argmax prediction.
"""
import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402

from dev.data.data_common import HEADER_BYTES, HEADER_INTS, repo_root, shared_data_dir  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

EVAL_MAGIC = 20240522
DELIMITER = 65535          # uint16 that starts every example; no GPT-2 token has this id
MAX_ROWS = 16              # options per example the C reader accepts (llmc/evalloader.h)
SCORING = {"choice": 0, "greedy": 1}
SCORING_NAMES = {v: k for k, v in SCORING.items()}
NAME_SLOT, NAME_INTS = 8, 8  # v2 header[8..15]: the task name, 32 bytes of ASCII, NUL padded


@dataclass
class Example:
    """Row i of the batch is contexts[i or 0] + completions[i or 0]: a list of length 1 is
    shared by every option (HellaSwag shares the context, WinoGrande the continuation)."""
    contexts: List[List[int]]
    completions: List[List[int]]
    label: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def n_rows(self):
        return max(len(self.contexts), len(self.completions))

    def row(self, i):
        ctx = self.contexts[i if len(self.contexts) > 1 else 0]
        comp = self.completions[i if len(self.completions) > 1 else 0]
        return ctx, comp


def encode_example(enc, contexts, completions, label, meta=None):
    """Tokenize one item. Completions are passed as they are scored: the writers add the leading
    space GPT-2's BPE attaches to the next word (llm.c: " " + ending)."""
    return Example([enc.encode(c) for c in contexts], [enc.encode(c) for c in completions],
                   int(label), meta or {})


# ---------------------------------------------------------------------------------------------
# Writing

def _check_example(path, idx, ex, version, scoring):
    """Raise ValueError (one line) for an example the format cannot hold."""
    where = f"{path}: example {idx}"
    nctx, ncomp, rows = len(ex.contexts), len(ex.completions), ex.n_rows
    if version == 1 and (nctx != 1 or ncomp != 4):
        raise ValueError(f"{where}: version 1 holds one context and 4 completions, "
                         f"got {nctx} and {ncomp} (use version 2)")
    if nctx not in (1, rows) or ncomp not in (1, rows):
        raise ValueError(f"{where}: {nctx} contexts and {ncomp} completions; each count must be "
                         f"1 or the number of options {rows}")
    if scoring == "greedy" and rows != 1:
        raise ValueError(f"{where}: a greedy example has one context and one continuation, got {rows} rows")
    if scoring == "choice" and not 2 <= rows <= MAX_ROWS:
        raise ValueError(f"{where}: {rows} options; a choice example needs 2..{MAX_ROWS}")
    if not 0 <= ex.label < rows:
        raise ValueError(f"{where}: label {ex.label} outside [0, {rows})")
    for kind, seqs in (("context", ex.contexts), ("completion", ex.completions)):
        for j, seq in enumerate(seqs):
            if len(seq) == 0:
                raise ValueError(f"{where}: {kind} {j} is empty (every scored token needs a "
                                 f"context token before it)")
            if min(seq) < 0 or max(seq) >= DELIMITER:
                raise ValueError(f"{where}: {kind} {j} has a token outside [0, {DELIMITER})")


def _example_stream(idx, ex, version):
    """The uint16 words of one example (doc/formats.md "Eval files and scoring"; doc/evals.md for version 2)."""
    words = [DELIMITER, 0, idx, ex.label, len(ex.completions)]
    if version == 2:
        words.append(len(ex.contexts))
    for seq in ex.contexts + ex.completions:
        words.append(len(seq))
        words.extend(seq)
    words[1] = 2 * len(words)  # example_bytes counts the whole example, these fields included
    return words


def write_evalfile(path, examples, version=2, scoring="choice", name=""):
    """Write examples to path (via path.tmp). Returns a dict of what the header records."""
    if version not in (1, 2):
        raise ValueError(f"{path}: version {version}: expected 1 or 2")
    if version == 1 and scoring != "choice":
        raise ValueError(f"{path}: version 1 only holds choice examples")
    if not 0 < len(examples) < 2**16:
        raise ValueError(f"{path}: {len(examples)} examples; the uint16 index needs 1..65535")
    stream, longest_bytes, longest_row, max_rows = [], 0, 0, 0
    for idx, ex in enumerate(examples):
        _check_example(path, idx, ex, version, scoring)
        words = _example_stream(idx, ex, version)
        if 2 * len(words) >= 2**16:
            raise ValueError(f"{path}: example {idx} is {2 * len(words)} bytes; the uint16 "
                             f"example_bytes field holds < 65536")
        longest_bytes = max(longest_bytes, 2 * len(words))
        max_rows = max(max_rows, ex.n_rows)
        longest_row = max(longest_row, max(len(c) + len(d) for c, d in map(ex.row, range(ex.n_rows))))
        stream.extend(words)
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0:4] = (EVAL_MAGIC, version, len(examples), longest_bytes)
    if version == 2:
        header[4:7] = (SCORING[scoring], max_rows, longest_row)
        raw = name.encode("ascii")[:4 * NAME_INTS - 1].ljust(4 * NAME_INTS, b"\0")
        header[NAME_SLOT:NAME_SLOT + NAME_INTS] = np.frombuffer(raw, dtype="<i4")
    write_atomic(path, (header.tobytes(), np.asarray(stream, dtype="<u2").tobytes()))
    return {"examples": len(examples), "longest_example_bytes": longest_bytes,
            "max_rows": max_rows, "longest_row": longest_row}


# ---------------------------------------------------------------------------------------------
# Reading

def read_evalfile(path, limit=None):
    """Return (info, examples). info: version, scoring, name, num_examples, the header fields.
    Raises ValueError naming the file and field on any inconsistency (the C reader's checks).
    limit: parse only the first `limit` examples (the rest of the file is not checked)."""
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise ValueError(f"{path}: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(HEADER_BYTES), dtype="<i4").astype(np.int64)
        body = f.read()
    if header[0] != EVAL_MAGIC:
        raise ValueError(f"{path}: header[0] magic {header[0]}: expected {EVAL_MAGIC} (an eval file)")
    version = int(header[1])
    if version not in (1, 2):
        raise ValueError(f"{path}: header[1] version {version}: expected 1 or 2")
    if len(body) % 2:
        raise ValueError(f"{path}: body of {len(body)} bytes is not a whole number of uint16")
    words = np.frombuffer(body, dtype="<u2").astype(np.int64)
    n = int(header[2])
    scoring = "choice" if version == 1 else SCORING_NAMES.get(int(header[4]))
    if scoring is None:
        raise ValueError(f"{path}: header[4] scoring {header[4]}: expected 0 (choice) or 1 (greedy)")
    name = ""
    if version == 2:
        raw = header[NAME_SLOT:NAME_SLOT + NAME_INTS].astype("<i4").tobytes()
        name = raw.split(b"\0")[0].decode("ascii", errors="replace")
    pos, examples = 0, []
    for idx in range(n if limit is None else min(n, limit)):
        where = f"{path}: example {idx}"

        def take(k, what):
            nonlocal pos
            if pos + k > len(words):
                raise ValueError(f"{where}: {what}: file ends early (truncated)")
            out = words[pos:pos + k]
            pos += k
            return out

        start = pos
        delim, nbytes, index, label, ncomp = (int(v) for v in take(5, "example header"))
        if delim != DELIMITER:
            raise ValueError(f"{where}: delimiter {delim}: expected {DELIMITER}")
        if index != idx:
            raise ValueError(f"{where}: example_index {index}: expected {idx} (examples in order)")
        nctx = int(take(1, "num_contexts")[0]) if version == 2 else 1
        seqs = []
        for j in range(nctx + ncomp):
            k = int(take(1, "length")[0])
            seqs.append([int(t) for t in take(k, "tokens")])
        if 2 * (pos - start) != nbytes:
            raise ValueError(f"{where}: example_bytes {nbytes}: the fields add up to {2 * (pos - start)}")
        ex = Example(seqs[:nctx], seqs[nctx:], label)
        _check_example(path, idx, ex, version, scoring)
        examples.append(ex)
    if limit is None and pos != len(words):
        raise ValueError(f"{path}: {2 * (len(words) - pos)} bytes after the last of {n} examples "
                         f"(header[2] num_examples is wrong?)")
    info = {"version": version, "scoring": scoring, "name": name, "num_examples": n,
            "longest_example_bytes": int(header[3])}
    if version == 2:
        info.update(max_rows=int(header[5]), longest_row=int(header[6]))
    return info, examples


# ---------------------------------------------------------------------------------------------
# The writers' common command line

def shared_eval_input(filename):
    """<shared data>/eval/<filename>, or None when the offline copy is absent."""
    path = os.path.join(shared_data_dir(), "eval", filename)
    return path if os.path.isfile(path) else None


def offline_input(filename, source):
    """<shared data>/eval/<filename>; without the offline copy, FileNotFoundError saying where the
    file comes from (source) and that --input takes it."""
    path = shared_eval_input(filename)
    if path is None:
        raise FileNotFoundError(f"{filename}: no offline copy in ../shared/data/eval; pass --input ({source})")
    return path


def eval_output_path(task, split):
    """dev/data/<task>/<task>_<split>.bin, where eval_gpt2 and the trainer look."""
    return os.path.join(repo_root(), "dev", "data", task, f"{task}_{split}.bin")


def writer_main(argv, task, split, description, default_input, load_examples, version=2,
                scoring="choice", extra_args=()):
    """Parse --input/--out (and extra_args: (flag, argparse kwargs) pairs), load and tokenize the
    items, write the file, print a summary.

    default_input(): the input path when --input is not given (raises FileNotFoundError with a
    hint if there is none); load_examples(path, enc, args) -> list of Example."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--input", help="the raw data file (default: the offline copy in ../shared/data/eval)")
    ap.add_argument("--out", default=eval_output_path(task, split),
                    help=f"output eval file (default: dev/data/{task}/{task}_{split}.bin)")
    ap.add_argument("--fast", action="store_true", help="tokenize with tiktoken (same ids, faster)")
    for flag, kwargs in extra_args:
        ap.add_argument(flag, **kwargs)
    args = ap.parse_args(argv)
    from dev.data.gpt2_bpe import get_encoder
    t0 = time.time()
    try:
        path = args.input or default_input()
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: input file not found")
        examples = load_examples(path, get_encoder(fast=args.fast), args)
        if not examples:
            raise ValueError(f"{path}: no items found")
        stats = write_evalfile(args.out, examples, version=version, scoring=scoring, name=task)
    except (OSError, ValueError, KeyError) as e:
        msg = str(e) if not isinstance(e, KeyError) else f"missing field {e}"
        print(f"error: {msg}", file=sys.stderr)
        return 1
    print(f"read {path}: {len(examples):,} items")
    print(f"wrote {args.out}: version {version}, {scoring}, {stats['examples']:,} examples, "
          f"up to {stats['max_rows']} options, longest row {stats['longest_row']} tokens "
          f"({time.time() - t0:.1f} s)")
    return 0


# ---------------------------------------------------------------------------------------------
# The Python reference scorer (train_gpt2.py's model); used by test/test_evals.py

def score_rows_torch(model, examples, scoring="choice"):
    """For each example, a list over its options of (summed loss, token count, all_argmax).

    Each example is one forward of shape (n_rows, longest row - 1): row i holds its context and
    completion, padded with EOT; position p predicts token p + 1. Padding sits after the scored
    positions, so causal attention keeps it out of the scores."""
    import torch
    import torch.nn.functional as F
    eot, out = 50256, []
    with torch.no_grad():
        for ex in examples:
            rows = [ex.row(i) for i in range(ex.n_rows)]
            T = max(len(c) + len(d) for c, d in rows) - 1
            idx = torch.full((len(rows), T + 1), eot, dtype=torch.long)
            for i, (c, d) in enumerate(rows):
                idx[i, :len(c) + len(d)] = torch.tensor(c + d)
            logits, _ = model(idx[:, :-1])
            losses = F.cross_entropy(logits.transpose(1, 2), idx[:, 1:], reduction="none")
            res = []
            for i, (c, d) in enumerate(rows):
                sl = slice(len(c) - 1, len(c) - 1 + len(d))
                hit = bool((logits[i, sl].argmax(-1) == idx[i, 1:][sl]).all()) if scoring == "greedy" else False
                res.append((float(losses[i, sl].double().sum()), len(d), hit))
            out.append(res)
    return out


def first_argmin(values):
    """Index of the smallest value, the first one on a tie (llm.c's strict < scan)."""
    best = 0
    for i, v in enumerate(values):
        if v < values[best]:
            best = i
    return best


def predictions(row_scores):
    """(pred by summed loss, pred by mean loss) of one example's option scores."""
    sums = [s for s, _, _ in row_scores]
    means = [s / n for s, n, _ in row_scores]
    return first_argmin(sums), first_argmin(means)
