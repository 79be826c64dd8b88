"""dev/data/gpt2_bpe.py: an offline GPT-2 byte-level BPE tokenizer, written from scratch.

Defines
- find_bpe_files(bpe_dir=None) -> (encoder_json_path, vocab_bpe_path): locates OpenAI's two
  GPT-2 tokenizer files locally, downloading them into a cache only when no local copy exists;
- get_encoder(bpe_dir=None, fast=False|True|"auto"): an encoder with encode(text) -> list[int] (ordinary
  text: "<|endoftext|>" in the text is encoded as plain characters), decode(ids) -> str,
  token_bytes(id) -> bytes, n_vocab (50257) and eot (50256).

The default encoder needs only the `regex` module. fast=True returns the same interface backed by
tiktoken, built offline from the same local files (tiktoken must then be installed).

How GPT-2's BPE works: text is first split into pieces by a regex (contractions, runs of letters,
runs of digits, runs of other symbols, whitespace), each with at most one leading space. Each
piece is turned into UTF-8 bytes, and each byte into one printable unicode character (so the
vocabulary files can be plain text). Then, within a piece, the adjacent pair of symbols with the
lowest merge rank (its line number in vocab.bpe) is merged, repeatedly, until no pair has a rank.
The resulting symbols are looked up in encoder.json.

CLI: python dev/data/gpt2_bpe.py "some text"  prints the ids and the decoded pieces.
"""
import importlib.util
import json
import os
import sys

import regex

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
from dev.data.data_common import cache_dir, download, shared_data_dir  # noqa: E402

# GPT-2's pre-tokenization pattern (case-sensitive contractions, as in the original)
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

ENCODER_JSON = "encoder.json"
VOCAB_BPE = "vocab.bpe"
BPE_BASE_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
# sha256 of OpenAI's files (see shared/data/README.md); checked on download
BPE_SHA256 = {
    ENCODER_JSON: "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    VOCAB_BPE: "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
N_VOCAB = 50257
EOT_ID = 50256
EOT_TEXT = "<|endoftext|>"


def _has_bpe_files(d):
    return os.path.isfile(os.path.join(d, ENCODER_JSON)) and os.path.isfile(os.path.join(d, VOCAB_BPE))


def _paths(d):
    return os.path.join(d, ENCODER_JSON), os.path.join(d, VOCAB_BPE)


def find_bpe_files(bpe_dir=None):
    """Return (encoder_json_path, vocab_bpe_path).

    Search order: bpe_dir, then $GPT2_BPE_DIR (either, when given, must hold both files), then
    <shared data>/gpt2, then the cache ~/.cache/llmc_prism/gpt2, downloading there as a last
    resort. The network is never touched when a local copy exists."""
    for name, d in (("bpe_dir", bpe_dir), ("$GPT2_BPE_DIR", os.environ.get("GPT2_BPE_DIR"))):
        if d:
            if not _has_bpe_files(d):
                raise FileNotFoundError(f"{name} {d}: expected {ENCODER_JSON} and {VOCAB_BPE} there")
            return _paths(d)
    shared = os.path.join(shared_data_dir(), "gpt2")
    if _has_bpe_files(shared):
        return _paths(shared)
    cache = cache_dir("gpt2")
    for fname in (ENCODER_JSON, VOCAB_BPE):
        dest = os.path.join(cache, fname)
        if not os.path.isfile(dest):
            download(BPE_BASE_URL + fname, dest, sha256=BPE_SHA256[fname])
    return _paths(cache)


def bytes_to_unicode():
    """GPT-2's reversible byte -> character table. Bytes that are printable Latin-1 characters
    (other than space) stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0,
    the soft hyphen 0xAD) take the characters 256, 257, ... in byte order."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class GPT2Encoder:
    """Pure-Python GPT-2 BPE. Construct with the two file paths (see find_bpe_files)."""

    def __init__(self, encoder_json_path, vocab_bpe_path):
        with open(encoder_json_path, "r", encoding="utf-8") as f:
            vocab = json.load(f)
        if len(vocab) != N_VOCAB or sorted(vocab.values()) != list(range(N_VOCAB)):
            raise ValueError(f"{encoder_json_path}: expected {N_VOCAB} tokens with ids 0..{N_VOCAB - 1}")
        if vocab.get(EOT_TEXT) != EOT_ID:
            raise ValueError(f"{encoder_json_path}: expected {EOT_TEXT} to have id {EOT_ID}")
        with open(vocab_bpe_path, "r", encoding="utf-8") as f:
            lines = f.read().split("\n")
        # first line is "#version: 0.2"; one merge "a b" per line after it; trailing newline
        merges = [ln.split(" ") for ln in lines[1:] if ln]
        if any(len(m) != 2 for m in merges):
            raise ValueError(f"{vocab_bpe_path}: expected one merge 'left right' per line after the version line")
        self.ranks = {(a, b): i for i, (a, b) in enumerate(merges)}

        self.byte_to_char = bytes_to_unicode()
        char_to_byte = {c: b for b, c in self.byte_to_char.items()}
        self.token_to_id = vocab
        self._id_to_bytes = [b""] * N_VOCAB
        for tok, i in vocab.items():
            self._id_to_bytes[i] = bytes(char_to_byte[c] for c in tok)
        # str.translate table from a latin-1 decoded byte string to GPT-2's characters
        self._latin1_to_gpt2 = {b: self.byte_to_char[b] for b in range(256)}
        self._pattern = regex.compile(GPT2_PATTERN)
        self._cache = {}  # pre-token piece -> ids; text repeats pieces heavily
        self.n_vocab = N_VOCAB
        self.eot = EOT_ID

    def _bpe(self, word):
        """Merge the symbols of one mapped piece; returns the final symbol strings."""
        symbols = list(word)
        ranks = self.ranks
        while len(symbols) > 1:
            best_rank, best = None, None
            for pair in zip(symbols, symbols[1:]):
                r = ranks.get(pair)
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank, best = r, pair
            if best is None:
                break
            first, second = best
            merged = first + second
            out = []
            i, n = 0, len(symbols)
            while i < n:
                # merge every occurrence of the best pair, scanning left to right
                if i < n - 1 and symbols[i] == first and symbols[i + 1] == second:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            symbols = out
        return symbols

    def _encode_piece(self, piece):
        ids = self._cache.get(piece)
        if ids is None:
            word = piece.encode("utf-8").decode("latin-1").translate(self._latin1_to_gpt2)
            ids = [self.token_to_id[s] for s in self._bpe(word)]
            self._cache[piece] = ids
        return ids

    def encode(self, text):
        """Encode ordinary text (no special tokens) to a list of ids."""
        out = []
        for piece in self._pattern.findall(text):
            out.extend(self._encode_piece(piece))
        return out

    def token_bytes(self, i):
        """The raw bytes of token i."""
        if not 0 <= i < N_VOCAB:
            raise ValueError(f"token id {i} out of range [0, {N_VOCAB})")
        return self._id_to_bytes[i]

    def decode_bytes(self, ids):
        return b"".join(self.token_bytes(int(i)) for i in ids)

    def decode(self, ids):
        """Decode ids to text; byte sequences that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


class TiktokenEncoder:
    """The same interface backed by tiktoken, built offline from the local files."""

    def __init__(self, encoder_json_path, vocab_bpe_path):
        import tiktoken
        import tiktoken.load

        # tiktoken would otherwise copy the files into a cache keyed by their path, and a stale
        # copy there could shadow a changed file; an empty cache dir turns that off
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = ""
        try:
            ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(vocab_bpe_path, encoder_json_path)
        finally:
            if saved is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved
        self._enc = tiktoken.Encoding(
            name="gpt2_offline",
            pat_str=GPT2_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={EOT_TEXT: EOT_ID},
        )
        if self._enc.n_vocab != N_VOCAB:
            raise ValueError(f"{encoder_json_path}: tiktoken built {self._enc.n_vocab} tokens, expected {N_VOCAB}")
        self.n_vocab = N_VOCAB
        self.eot = EOT_ID

    def encode(self, text):
        return self._enc.encode_ordinary(text)

    def token_bytes(self, i):
        if not 0 <= i < N_VOCAB:
            raise ValueError(f"token id {i} out of range [0, {N_VOCAB})")
        return self._enc.decode_single_token_bytes(i)

    def decode_bytes(self, ids):
        return self._enc.decode_bytes([int(i) for i in ids])

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def get_encoder(bpe_dir=None, fast=False):
    """Build an encoder from the local GPT-2 files (see find_bpe_files). fast=True uses tiktoken;
    fast="auto" uses it when it is installed and the pure-Python BPE otherwise (same ids)."""
    encoder_json, vocab_bpe = find_bpe_files(bpe_dir)
    if fast == "auto":
        fast = importlib.util.find_spec("tiktoken") is not None
    cls = TiktokenEncoder if fast else GPT2Encoder
    return cls(encoder_json, vocab_bpe)


def main(argv):
    if len(argv) != 1:
        print('usage: python dev/data/gpt2_bpe.py "text to encode"', file=sys.stderr)
        return 2
    try:
        enc = get_encoder()
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    ids = enc.encode(argv[0])
    print(ids)
    print([enc.token_bytes(i) for i in ids])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
