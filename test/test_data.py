"""test/test_data.py: tests of the data tooling in dev/data/.

Covers the pure-Python GPT-2 BPE (known ids, round trips, exact agreement with tiktoken built
offline from the same files on TinyShakespeare and HellaSwag text), the TinyShakespeare shards
(counts, sizes, the llm.c token stream), the prose corpus shards (documents, packing, shard
boundaries, any --procs, the shared copy's first documents), the shard reader's rejection of bad
files, and the tokenizer file. Needs the shared offline data and tiktoken; a missing one is a failure, not a skip.

Run: /usr/bin/python3 test/test_data.py
"""
import bz2
import glob
import importlib.util
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
from dev.data import data_common  # noqa: E402
from dev.data import gpt2_bpe  # noqa: E402

SHARED = data_common.shared_data_dir()
BPE_DIR = os.path.join(SHARED, "gpt2")
SHAKESPEARE = os.path.join(SHARED, "tinyshakespeare", "input.txt")
HELLASWAG = os.path.join(SHARED, "eval", "hellaswag_val_full.txt.bz2")


def run_script(name, *args):
    """Run a dev/data CLI with this interpreter; returns (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(DATA_SRC, name), *args],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def one_line_error(fn, *needles):
    """fn() must raise ValueError with a single-line message containing every needle."""
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        return "\n" not in msg and all(n in msg for n in needles)
    return False


def test_shared_data():
    ok = True
    for path in (os.path.join(BPE_DIR, "encoder.json"), os.path.join(BPE_DIR, "vocab.bpe"),
                 SHAKESPEARE, HELLASWAG):
        ok &= check(os.path.isfile(path), f"shared data present: {path}")
    return ok


def test_encoder(enc):
    check(enc.n_vocab == 50257 and enc.eot == 50256, "n_vocab 50257, eot 50256")
    ids = enc.encode("Hello world")
    check(ids == [15496, 995], f'encode("Hello world") == [15496, 995] (got {ids})')
    check(enc.encode("<|endoftext|>") != [50256], "ordinary encode does not produce the EOT id")
    check(enc.token_bytes(50256) == b"<|endoftext|>", "token_bytes(50256) == b'<|endoftext|>'")
    tricky = [
        "",
        "héllo wörld, naïve café — “quotes” ½ ±",
        "emoji 🤖🧠👍🏽 and a flag 🇺🇦 and ZWJ 👩‍👩‍👧",
        "many    spaces   here \t tab\u00a0nbsp  ",
        "lines\n\n\nwith\r\nCRLF\n  indented\n",
        "it's they're we've I'm you'll he'd IT'S 'twas",
        "中文字符 日本語のテキスト 한국어 العربية",
        "numbers 1234567890 3.14159 -42 1e-9",
        "<|endoftext|> is just text here",
        "\x00\x01 control bytes \x7f\u00ad soft hyphen",
    ]
    for s in tricky:
        check(enc.decode(enc.encode(s)) == s, f"decode(encode(s)) == s for {s!r}")


def test_against_tiktoken(enc, text):
    if importlib.util.find_spec("tiktoken") is None:
        check(False, "tiktoken importable (install: /usr/bin/python3 -m pip install "
                     "--break-system-packages tiktoken)")
        return None
    fast = gpt2_bpe.get_encoder(BPE_DIR, fast=True)
    check(fast.encode("Hello world") == [15496, 995], "tiktoken (offline build) encodes Hello world")
    mine, theirs = enc.encode(text), fast.encode(text)
    check(mine == theirs, f"pure-Python BPE == tiktoken on all of TinyShakespeare ({len(mine)} vs {len(theirs)} tokens)")
    with bz2.open(HELLASWAG, "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(200)]
    # endings are scored with a leading space, so check both forms of every line
    bad = [ln for ln in lines for s in (ln, " " + ln) if enc.encode(s) != fast.encode(s)]
    check(not bad, f"pure-Python BPE == tiktoken on the first 200 HellaSwag lines ({len(bad)} differ)")
    same = all(enc.token_bytes(i) == fast.token_bytes(i) for i in range(enc.n_vocab))
    check(same, "token_bytes agree with tiktoken for all 50257 ids")
    return fast


def test_tinyshakespeare(tmp, text, ref):
    out_dir = os.path.join(tmp, "ts")
    rc, out, err = run_script("tinyshakespeare.py", "--out_dir", out_dir)
    check(rc == 0, f"tinyshakespeare.py exits 0 (rc {rc}; {err.strip()})")
    val_path = os.path.join(out_dir, "tiny_shakespeare_val.bin")
    train_path = os.path.join(out_dir, "tiny_shakespeare_train.bin")
    if not check(os.path.isfile(val_path) and os.path.isfile(train_path), "tinyshakespeare.py wrote both shards"):
        return
    val = data_common.read_datafile(val_path)
    train = data_common.read_datafile(train_path)
    check(len(val) == 32768, f"val shard has 32,768 tokens (got {len(val)})")
    check(len(train) == 305260, f"train shard has 305,260 tokens (got {len(train)})")
    check(os.path.getsize(val_path) == 1024 + 2 * 32768, "val file is exactly 1024 + 2*32768 bytes")
    check(os.path.getsize(train_path) == 1024 + 2 * 305260, "train file is exactly 1024 + 2*305260 bytes")
    check(len(val) > 0 and val[0] == 50256, "val shard starts with EOT 50256")
    header = np.fromfile(val_path, dtype="<i4", count=256)
    check(header[0] == 20240520 and header[1] == 1 and header[2] == 32768 and not header[3:].any(),
          "val header is [20240520, 1, 32768, 0...]")
    if ref is not None:
        # the llm.c stream built independently with tiktoken
        sections = text.split("\n\n")
        expect = []
        for i, s in enumerate(sections):
            expect.append(50256)
            expect.extend(ref.encode(s + "\n\n" if i < len(sections) - 1 else s))
        got = np.concatenate([val, train]).tolist()
        check(got == expect, "val + train equals the llm.c token stream built with tiktoken")
    rc, out, _ = run_script("tinyshakespeare.py", "--out_dir", out_dir)
    check(rc == 0 and "skipping" in out, "tinyshakespeare.py skips when the shards are valid")
    rc, _, err = run_script("tinyshakespeare.py", "--out_dir", out_dir, "--input", os.path.join(tmp, "nope.txt"))
    check(rc != 0 and "nope.txt" in err and err.strip().count("\n") == 0,
          "tinyshakespeare.py with a missing --input exits non-zero with a one-line error")
    # --bytes: the same sections as bytes, each after EOT 0, independently rebuilt here
    rc, out, err = run_script("tinyshakespeare.py", "--out_dir", out_dir, "--bytes")
    bval_path = os.path.join(out_dir, "tiny_shakespeare_bytes_val.bin")
    bytes_made = rc == 0 and os.path.isfile(bval_path)
    if not check(bytes_made, f"tinyshakespeare.py --bytes exits 0 and writes the byte shards (rc {rc}; {err.strip()})"):
        return
    bval = data_common.read_datafile(bval_path)
    btrain = data_common.read_datafile(os.path.join(out_dir, "tiny_shakespeare_bytes_train.bin"))
    sections = text.split("\n\n")
    expect = []
    for i, s in enumerate(sections):
        expect.append(0)
        expect.extend((s + "\n\n" if i < len(sections) - 1 else s).encode("utf-8"))
    check(len(bval) == 32768 and len(btrain) == len(expect) - 32768,
          f"--bytes: 32,768 val tokens and the rest train ({len(bval)}, {len(btrain)}; {len(expect)} in all)")
    check(np.concatenate([bval, btrain]).tolist() == expect,
          "--bytes: val + train equals the sections' bytes, each after EOT 0")
    check(os.path.isfile(val_path) and len(data_common.read_datafile(val_path)) == 32768,
          "--bytes leaves the GPT-2 shards in the same folder as they were")
    rc, _, err = run_script("tinyshakespeare.py", "--out_dir", out_dir, "--bytes", "--force",
                            "--input", os.path.join(tmp, "nope.txt"))
    check(rc != 0 and "nope.txt" in err and err.strip().count("\n") == 0,
          "--bytes with a missing --input exits non-zero with a one-line error")


def test_prose(tmp, enc):
    """dev/data/prose.py on a small corpus of known documents, and on the shared copy's first ones."""
    src = os.path.join(tmp, "corpus")
    os.makedirs(src)
    docs = {"debian_prose_000.txt.xz": [["First paragraph.", "Second one, longer."], ["A lone line."]],
            "debian_prose_001.txt.xz": [["Third document:", "two paragraphs!"]],
            "debian_prose_val.txt.xz": [["The val document."], ["Another, held out."]]}
    for name, ds in docs.items():
        with lzma.open(os.path.join(src, name), "wt", encoding="utf-8") as f:
            f.write("\n\n".join("\n".join(d) for d in ds) + "\n")
    stream = lambda ds: [t for d in ds for t in [50256] + enc.encode("\n".join(d))]
    want_train = stream(docs["debian_prose_000.txt.xz"] + docs["debian_prose_001.txt.xz"])
    want_val = stream(docs["debian_prose_val.txt.xz"])
    outs = {}
    for procs in ("1", "2"):
        out = os.path.join(tmp, "prose" + procs)
        rc, so, err = run_script("prose.py", "--in_dir", src, "--out_dir", out, "--shard_size", "7", "--procs", procs)
        check(rc == 0, f"prose.py --procs {procs} exits 0 (rc {rc}; {err.strip()})")
        outs[procs] = out
    shards = sorted(glob.glob(os.path.join(outs["1"], "prose_train_*.bin")))
    got = [data_common.read_datafile(p) for p in shards]
    check([len(g) for g in got[:-1]] == [7] * (len(got) - 1) and 0 < len(got[-1]) <= 7,
          f"train shards of exactly --shard_size 7 tokens, the last one the rest ({[len(g) for g in got]})")
    check(np.concatenate(got).tolist() == want_train,
          "the train shards hold [EOT] + tokens of each document's paragraphs joined by newlines, in file order")
    val = [data_common.read_datafile(p) for p in sorted(glob.glob(os.path.join(outs["1"], "prose_val_*.bin")))]
    check(len(val) == 1 and val[0].tolist() == want_val, "one val shard with every val document")
    same = all(open(a, "rb").read() == open(b, "rb").read() for a, b in
               zip(sorted(glob.glob(os.path.join(outs["1"], "*.bin"))), sorted(glob.glob(os.path.join(outs["2"], "*.bin")))))
    check(same and len(glob.glob(os.path.join(outs["2"], "*.bin"))) == len(shards) + 1,
          "--procs 2 writes the same files byte for byte")
    os.remove(os.path.join(src, "debian_prose_001.txt.xz"))
    rc, _, err = run_script("prose.py", "--in_dir", src, "--out_dir", os.path.join(tmp, "prose_missing"))
    check(rc != 0 and err.strip().count("\n") == 0 and "debian_prose_001.txt.xz: not found" in err,
          f"a missing corpus file: one line naming it ({err.strip()})")
    with open(os.path.join(src, "debian_prose_001.txt.xz"), "wb") as f:
        f.write(b"not xz at all")
    rc, _, err = run_script("prose.py", "--in_dir", src, "--out_dir", os.path.join(tmp, "prose_bad"))
    check(rc != 0 and err.strip().count("\n") == 0 and "not an xz file" in err,
          f"a corrupt corpus file: one line ({err.strip()})")
    # the shared copy (sha256-checked): its first 40 documents of each file
    out = os.path.join(tmp, "prose_shared")
    rc, so, err = run_script("prose.py", "--out_dir", out, "--max_docs", "40", "--procs", "2")
    check(rc == 0 and "val: 40 documents" in so and "train: 80 documents" in so,
          f"the shared corpus: sha256 checked, the first 40 documents of each file ({err.strip() or so.strip().splitlines()[-1]})")
    toks = np.concatenate([data_common.read_datafile(p) for p in sorted(glob.glob(os.path.join(out, "prose_train_*.bin")))])
    check(len(toks) > 0 and toks[0] == 50256 and int((toks == 50256).sum()) == 80,
          f"... 80 train documents, each starting with EOT ({int((toks == 50256).sum())} EOTs in {len(toks)} tokens)")


def test_datafile(tmp):
    good = os.path.join(tmp, "good.bin")
    toks = np.arange(0, 1000, dtype=np.int64) * 50
    data_common.write_datafile(good, toks)
    check(np.array_equal(data_common.read_datafile(good), toks.astype(np.uint16)), "shard round trip")
    check(not os.path.exists(good + ".tmp"), "write_datafile leaves no .tmp file")
    raw = open(good, "rb").read()

    trunc = os.path.join(tmp, "truncated.bin")
    with open(trunc, "wb") as f:
        f.write(raw[:-2])
    check(one_line_error(lambda: data_common.read_datafile(trunc), trunc, "size"),
          "read_datafile rejects a truncated shard (one line, names file and size)")

    short = os.path.join(tmp, "short.bin")
    with open(short, "wb") as f:
        f.write(raw[:100])
    check(one_line_error(lambda: data_common.read_datafile(short), short, "header"),
          "read_datafile rejects a file shorter than the header")

    magic = os.path.join(tmp, "magic.bin")
    hdr = np.frombuffer(raw[:1024], dtype="<i4").copy()
    hdr[0] = 20240801  # a Llama-3 shard's magic
    with open(magic, "wb") as f:
        f.write(hdr.tobytes() + raw[1024:])
    check(one_line_error(lambda: data_common.read_datafile(magic), magic, "magic"),
          "read_datafile rejects a wrong-magic shard (one line, names file and magic)")

    version = os.path.join(tmp, "version.bin")
    hdr[0], hdr[1] = 20240520, 7
    with open(version, "wb") as f:
        f.write(hdr.tobytes() + raw[1024:])
    check(one_line_error(lambda: data_common.read_datafile(version), version, "version"),
          "read_datafile rejects a wrong-version shard")

    bad = os.path.join(tmp, "bad.bin")
    check(one_line_error(lambda: data_common.write_datafile(bad, [1, 65535]), bad),
          "write_datafile rejects token 65535")
    check(one_line_error(lambda: data_common.write_datafile(bad, [-1, 2]), bad),
          "write_datafile rejects a negative token")
    check(not os.path.exists(bad), "a rejected write leaves no file")


def test_download(tmp):
    """download() via a file:// URL: checks the hash, renames only when complete."""
    src = os.path.join(tmp, "src.txt")
    with open(src, "wb") as f:
        f.write(b"hello\n")
    digest = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"  # sha256("hello\n")
    url = "file://" + src
    dest = os.path.join(tmp, "dl", "ok.txt")
    data_common.download(url, dest, sha256=digest)
    check(open(dest, "rb").read() == b"hello\n", "download() fetches a file:// URL with a matching sha256")
    dest_bad = os.path.join(tmp, "dl", "bad.txt")
    check(one_line_error(lambda: data_common.download(url, dest_bad, sha256="0" * 64), url, "sha256"),
          "download() rejects a sha256 mismatch with a one-line error")
    check(sorted(os.listdir(os.path.join(tmp, "dl"))) == ["ok.txt"], "a rejected download leaves no file behind")
    # A download happens when no offline copy was found: its error names where one was looked for
    # first ($LLMC_SHARED_DATA, or ../shared/data next to the checkout, resolved) before the failure.
    missing_url = "file://" + os.path.join(tmp, "no_such_file.txt")
    sibling = os.path.normpath(os.path.join(REPO, "..", "shared", "data"))

    def download_error(env_value):
        saved = os.environ.get("LLMC_SHARED_DATA")
        if env_value is None:
            os.environ.pop("LLMC_SHARED_DATA", None)
        else:
            os.environ["LLMC_SHARED_DATA"] = env_value
        try:
            data_common.download(missing_url, os.path.join(tmp, "dl", "missing.txt"))
            return ""
        except OSError as e:
            return str(e)
        finally:
            if saved is None:
                os.environ.pop("LLMC_SHARED_DATA", None)
            else:
                os.environ["LLMC_SHARED_DATA"] = saved

    msg = download_error(None)
    check("\n" not in msg and f"$LLMC_SHARED_DATA is unset, so the checkout's ../shared/data: {sibling}" in msg
          and msg.index(sibling) < msg.index("could not download") and missing_url in msg,
          f"a failed download names the places searched first (variable unset): {msg}")
    other = os.path.join(tmp, "elsewhere")
    msg = download_error(other)
    check("\n" not in msg and f"$LLMC_SHARED_DATA={other}" in msg and f"instead of ../shared/data ({sibling})" in msg
          and msg.index(other) < msg.index("could not download"),
          f"a failed download names $LLMC_SHARED_DATA's value and the ../shared/data it replaced: {msg}")


def test_tokenizer_file(tmp, ref):
    path = os.path.join(tmp, "gpt2_tokenizer.bin")
    rc, out, err = run_script("gpt2_tokenizer.py", "--out", path)
    if not check(rc == 0 and os.path.isfile(path), f"gpt2_tokenizer.py exits 0 and writes the file ({err.strip()})"):
        return
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<u4")
    check(header[0] == 20240328 and header[1] == 2 and header[2] == 50257 and header[3] == 50256
          and not header[4:].any(), "tokenizer header is [20240328, 2, 50257, 50256, 0...]")
    tokens, pos, ok = [], 1024, True
    for _ in range(50257):
        if pos >= len(data) or data[pos] == 0:
            ok = False
            break
        n = data[pos]
        tokens.append(data[pos + 1:pos + 1 + n])
        pos += 1 + n
    check(ok and len(tokens) == 50257, "tokenizer body holds 50257 tokens with lengths 1..255")
    if not ok:
        return
    check(len(data) == 1024 + sum(1 + len(t) for t in tokens), "tokenizer file is 1024 + sum(1 + len) bytes")
    check(tokens[15496] == b"Hello", "tokenizer id 15496 is b'Hello'")
    check(tokens[995] == b" world", "tokenizer id 995 is b' world'")
    check(tokens[50256] == b"<|endoftext|>", "tokenizer id 50256 is b'<|endoftext|>'")
    if ref is not None:
        check(all(tokens[i] == ref.token_bytes(i) for i in range(50257)),
              "tokenizer bytes equal tiktoken's for every id")
    rc, out, _ = run_script("gpt2_tokenizer.py", "--out", path)
    check(rc == 0 and "skipping" in out, "gpt2_tokenizer.py skips when the file is up to date")


def main():
    if not test_shared_data():
        print(f"shared data missing under {SHARED} (set $LLMC_SHARED_DATA or place it at <repo>/../shared/data)")
        finish()
    enc = gpt2_bpe.get_encoder(BPE_DIR)
    with open(SHAKESPEARE, "r", encoding="utf-8") as f:
        text = f.read()
    test_encoder(enc)
    ref = test_against_tiktoken(enc, text)
    with tempfile.TemporaryDirectory(prefix="test_data_") as tmp:
        test_tinyshakespeare(tmp, text, ref)
        test_prose(tmp, enc)
        test_datafile(tmp)
        test_download(tmp)
        test_tokenizer_file(tmp, ref)
    finish()


if __name__ == "__main__":
    main()
