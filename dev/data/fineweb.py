"""dev/data/fineweb.py: tokenize FineWeb or FineWeb-Edu into llm.c token shards (doc/formats.md "Token shards").

Usage:
  python dev/data/fineweb.py -t classic -v 10B            # stream HuggingFaceFW/fineweb sample-10BT
  python dev/data/fineweb.py -t edu -v 100B               # HuggingFaceFW/fineweb-edu sample-100BT
  python dev/data/fineweb.py --local DIR_OR_FILES ... [-s SHARD_SIZE] [--out_dir DIR]

What llm.c's fineweb.py writes, file for file: every document becomes [<|endoftext|> 50256] +
its GPT-2 tokens, documents are packed back to back into shards of --shard_size tokens (10^8), a
document that does not fit is split across the shard boundary, and the last shard keeps whatever
is left. Shard 0 is the val shard. Names: <out_dir>/<prefix>_{val,train}_%06d.bin with prefix
"fineweb" (-t classic) or "edu_fineweb" (-t edu); the default out_dir is dev/data/<prefix><-v>,
e.g. dev/data/fineweb10B.

Sources: with a network and the `datasets` package (imported only then), the HF dataset is
streamed. With --local, documents come from local files in FineWeb's schema (a "text" field per
record): .jsonl (optionally .gz) or .parquet (needs pyarrow); a folder means its .jsonl/.parquet
files in name order. Tokenization runs in --procs worker processes (multiprocessing, imap with
order kept, so the output is identical for any --procs).
"""
import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402

from dev.data.data_common import ShardWriter, parse_error, read_jsonl, repo_root  # noqa: E402

EOT = 50256
SHARD_SIZE = 10**8
HF_NAMES = {"classic": ("HuggingFaceFW/fineweb", "fineweb"),
            "edu": ("HuggingFaceFW/fineweb-edu", "edu_fineweb")}
HF_SAMPLES = {"10B": "sample-10BT", "100B": "sample-100BT"}


# ---------------------------------------------------------------------------------------------
# Documents

def local_files(paths):
    """Expand folders into their .jsonl[.gz]/.parquet files, sorted by name; keep files as given."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(f for pat in ("*.jsonl", "*.jsonl.gz", "*.parquet")
                           for f in glob.glob(os.path.join(p, pat)))
            if not found:
                raise FileNotFoundError(f"{p}: no .jsonl, .jsonl.gz or .parquet files in this folder")
            files.extend(found)
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return files


def docs_from_jsonl(path):
    for lineno, rec in read_jsonl(path):
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise parse_error(path, lineno, "expected a string field 'text' (FineWeb's schema)")
        yield rec["text"]


def docs_from_parquet(path):
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ValueError(f"{path}: reading parquet needs pyarrow (pip install pyarrow); "
                         f"or pass .jsonl files") from e
    pf = pq.ParquetFile(path)
    if "text" not in pf.schema_arrow.names:
        raise ValueError(f"{path}: no 'text' column (FineWeb's schema); columns: {pf.schema_arrow.names}")
    for batch in pf.iter_batches(columns=["text"], batch_size=1024):
        yield from batch.column(0).to_pylist()


def local_docs(paths):
    for path in local_files(paths):
        yield from (docs_from_parquet(path) if path.endswith(".parquet") else docs_from_jsonl(path))


def hf_docs(kind, version):
    """Stream the HF sample; `datasets` is imported only here."""
    try:
        from datasets import load_dataset
    except ImportError as e:
        raise ValueError("streaming FineWeb needs the datasets package (pip install datasets) and a "
                         "network; or pass --local with files in FineWeb's schema") from e
    name, _ = HF_NAMES[kind]
    try:
        for rec in load_dataset(name, name=HF_SAMPLES[version], split="train", streaming=True):
            yield rec["text"]
    except Exception as e:  # network, authentication, schema: one line naming the dataset
        first = str(e).strip().split("\n")[0]
        raise ValueError(f"{name} {HF_SAMPLES[version]}: streaming failed: {type(e).__name__}: {first}") from e


# ---------------------------------------------------------------------------------------------
# Tokenization (one encoder per worker process)

_ENC = None


def _init_worker(fast):
    global _ENC
    from dev.data.gpt2_bpe import get_encoder
    _ENC = get_encoder(fast=fast)


def tokenize_doc(text):
    """[EOT] + the document's tokens, as uint16 (every GPT-2 id is < 2^16)."""
    toks = [EOT]
    toks.extend(_ENC.encode(text))
    return np.asarray(toks, dtype=np.uint16)


def token_stream(docs, procs, fast):
    """Tokenized documents in input order."""
    if procs <= 1:
        _init_worker(fast)
        for d in docs:
            yield tokenize_doc(d)
        return
    import multiprocessing as mp
    with mp.Pool(procs, initializer=_init_worker, initargs=(fast,)) as pool:
        yield from pool.imap(tokenize_doc, docs, chunksize=16)


# ---------------------------------------------------------------------------------------------
# Shards: shard 0 is val, the rest train (llm.c's fineweb.py layout)

def shard_path(out_dir, prefix, index):
    split = "val" if index == 0 else "train"
    return os.path.join(out_dir, f"{prefix}_{split}_{index:06d}.bin")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Tokenize FineWeb(-Edu) into llm.c token shards "
                                             "(EOT before each document; shard 0 = val).")
    ap.add_argument("-t", "--type", choices=("classic", "edu"), default="classic",
                    help="FineWeb (classic) or FineWeb-Edu (edu)")
    ap.add_argument("-v", "--version", choices=("10B", "100B"), default="10B",
                    help="the HF sample: sample-10BT or sample-100BT")
    ap.add_argument("-s", "--shard_size", type=int, default=SHARD_SIZE,
                    help=f"tokens per shard (default {SHARD_SIZE:,}, llm.c's)")
    ap.add_argument("--local", nargs="+", metavar="PATH",
                    help="read documents from these .jsonl[.gz]/.parquet files or folders, not HF")
    ap.add_argument("--out_dir", help="output folder (default: dev/data/<prefix><version>)")
    ap.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 1) - 2),
                    help="tokenizer processes (default: cores - 2, at least 1)")
    ap.add_argument("--max_docs", type=int, default=0, help="stop after this many documents (0: all)")
    ap.add_argument("--pure", action="store_true",
                    help="the pure-Python BPE instead of tiktoken (same ids, slower)")
    args = ap.parse_args(argv)
    if args.shard_size < 1:
        print(f"error: --shard_size {args.shard_size}: expected >= 1", file=sys.stderr)
        return 2
    if args.procs < 1:
        print(f"error: --procs {args.procs}: expected >= 1", file=sys.stderr)
        return 2
    _, prefix = HF_NAMES[args.type]
    out_dir = args.out_dir or os.path.join(repo_root(), "dev", "data", f"{prefix}{args.version}")
    fast = False if args.pure else "auto"  # tiktoken when installed (gpt2_bpe.get_encoder)
    t0 = time.time()
    try:
        docs = local_docs(args.local) if args.local else hf_docs(args.type, args.version)
        if args.max_docs > 0:
            docs = (d for i, d in zip(range(args.max_docs), docs))
        writer = ShardWriter(lambda i: shard_path(out_dir, prefix, i), args.shard_size, log=True)
        ndocs = ntok = 0
        for toks in token_stream(docs, args.procs, fast):
            writer.add(toks)
            ndocs += 1
            ntok += len(toks)
        writer.close()
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if ndocs == 0:
        print("error: no documents read", file=sys.stderr)
        return 1
    print(f"{ndocs:,} documents, {ntok:,} tokens in {len(writer.written)} shard(s) in {out_dir} "
          f"({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
