"""dev/data/prose_bytes.py: the offline English prose corpus as byte-level token shards (V = 256),
for CPU models that train past what a 50257-token vocabulary allows at small size
(doc/formats.md "The byte vocabulary and its shards").

Usage: python dev/data/prose_bytes.py [--in_dir DIR] [--out_dir DIR] [--shard_size N] [--max_docs N]
                                      [--tokenizer PATH] [--force]

The same documents, train/val split and document order as dev/data/prose.py (`make prose`), read by
its code (prose.input_files, prose.documents: sha256-checked shared copy, paragraphs joined by
"\\n"); each document becomes [EOT 0] + its UTF-8 bytes (dev/data/bytes_tokenizer.py: token = byte
value, a NUL in the text is an error). Documents are packed back to back into llm.c shards of
--shard_size tokens (default 10^7) by data_common.ShardWriter; val is one shard. Outputs:
<out_dir>/prose_bytes_val_000000.bin and prose_bytes_train_%06d.bin (default out_dir:
<repo>/dev/data/prose_bytes), and the tokenizer file for -tok (default <repo>/bytes_tokenizer.bin).
About 82.3M train and 4.5M val tokens; 4-15 s on 2 cores (mostly writing 173 MB).
"""
import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data import prose  # noqa: E402
from dev.data.bytes_tokenizer import encode_documents, write_tokenizer  # noqa: E402
from dev.data.data_common import ShardWriter, read_datafile, repo_root  # noqa: E402

SHARD_SIZE = prose.SHARD_SIZE
PREFIX = "prose_bytes"


def write_split(files, out_dir, split, shard_size=None, max_docs=None):
    """Every document of files (prose.documents) as byte tokens into the split's shards of
    shard_size tokens (None: one shard); returns [(path, tokens)] and the document count."""
    streams, n_docs = [], 0
    for path in files:
        docs = ["\n".join(d).encode("utf-8") for d in prose.documents(path, max_docs)]
        streams.append(encode_documents(docs, path))  # a NUL names its file and document
        n_docs += len(docs)
    size = shard_size if shard_size is not None else max(1, sum(len(s) for s in streams))
    writer = ShardWriter(lambda i: os.path.join(out_dir, f"{PREFIX}_{split}_{i:06d}.bin"), size)
    for s in streams:
        writer.add(s)
    return writer.close(write_empty=True), n_docs


def outputs_valid(out_dir, tokenizer):
    """A val shard, at least one train shard that read back as llm.c shards, and the tokenizer."""
    val = sorted(glob.glob(os.path.join(out_dir, f"{PREFIX}_val_*.bin")))
    train = sorted(glob.glob(os.path.join(out_dir, f"{PREFIX}_train_*.bin")))
    if len(val) != 1 or not train or not os.path.isfile(tokenizer):
        return False
    try:
        return all(len(read_datafile(p)) > 0 for p in val + train)
    except (OSError, ValueError):
        return False


def main(argv=None):
    ap = argparse.ArgumentParser(description="The offline prose corpus as byte-level llm.c token shards (V 256, EOT 0).")
    ap.add_argument("--in_dir", help="folder with the three corpus files (default: the shared offline data)")
    ap.add_argument("--out_dir", default=os.path.join(repo_root(), "dev", "data", PREFIX),
                    help=f"output folder (default: <repo>/dev/data/{PREFIX})")
    ap.add_argument("--shard_size", type=int, default=SHARD_SIZE, help="tokens per train shard (default 10^7)")
    ap.add_argument("--max_docs", type=int, help="only the first N documents of each corpus file")
    ap.add_argument("--tokenizer", default=os.path.join(repo_root(), "bytes_tokenizer.bin"),
                    help="where the byte tokenizer file goes (default: <repo>/bytes_tokenizer.bin)")
    ap.add_argument("--force", action="store_true", help="rewrite the shards even if they are valid")
    args = ap.parse_args(argv)
    for name in ("shard_size", "max_docs"):
        v = getattr(args, name)
        if v is not None and v < 1:
            print(f"error: --{name} {v}: expected a positive integer", file=sys.stderr)
            return 1
    if not args.force and args.max_docs is None and outputs_valid(args.out_dir, args.tokenizer):
        print(f"{args.out_dir}: the byte shards already exist and are valid; skipping (--force to redo)")
        return 0
    t0 = time.time()
    try:
        train_files, val_file = prose.input_files(args.in_dir)
        os.makedirs(args.out_dir, exist_ok=True)
        for old in glob.glob(os.path.join(args.out_dir, f"{PREFIX}_*_*.bin")):
            os.remove(old)  # a smaller --shard_size or corpus must not leave shards of an older run
        val, n_val = write_split([val_file], args.out_dir, "val", None, args.max_docs)
        train, n_train = write_split(train_files, args.out_dir, "train", args.shard_size, args.max_docs)
        write_tokenizer(args.tokenizer, force=args.force)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path, n in val + train:
        print(f"wrote {path}: {n:,} tokens")
    print(f"tokenizer: {args.tokenizer} (V 256, EOT 0)")
    print(f"val: {n_val:,} documents, {sum(n for _, n in val):,} tokens; train: {n_train:,} documents, "
          f"{sum(n for _, n in train):,} tokens in {len(train)} shards ({time.time() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
