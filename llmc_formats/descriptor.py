"""llmc_formats/descriptor.py: model descriptors, the trainers' -e (doc/formats.md "The 16 parameter tensors"
"Descriptors" and its "Here" table).

Defines
- GPT2_SHAPES (depth -> (C, NH)), GPT3_SHAPES (width -> (L, head size)): llm.c's two tables;
- MAX_VOCAB: LLMC_MAX_VOCAB of llmc/config.h, the bound on V and Vp;
- parse_descriptor(desc): `dN`, `gpt2:dN`, `gpt3:cC`, `tiny` or `L<l>C<c>H<h>[T<t>][V<v>]` ->
  a GPTConfig (llmc_formats/checkpoint.py) with the uniform layer table; anything else is a
  ValueError of one line naming the descriptor.
The C twin is config_from_descriptor in llmc/config.h.
"""
import re

from llmc_formats.checkpoint import GPT2_VOCAB, GPTConfig

MAX_VOCAB = 16777216            # LLMC_MAX_VOCAB of llmc/config.h: V and Vp

# Descriptor tables (doc/formats.md "The 16 parameter tensors"): GPT-2 depth -> (C, NH); GPT-3 width -> (L, head size).
GPT2_SHAPES = {6: (384, 6), 12: (768, 12), 24: (1024, 16), 36: (1280, 20),
               48: (1600, 25), 60: (1920, 30), 72: (2880, 30), 84: (3456, 36)}
GPT3_SHAPES = {384: (6, 64), 768: (12, 64), 1024: (24, 64), 1536: (24, 96),
               2048: (24, 128), 2560: (32, 80), 4096: (32, 128), 5140: (40, 128),
               12288: (96, 128)}


def parse_descriptor(desc):
    """Model descriptor -> GPTConfig with the uniform layer table (doc/formats.md "The 16 parameter tensors")."""
    m = re.fullmatch(r"(?:gpt2:)?d(\d+)", desc)
    if m:
        depth = int(m.group(1))
        if depth not in GPT2_SHAPES:
            raise ValueError(f"descriptor '{desc}': depth {depth} is not one of "
                             f"{sorted(GPT2_SHAPES)}")
        C, nh = GPT2_SHAPES[depth]
        return GPTConfig(n_layer=depth, n_embd=C, n_head=nh, block_size=1024)
    m = re.fullmatch(r"gpt3:c(\d+)", desc)
    if m:
        C = int(m.group(1))
        if C not in GPT3_SHAPES:
            raise ValueError(f"descriptor '{desc}': width {C} is not one of {sorted(GPT3_SHAPES)}")
        L, hs = GPT3_SHAPES[C]
        if C % hs:
            # gpt3:c5140 is in llm.c's table but 5140 % 128 != 0 (doc/formats.md "Upstream weak spots" #8).
            raise ValueError(f"descriptor '{desc}': head size {hs} does not divide C={C}")
        return GPTConfig(n_layer=L, n_embd=C, n_head=C // hs, block_size=2048)
    if desc == "tiny":
        return GPTConfig(n_layer=4, n_embd=64, n_head=4, block_size=64)
    m = re.fullmatch(r"L(\d+)C(\d+)H(\d+)(?:T(\d+))?(?:V(\d*))?", desc)
    if m:
        L, C, h = int(m.group(1)), int(m.group(2)), int(m.group(3))
        T = int(m.group(4)) if m.group(4) else 1024
        V = GPT2_VOCAB
        if m.group(5) is not None:
            V = int(m.group(5)) if m.group(5) else 0
            if not 2 <= V <= MAX_VOCAB:
                raise ValueError(f"descriptor '{desc}': V<vocab> expects an integer in [2, {MAX_VOCAB}], "
                                 f"e.g. L2C64H2T64V256")
        if min(L, C, h, T) < 1:
            raise ValueError(f"descriptor '{desc}': L, C, H and T must be >= 1")
        if C % h:
            raise ValueError(f"descriptor '{desc}': {h} heads do not divide C={C}")
        return GPTConfig(n_layer=L, n_embd=C, n_head=h, block_size=T, vocab_size=V)
    raise ValueError(f"unknown model descriptor '{desc}' (expected dN, gpt2:dN, gpt3:cC, tiny, "
                     f"L<l>C<c>H<h>[T<t>][V<v>] or a .bin checkpoint)")
