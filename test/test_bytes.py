"""test/test_bytes.py: the byte vocabulary on the Python side.

Covers
- train_gpt2.py's parse_descriptor with V<vocab>: V, Vp = ceil(V/128)*128, GPT-2's 50257 without
  it, bad values refused with one line naming the descriptor; a V 256 model's checkpoint header;
- dev/data/bytes_tokenizer.py: the tokenizer file (llm.c's version 2: magic, version, 256 tokens,
  EOT 0, each entry the one byte), idempotent; encode_documents: [0] + bytes per document, a NUL
  refused naming the document;
- dev/data/prose_bytes.py on a small corpus of known documents (UTF-8 included): the shards
  round-trip to the documents' bytes, EOT 0 before each document, shard sizes, the val split,
  idempotence, a NUL in the text is one error line.

Run: /usr/bin/python3 test/test_bytes.py   (a few seconds)
"""
import glob
import lzma
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA_SRC = os.path.join(REPO, "dev", "data")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401

from harness import check, finish  # noqa: E402
from dev.data import bytes_tokenizer  # noqa: E402
from dev.data import data_common  # noqa: E402
import train_gpt2 as tg  # noqa: E402


def run_script(name, *args):
    p = subprocess.run([sys.executable, os.path.join(DATA_SRC, name), *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def one_line_error(fn, *needles):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        return "\n" not in msg and all(n in msg for n in needles), msg
    return False, "no error"


def test_descriptors(tmp):
    c = tg.parse_descriptor("L4C128H4T256V256")
    check((c.n_layer, c.n_embd, c.n_head, c.block_size, c.vocab_size, c.padded_vocab_size) == (4, 128, 4, 256, 256, 256),
          "L4C128H4T256V256: L 4, C 128, 4 heads, maxT 256, V 256, Vp 256")
    c = tg.parse_descriptor("L2C64H2V300")
    check((c.block_size, c.vocab_size, c.padded_vocab_size) == (1024, 300, 384), "L2C64H2V300: maxT 1024, V 300, Vp 384")
    c = tg.parse_descriptor("L2C64H2T64")
    check((c.vocab_size, c.padded_vocab_size) == (50257, 50304), "no V: GPT-2's 50257 / 50304")
    check(tg.parse_descriptor("L2C64H2T64V2").padded_vocab_size == 128, "V2 (the smallest): Vp 128")
    check(tg.parse_descriptor("L2C64H2T64V16777216").vocab_size == 16777216, "V 16777216 (LLMC_MAX_VOCAB) accepted")
    for bad in ("L2C64H2T64V0", "L2C64H2T64V1", "L2C64H2T64V16777217", "L2C64H2T64V"):
        ok, msg = one_line_error(lambda: tg.parse_descriptor(bad), f"descriptor '{bad}'", "V<vocab>", "[2, 16777216]")
        check(ok, f"{bad} refused in one line: {msg}")
    for bad in ("L2C64H2V256T64", "L2C64H2T64V256x", "L2C64H2T64Vx"):
        ok, msg = one_line_error(lambda: tg.parse_descriptor(bad), bad, "[V<v>]")
        check(ok, f"{bad} is not a descriptor (one line naming the format): {msg}")
    # a V 256 model's checkpoint: llm.c's header with V 256, Vp 256; it reads back
    model = tg.GPT(tg.parse_descriptor("L2C64H2T64V256"), seed=42)
    path = os.path.join(tmp, "v256.bin")
    tg.write_model(model, path)
    h = np.fromfile(path, dtype="<i4", count=256)
    check(list(h[:8]) == [20240326, 3, 64, 256, 2, 2, 64, 256], f"V 256 checkpoint header[0..7] {list(h[:8])}")
    back = tg.load_model(path)
    check(back.config.vocab_size == 256 and back.wte.shape[0] == 256, "and loads back with V 256 (wte 256 rows)")
    rc = tg.main(["--model", "L2C64H2T64V1"])
    check(rc == 1, "train_gpt2.py --model L2C64H2T64V1 exits 1")


def test_tokenizer_file(tmp):
    data = bytes_tokenizer.tokenizer_bytes()
    h = np.frombuffer(data[:1024], dtype="<u4")
    check(list(h[:4]) == [20240328, 2, 256, 0] and not h[4:].any(),
          f"tokenizer header [20240328, 2, 256, 0, 0...] ({list(h[:4])})")
    body = data[1024:]
    check(len(body) == 512 and all(body[2 * i] == 1 and body[2 * i + 1] == i for i in range(256)),
          "each of the 256 entries is length 1 and the byte itself")
    out = os.path.join(tmp, "bt.bin")
    rc, so, err = run_script("bytes_tokenizer.py", "--out", out)
    check(rc == 0 and open(out, "rb").read() == data and "wrote" in so, f"bytes_tokenizer.py writes it ({err.strip()})")
    rc, so, _ = run_script("bytes_tokenizer.py", "--out", out)
    check(rc == 0 and "already exists and is valid" in so, "a second run leaves it (idempotent)")
    toks = bytes_tokenizer.encode_documents([b"ab", "\u00e9\n".encode(), b""], "x")
    check(toks.dtype == np.uint8 and toks.tolist() == [0, 97, 98, 0, 0xC3, 0xA9, 10, 0],
          f"encode_documents: [0] + bytes for each document ({toks.tolist()})")
    ok, msg = one_line_error(lambda: bytes_tokenizer.encode_documents([b"fine", b"bad\0here"], "corpus.xz"),
                             "corpus.xz", "document 2", "NUL", "offset 3")
    check(ok, f"a NUL byte in a document: one line naming the file, document and offset: {msg}")


def write_corpus(src, docs):
    os.makedirs(src, exist_ok=True)
    for name, ds in docs.items():
        with lzma.open(os.path.join(src, name), "wt", encoding="utf-8") as f:
            f.write("\n\n".join("\n".join(d) for d in ds) + "\n")


def test_prose_bytes(tmp):
    src = os.path.join(tmp, "corpus")
    docs = {"debian_prose_000.txt.xz": [["First paragraph.", "Second one, longer."], ["A lone line: caf\u00e9 \u2014 ok."]],
            "debian_prose_001.txt.xz": [["Third document:", "two paragraphs!"]],
            "debian_prose_val.txt.xz": [["The val document."], ["Another, held out."]]}
    write_corpus(src, docs)
    stream = lambda ds: b"".join(b"\0" + "\n".join(d).encode("utf-8") for d in ds)
    want_train = stream(docs["debian_prose_000.txt.xz"] + docs["debian_prose_001.txt.xz"])
    want_val = stream(docs["debian_prose_val.txt.xz"])
    out, tok = os.path.join(tmp, "pb"), os.path.join(tmp, "pb_tok.bin")
    rc, so, err = run_script("prose_bytes.py", "--in_dir", src, "--out_dir", out, "--shard_size", "16", "--tokenizer", tok)
    check(rc == 0, f"prose_bytes.py on a small corpus exits 0 ({err.strip()})")
    shards = sorted(glob.glob(os.path.join(out, "prose_bytes_train_*.bin")))
    got = [data_common.read_datafile(p) for p in shards]
    check(len(got) > 1 and [len(g) for g in got[:-1]] == [16] * (len(got) - 1) and 0 < len(got[-1]) <= 16,
          f"train shards of --shard_size 16 tokens, the last one the rest ({[len(g) for g in got]})")
    train = np.concatenate(got)
    check(train.astype(np.uint8).tobytes() == want_train and int(train.max()) < 256,
          "the train shards round-trip: [0] + each document's UTF-8 bytes (paragraphs joined by \\n), in file order")
    check(int((train == 0).sum()) == 3 and train[0] == 0, "EOT 0 before each of the 3 train documents, and nowhere else")
    val = [data_common.read_datafile(p) for p in sorted(glob.glob(os.path.join(out, "prose_bytes_val_*.bin")))]
    check(len(val) == 1 and val[0].astype(np.uint8).tobytes() == want_val, "one val shard with every val document")
    check(open(tok, "rb").read() == bytes_tokenizer.tokenizer_bytes(), "--tokenizer gets the byte tokenizer file")
    check("val: 2 documents" in so and "train: 3 documents" in so, "the summary counts the documents")
    rc, so, _ = run_script("prose_bytes.py", "--in_dir", src, "--out_dir", out, "--shard_size", "16", "--tokenizer", tok)
    check(rc == 0 and "already exist and are valid" in so, "a second run skips (idempotent)")
    # the same split and documents as prose.py: its documents() reads the files
    from dev.data import prose
    check([d for n in ("debian_prose_000.txt.xz", "debian_prose_001.txt.xz") for d in prose.documents(os.path.join(src, n))]
          == docs["debian_prose_000.txt.xz"] + docs["debian_prose_001.txt.xz"], "prose.documents reads the documents back")
    # a NUL in the text
    bad = os.path.join(tmp, "corpus_nul")
    write_corpus(bad, dict(docs, **{"debian_prose_001.txt.xz": [["ok"], ["bro\0ken"]]}))
    rc, _, err = run_script("prose_bytes.py", "--in_dir", bad, "--out_dir", os.path.join(tmp, "pb_nul"), "--tokenizer", tok)
    check(rc != 0 and err.strip().count("\n") == 0 and "debian_prose_001.txt.xz: document 2 holds a NUL byte" in err,
          f"a NUL in the corpus: one error line naming the file and document ({err.strip()})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for fn in (test_descriptors, test_tokenizer_file, test_prose_bytes):
            print(f"== {fn.__name__}", flush=True)
            fn(tmp)
    finish()


if __name__ == "__main__":
    main()
