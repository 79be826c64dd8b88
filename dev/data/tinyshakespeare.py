"""dev/data/tinyshakespeare.py: tokenize TinyShakespeare into llm.c token shards.

Usage: python dev/data/tinyshakespeare.py [--input PATH] [--out_dir DIR] [--bytes] [--force]

Reads input.txt from the shared offline data (<repo>/../shared/data/tinyshakespeare/, or
$LLMC_SHARED_DATA), else from the cache ~/.cache/llmc_prism/tinyshakespeare/, downloading it there
when absent (sha256-checked). Tokenizes it as llm.c does: the text is split on blank lines
("\\n\\n"), every section gets an <|endoftext|> (50256) in front, and every section except the
last keeps its "\\n\\n". The first 32,768 tokens are validation, the rest training. Writes
<out_dir>/tiny_shakespeare_val.bin and tiny_shakespeare_train.bin (default out_dir:
<repo>/dev/data/tinyshakespeare). With GPT-2's BPE that is 338,028 tokens = 32,768 + 305,260.

--bytes writes the same text as bytes for byte models (descriptor ...V256; doc/formats.md "The byte vocabulary and its shards"): the
sections split and kept the same way, each after the byte vocabulary's end-of-text token 0
(dev/data/bytes_tokenizer.py), the first 32,768 tokens validation; tiny_shakespeare_bytes_val.bin
and tiny_shakespeare_bytes_train.bin, 1,122,616 tokens = 32,768 + 1,089,848. The test suites
train their small models on these, where a 256-way output layer costs a 200th of GPT-2's.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import (cache_dir, download, read_datafile, repo_root, sha256_of,  # noqa: E402
                         shared_data_dir, write_datafile)
from dev.data.gpt2_bpe import get_encoder  # noqa: E402
from dev.data import bytes_tokenizer  # noqa: E402

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
VAL_TOKENS = 32768
VAL_NAME = "tiny_shakespeare_val.bin"
TRAIN_NAME = "tiny_shakespeare_train.bin"
BYTES_VAL_NAME = "tiny_shakespeare_bytes_val.bin"
BYTES_TRAIN_NAME = "tiny_shakespeare_bytes_train.bin"


def default_input():
    """The shared copy if present, else the cached download (fetched now if missing)."""
    shared = os.path.join(shared_data_dir(), "tinyshakespeare", "input.txt")
    if os.path.isfile(shared):
        path = shared
    else:
        path = os.path.join(cache_dir("tinyshakespeare"), "input.txt")
        if not os.path.isfile(path):
            download(URL, path, sha256=SHA256)
    got = sha256_of(path)
    if got != SHA256:
        raise ValueError(f"{path}: sha256 is {got}, expected {SHA256} (TinyShakespeare input.txt)")
    return path


def sections(text):
    """llm.c's documents of TinyShakespeare: the text split at blank lines, every section but the
    last keeping its "\\n\\n"."""
    parts = text.split("\n\n")
    return [p + "\n\n" if i < len(parts) - 1 else p for i, p in enumerate(parts)]


def tokenize(text, enc):
    """llm.c's TinyShakespeare tokenization (see the module docstring): EOT, then each section."""
    tokens = []
    for section in sections(text):
        tokens.append(enc.eot)
        tokens.extend(enc.encode(section))
    return tokens


def tokenize_bytes(text):
    """The byte tokenization (see the module docstring): EOT 0, then each section's bytes."""
    docs = [section.encode("utf-8") for section in sections(text)]
    return bytes_tokenizer.encode_documents(docs, "tinyshakespeare").tolist()


def outputs_valid(val_path, train_path):
    """True when both shards exist, parse, and the val shard has the fixed size."""
    try:
        val = read_datafile(val_path)
        train = read_datafile(train_path)
    except (OSError, ValueError):
        return False
    return len(val) == VAL_TOKENS and len(train) > 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Tokenize TinyShakespeare into llm.c token shards.")
    ap.add_argument("--input", help="input.txt (default: shared data, else download)")
    ap.add_argument("--out_dir", default=os.path.join(repo_root(), "dev", "data", "tinyshakespeare"),
                    help="output folder (default: <repo>/dev/data/tinyshakespeare)")
    ap.add_argument("--bytes", action="store_true",
                    help="write the byte shards (tiny_shakespeare_bytes_*.bin, V 256) instead")
    ap.add_argument("--force", action="store_true", help="rewrite the shards even if they are valid")
    args = ap.parse_args(argv)

    # a bad --input is an error even when the outputs already exist
    if args.input and not os.path.isfile(args.input):
        print(f"error: {args.input}: input file not found", file=sys.stderr)
        return 1
    val_path = os.path.join(args.out_dir, BYTES_VAL_NAME if args.bytes else VAL_NAME)
    train_path = os.path.join(args.out_dir, BYTES_TRAIN_NAME if args.bytes else TRAIN_NAME)
    if not args.force and outputs_valid(val_path, train_path):
        print(f"{val_path} and {train_path} already exist and are valid; skipping (--force to redo)")
        return 0

    try:
        path = args.input if args.input else default_input()
        try:
            with open(path, "r", encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
        tokens = tokenize_bytes(text) if args.bytes else tokenize(text, get_encoder())
        if len(tokens) <= VAL_TOKENS:
            raise ValueError(f"{path}: gives {len(tokens)} tokens, expected more than {VAL_TOKENS} "
                             f"(the first {VAL_TOKENS} are the val split)")
        n_val = write_datafile(val_path, tokens[:VAL_TOKENS])
        n_train = write_datafile(train_path, tokens[VAL_TOKENS:])
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"read {path}: {len(text):,} characters -> {len(tokens):,} tokens")
    print(f"wrote {val_path}: {n_val:,} tokens")
    print(f"wrote {train_path}: {n_train:,} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
