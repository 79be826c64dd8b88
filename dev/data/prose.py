"""dev/data/prose.py: tokenize the offline English prose corpus into llm.c token shards, the data
set for CPU and short GPU runs larger than TinyShakespeare (doc/formats.md "Token shards").

Usage: python dev/data/prose.py [--in_dir DIR] [--out_dir DIR] [--shard_size N] [--procs P]
                                [--max_docs N] [--force]

Input: <shared data>/corpus/debian_prose_000.txt.xz, _001.txt.xz (train) and
debian_prose_val.txt.xz (val), from <repo>/../shared/data (or $LLMC_SHARED_DATA), each checked
against its sha256 (--in_dir takes other files of the same names and skips the check). English
prose from Debian 12 documentation packages, one paragraph a line, documents separated by one blank
line; the val documents are whole documents that are not in the train files. The corpus is built
from Debian packages by its maintainers and has no download: without the shared copy this script
stops with one line.

Tokenization, as llm.c's fineweb.py does it for web documents: each document becomes
[<|endoftext|> 50256] + the GPT-2 tokens of its paragraphs joined by "\\n", documents are packed
back to back, and the stream is cut into shards of --shard_size tokens (default 10^7; a document
can straddle a boundary; the last shard keeps the rest). Outputs: <out_dir>/prose_val_000000.bin
(every val document, one shard) and prose_train_%06d.bin (default out_dir: <repo>/dev/data/prose).
About 18.6M train and 1.0M val tokens; the trainers take -i 'dev/data/prose/prose_train_*.bin'
-j 'dev/data/prose/prose_val_*.bin'. Tokenization runs in --procs worker processes, in order, so the
shards are identical for any --procs. --max_docs keeps the first N documents of each split (tests).
"""
import argparse
import glob
import lzma
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import ShardWriter, read_datafile, repo_root, sha256_of, shared_data_dir  # noqa: E402
from dev.data.gpt2_bpe import get_encoder  # noqa: E402

EOT = 50256
SHARD_SIZE = 10**7
TRAIN_FILES = ("debian_prose_000.txt.xz", "debian_prose_001.txt.xz")
VAL_FILE = "debian_prose_val.txt.xz"
SHA256 = {  # the shared copy's README lists these
    "debian_prose_000.txt.xz": "3a3f7199eb75c208bd66e798f3920cdd15c66c1112fb6e5eec73cc073305c706",
    "debian_prose_001.txt.xz": "8177cccdd0f26a293e7bfff61dd837244b6dc8fc474ce0ea6b4667ddcc9691b6",
    "debian_prose_val.txt.xz": "87aee4aa55a08ef07bf5a58bf63ee110d03133c58aac9a26df10625d287a033d",
}


def documents(path, max_docs=None):
    """The documents of one corpus file in order: lists of paragraph lines, split at blank lines."""
    doc, n = [], 0
    try:
        with lzma.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    doc.append(line)
                    continue
                if doc:
                    yield doc
                    n += 1
                    doc = []
                    if max_docs is not None and n >= max_docs:
                        return
    except lzma.LZMAError as e:
        raise ValueError(f"{path}: not an xz file ({e})") from e
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start} of the text)") from e
    if doc:
        yield doc


_ENC = None


def _init_worker():
    global _ENC
    _ENC = get_encoder()


def encode_document(paragraphs):
    """[EOT] + the tokens of the document's paragraphs joined by newlines."""
    return [EOT] + _ENC.encode("\n".join(paragraphs))


def tokenize_split(files, out_dir, split, shard_size, procs, max_docs):
    """Every document of files into the split's shards; returns [(path, tokens)] and the
    document count."""
    writer = ShardWriter(lambda i: os.path.join(out_dir, f"prose_{split}_{i:06d}.bin"), shard_size)
    n_docs = 0

    def all_docs():
        for path in files:
            yield from documents(path, max_docs)

    if procs > 1:
        with multiprocessing.Pool(procs, initializer=_init_worker) as pool:
            for toks in pool.imap(encode_document, all_docs(), chunksize=16):
                writer.add(toks)
                n_docs += 1
    else:
        _init_worker()
        for doc in all_docs():
            writer.add(encode_document(doc))
            n_docs += 1
    return writer.close(write_empty=True), n_docs


def outputs_valid(out_dir):
    """A val shard and at least one train shard that read back as llm.c shards."""
    val = sorted(glob.glob(os.path.join(out_dir, "prose_val_*.bin")))
    train = sorted(glob.glob(os.path.join(out_dir, "prose_train_*.bin")))
    if len(val) != 1 or not train:
        return False
    try:
        return all(len(read_datafile(p)) > 0 for p in val + train)
    except (OSError, ValueError):
        return False


def input_files(in_dir):
    """(train files, val file) of the corpus, sha256-checked when they are the shared copy."""
    check = in_dir is None
    d = in_dir if in_dir else os.path.join(shared_data_dir(), "corpus")
    names = list(TRAIN_FILES) + [VAL_FILE]
    missing = [n for n in names if not os.path.isfile(os.path.join(d, n))]
    if missing:
        where = "--in_dir" if in_dir else "the shared offline data (../shared/data, or $LLMC_SHARED_DATA)"
        raise FileNotFoundError(f"{os.path.join(d, missing[0])}: not found ({len(missing)} of the 3 corpus "
                                f"files missing from {where}; the corpus has no download)")
    if check:
        for n in names:
            got = sha256_of(os.path.join(d, n))
            if got != SHA256[n]:
                raise ValueError(f"{os.path.join(d, n)}: sha256 is {got}, expected {SHA256[n]}")
    return [os.path.join(d, n) for n in TRAIN_FILES], os.path.join(d, VAL_FILE)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Tokenize the offline English prose corpus into llm.c token shards.")
    ap.add_argument("--in_dir", help="folder with the three corpus files (default: the shared offline data)")
    ap.add_argument("--out_dir", default=os.path.join(repo_root(), "dev", "data", "prose"),
                    help="output folder (default: <repo>/dev/data/prose)")
    ap.add_argument("--shard_size", type=int, default=SHARD_SIZE, help="tokens per train shard (default 10^7)")
    ap.add_argument("--procs", type=int, default=min(4, os.cpu_count() or 1), help="tokenizer processes")
    ap.add_argument("--max_docs", type=int, help="only the first N documents of each corpus file")
    ap.add_argument("--force", action="store_true", help="rewrite the shards even if they are valid")
    args = ap.parse_args(argv)
    for name in ("shard_size", "procs", "max_docs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            print(f"error: --{name} {v}: expected a positive integer", file=sys.stderr)
            return 1
    if not args.force and args.max_docs is None and outputs_valid(args.out_dir):
        print(f"{args.out_dir}: the prose shards already exist and are valid; skipping (--force to redo)")
        return 0
    t0 = time.time()
    try:
        train_files, val_file = input_files(args.in_dir)
        os.makedirs(args.out_dir, exist_ok=True)
        for old in glob.glob(os.path.join(args.out_dir, "prose_*_*.bin")):
            os.remove(old)  # a smaller --shard_size or corpus must not leave shards of an older run
        val, n_val_docs = tokenize_split([val_file], args.out_dir, "val", 2**31 - 1, args.procs, args.max_docs)
        train, n_train_docs = tokenize_split(train_files, args.out_dir, "train", args.shard_size, args.procs,
                                             args.max_docs)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, n in val + train:
        print(f"wrote {path}: {n:,} tokens")
    print(f"val: {n_val_docs:,} documents, {sum(n for _, n in val):,} tokens; train: {n_train_docs:,} documents, "
          f"{sum(n for _, n in train):,} tokens in {len(train)} shards ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
