"""test/fuzz/make_seeds.py: writes the seed corpus of the fuzz targets into test/fuzz/corpus/.

    python3 test/fuzz/make_seeds.py

Each target gets small valid inputs (ok-*: the replay in make test expects them accepted) and a
few invalid ones (bad-*: expected rejected with an error), in the formats of doc/formats.md. The
corpus is kept in the repository; inputs the fuzzer finds that crashed a reader are added to it by
hand as crash-* files (replayed too: they must no longer crash). Re-running this script rewrites
only the ok-* and bad-* files.
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(ROOT, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def header(values):
    h = [0] * 256
    for i, v in values.items():
        h[i] = v
    return struct.pack("<256i", *h)


# ---------------------------------------------------------------------------------------------
# checkpoints (doc/formats.md "Model checkpoint"): a model with a 16-token vocabulary keeps the files small
def n_params(maxT, V, Vp, C, layers, use_ln=True, scalar_d=False):
    """Parameter count of llmc/param_layout.h: layers = [(h, d, kind)], kind 0 mha .. 3 sdlin."""
    total = Vp * C + maxT * C + 2 * C
    for h, d, kind in layers:
        A = h * d
        sd = kind in (1, 3)
        rows = 2 if sd else 3
        total += (4 * C if use_ln else 0) + rows * A * C + rows * A + C * A + C
        total += 4 * C * C + 4 * C + C * 4 * C + C
        if sd:
            total += h * d * (d - 1) // 2 + (h if scalar_d else h * d)
    return total


def checkpoint(version, maxT, V, Vp, C, layers, base_heads, flags=0, bf16=False):
    h = {0: 20240326, 1: version, 2: maxT, 3: V, 4: len(layers), 5: base_heads, 6: C, 7: Vp}
    if version in (103, 105):
        h[8] = 1
        h[9] = flags
        for l, (nh, d, kind) in enumerate(layers):
            h[16 + 3 * l], h[17 + 3 * l], h[18 + 3 * l] = nh, d, kind
    n = n_params(maxT, V, Vp, C, layers, use_ln=not (flags & 1), scalar_d=bool(flags & 2))
    body = struct.pack("<%dH" % n, *([0x3c00] * n)) if bf16 else struct.pack("<%df" % n, *([0.01] * n))
    return header(h) + body


uni = [(2, 4, 0), (2, 4, 0)]
put("checkpoint", "ok-v3.bin", checkpoint(3, 8, 16, 16, 8, uni, 2))
put("checkpoint", "ok-v5-bf16.bin", checkpoint(5, 8, 16, 16, 8, uni, 2, bf16=True))
put("checkpoint", "ok-v103-kinds.bin", checkpoint(103, 8, 16, 16, 8, [(1, 8, 1), (2, 4, 2), (2, 4, 3)], 2))
put("checkpoint", "ok-v105-noln-scalar.bin", checkpoint(105, 8, 16, 16, 8, [(2, 4, 1), (1, 8, 0)], 2, flags=1 | 2 | 8, bf16=True))
put("checkpoint", "bad-truncated.bin", checkpoint(3, 8, 16, 16, 8, uni, 2)[:1500])
put("checkpoint", "bad-header-only-wrap.bin", header({0: 20240326, 1: 3, 2: 2147483634, 3: 16, 4: 1, 5: 1,
                                                       6: 1073741824, 7: 2147483647}))
put("checkpoint", "bad-kind.bin", checkpoint(103, 8, 16, 16, 8, [(2, 4, 7), (2, 4, 0)], 2))

# ---------------------------------------------------------------------------------------------
# token shards (doc/formats.md "Token shards")
def shard(tokens, ntok=None):
    return header({0: 20240520, 1: 1, 2: len(tokens) if ntok is None else ntok}) + struct.pack("<%dH" % len(tokens), *tokens)


put("shard", "ok-shard.bin", shard([(i * 37) % 50257 for i in range(120)]))
put("shard", "bad-size.bin", shard(list(range(40)), ntok=41))
put("shard", "bad-token.bin", shard([50257] + list(range(60))))
put("shard", "bad-llama3.bin", header({0: 20240801, 1: 7, 2: 0}))

# ---------------------------------------------------------------------------------------------
# tokenizer files (doc/formats.md "Tokenizer file")
def tokenizer(words, version=2, eot=None):
    h = header({0: 20240328, 1: version, 2: len(words), 3: len(words) - 1 if eot is None else eot})
    return h + b"".join(bytes([len(w)]) + w for w in words)


words = [b"a", b"b", b" the", b"\n", b"<|endoftext|>"]
put("tokenizer", "ok-v2.bin", tokenizer(words))
put("tokenizer", "ok-v1.bin", tokenizer(words, version=1))
put("tokenizer", "bad-truncated.bin", tokenizer(words)[:1030])
put("tokenizer", "bad-eot.bin", tokenizer(words, eot=99))
put("tokenizer", "bad-vocab-too-large.bin", header({0: 20240328, 1: 2, 2: 1 << 24, 3: 0}) + b"\x01a")

# ---------------------------------------------------------------------------------------------
# eval files (doc/formats.md "Eval files and scoring", doc/evals.md): version 2, a choice and a greedy example
def eval_v2(examples, scoring=0):
    """examples: (label, contexts, completions); an example is [delimiter, bytes, index, label,
    num_completions, num_contexts], then each context and completion as (length, tokens)."""
    words, longest, rows = [], 0, 1
    for i, (label, ctxs, comps) in enumerate(examples):
        ex = [65535, 0, i, label, len(comps), len(ctxs)]
        for seq in ctxs + comps:
            ex += [len(seq)] + seq
        ex[1] = 2 * len(ex)
        longest, rows = max(longest, ex[1]), max(rows, len(ctxs), len(comps))
        words += ex
    h = header({0: 20240522, 1: 2, 2: len(examples), 3: longest, 4: scoring, 5: rows})
    return h + struct.pack("<%dH" % len(words), *words)


put("evalfile", "ok-choice.bin", eval_v2([(1, [[1, 2, 3]], [[4], [5, 6], [7]]), (0, [[9, 9]], [[1], [2]])]))
put("evalfile", "ok-greedy.bin", eval_v2([(0, [[1, 2, 3, 4]], [[5, 6]])], scoring=1))
put("evalfile", "bad-label.bin", eval_v2([(5, [[1, 2]], [[3], [4]])]))

# ---------------------------------------------------------------------------------------------
# layer tables (doc/formats.md "Per-layer heads")
put("layer_table", "ok-prism-d12.txt", b"3*2 6*2 12*8\n")
put("layer_table", "ok-kinds.txt", b"# every kind\n12:sd*3 12:lin*3 12x32:sdlin*3\n12*3\n")
put("layer_table", "bad-wide.txt", b"4x1000000000*4\n")
put("layer_table", "bad-kind.txt", b"12:foo*12\n")

# ---------------------------------------------------------------------------------------------
# state files (doc/formats.md "Optimizer/DataLoader state") for fuzz_state.c's run: 16 optimizer values, shuffling over its
# two shards of 24 and 16 windows, resumed at step 5 in shard 0, sample 3
def state(sample_order, shard_order=(1, 0), step=5, shard_idx=0, sample_idx=3, n=16):
    h = [0] * 256
    h[0], h[1], h[2], h[3], h[4], h[5], h[10] = 20240527, 1, 1, 0, 0, 1, step
    hb = bytearray(struct.pack("<256i", *h))
    struct.pack_into("<QQQQ", hb, 80, 13371337, 13371337, 0, 0)
    struct.pack_into("<QQ", hb, 120, shard_idx, sample_idx)
    body = struct.pack("<%df" % (2 * n), *([0.0] * (2 * n)))
    loader = struct.pack("<Q", len(shard_order)) + struct.pack("<%di" % len(shard_order), *shard_order)
    loader += struct.pack("<Q", len(sample_order)) + struct.pack("<%di" % len(sample_order), *sample_order)
    # the loader's Mt19937 as raw bytes: seed, left, next, state[624], matrix[2] (llmc/rand.h)
    loader += struct.pack("<QiI", 42, 1, 0) + struct.pack("<624I", *range(624)) + struct.pack("<2I", 0, 0x9908B0DF)
    return bytes(hb) + body + loader


# the shard order (1, 0) puts the 16-window shard first
put("state", "ok-state.bin", state(list(range(15, -1, -1))))
put("state", "bad-negative-sample.bin", state([-5] + list(range(1, 16))))
put("state", "bad-repeated-sample.bin", state([0, 0] + list(range(2, 16))))
put("state", "bad-shard-order.bin", state(list(range(16)), shard_order=(1, 1)))
put("state", "bad-step.bin", state(list(range(16)), step=6))
print("wrote the seed corpus under", CORPUS)
