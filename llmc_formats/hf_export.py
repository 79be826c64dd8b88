"""llmc_formats/hf_export.py: a checkpoint as a Hugging Face model directory, and back (doc/export.md).

Two layouts, chosen by the checkpoint's layer table (doc/formats.md "Per-layer heads"):
- stock: a uniform model with its LayerNorms and an unscaled input (GPTConfig.is_uniform()) is
  transformers' GPT2LMHeadModel: keys `transformer.<name>` with HF's Conv1D weights stored
  (in, out), i.e. our (out, in) qkvw, attprojw, fcw, fcprojw transposed (doc/formats.md "The 16 parameter tensors");
- custom: every other model is the project's LlmcGptForCausalLM (dev/hf/modeling_llmc_gpt.py),
  whose linears keep our (out, in) layout and whose config.json carries the layer table, the
  header[9] flags and, when it is not 1, the input scale emb_scale (header[10]).
Both keep wte's V real rows only (the padded rows V..Vp-1 are zero in every checkpoint the
trainers write) and tie lm_head to wte, so lm_head.weight is not stored.

Defines
- STOCK_MODEL_TYPE, CUSTOM_MODEL_TYPE, CUSTOM_ARCH: the config.json model types and class name;
- slot_layers(cfg, s): the layers that hold per-layer slot s, in file order;
- split_body(cfg, flat): the flat body of checkpoint.read as 18 lists of (layer, array);
- padding_nonzero(cfg, slots): how many values of wte's padded rows are not zero;
- stock_tensors(cfg, slots) / custom_tensors(cfg, slots): {key: float32 array} in file order;
- custom_names(cfg): [(slot, layer, key, shape)] in checkpoint order;
- custom_config(cfg): the config.json fields that describe the model (table, flags, sizes, and
  emb_scale when it is not 1);
- config_from_custom(conf, path): GPTConfig of a custom config.json, each bad field a FormatError
  naming the file and the field;
- custom_slot_arrays(cfg, tensors, path): the checkpoint's slots from {key: array}, wte padded.
"""
from llmc_formats import FormatError
from llmc_formats.checkpoint import (EMB_SCALE_MAX, FLAG_LIN_PRESCALE, FLAG_NO_LN, FLAG_SD_PLUS_D,
                                     FLAG_SD_SCALAR_D, KINDS, SD_KINDS, GPTConfig, emb_scale_ok)

STOCK_MODEL_TYPE = "gpt2"
STOCK_ARCH = "GPT2LMHeadModel"
CUSTOM_MODEL_TYPE = "llmc_gpt"
CUSTOM_ARCH = "LlmcGptForCausalLM"

WTE, WPE, LNFW, LNFB = 0, 1, 14, 15
PER_LAYER_SLOTS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17)
LN_SLOTS = (2, 3, 8, 9)
SD_SLOTS = (16, 17)
CONV1D_SLOTS = (4, 6, 10, 12)        # stored (in, out) by HF's GPT-2

# key of each slot ({l}: the layer); the stock names are GPT2LMHeadModel's
_COMMON = {WTE: "transformer.wte.weight", WPE: "transformer.wpe.weight",
           2: "transformer.h.{l}.ln_1.weight", 3: "transformer.h.{l}.ln_1.bias",
           8: "transformer.h.{l}.ln_2.weight", 9: "transformer.h.{l}.ln_2.bias",
           LNFW: "transformer.ln_f.weight", LNFB: "transformer.ln_f.bias"}
STOCK_KEYS = {**_COMMON, **{
    4: "transformer.h.{l}.attn.c_attn.weight", 5: "transformer.h.{l}.attn.c_attn.bias",
    6: "transformer.h.{l}.attn.c_proj.weight", 7: "transformer.h.{l}.attn.c_proj.bias",
    10: "transformer.h.{l}.mlp.c_fc.weight", 11: "transformer.h.{l}.mlp.c_fc.bias",
    12: "transformer.h.{l}.mlp.c_proj.weight", 13: "transformer.h.{l}.mlp.c_proj.bias"}}
CUSTOM_KEYS = {**_COMMON, **{
    4: "transformer.h.{l}.attn.qkv.weight", 5: "transformer.h.{l}.attn.qkv.bias",
    6: "transformer.h.{l}.attn.proj.weight", 7: "transformer.h.{l}.attn.proj.bias",
    10: "transformer.h.{l}.mlp.fc.weight", 11: "transformer.h.{l}.mlp.fc.bias",
    12: "transformer.h.{l}.mlp.proj.weight", 13: "transformer.h.{l}.mlp.proj.bias",
    16: "transformer.h.{l}.attn.sd_skew", 17: "transformer.h.{l}.attn.sd_theta"}}

# config.json fields of the custom model that describe it; the flags are one boolean each.
# emb_scale is written only when not 1 (as header[10] is 0 then), so its absence reads as 1.
CUSTOM_FIELDS = ("vocab_size", "padded_vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                 "layer_heads", "layer_head_sizes", "layer_kinds", "layer_norm", "sd_scalar_d",
                 "sd_sign", "lin_prescale")


def slot_layers(cfg, s):
    """The layers holding per-layer slot s, in file order (doc/formats.md "Per-layer heads" "Body")."""
    if s in LN_SLOTS and not cfg.use_ln:
        return []
    if s in SD_SLOTS:
        return [l for l, (_, _, k) in enumerate(cfg.layers) if k in SD_KINDS]
    return list(range(cfg.n_layer))


def split_body(cfg, flat):
    """The flat body (checkpoint.read) as 18 lists of (layer or None, array of the slot's shape)."""
    out, pos = [], 0
    for s, shapes in enumerate(cfg.slot_shapes()):
        layers = slot_layers(cfg, s) if s in PER_LAYER_SLOTS else [None]
        assert len(layers) == len(shapes), (s, layers, shapes)
        entries = []
        for l, shape in zip(layers, shapes):
            n = 1
            for x in shape:
                n *= x
            entries.append((l, flat[pos:pos + n].reshape(shape)))
            pos += n
        out.append(entries)
    assert pos == flat.size, (pos, flat.size)
    return out


def padding_nonzero(cfg, slots):
    """The number of non-zero values in wte's rows V..Vp-1, which no export keeps."""
    wte = slots[WTE][0][1]
    return int((wte[cfg.vocab_size:] != 0).sum())


def _tensors(cfg, slots, keys, transposed):
    out = {}
    for s, entries in enumerate(slots):
        for l, a in entries:
            if s == WTE:
                a = a[:cfg.vocab_size]
            elif s in transposed:
                a = a.T
            out[keys[s].format(l=l)] = a
    return out


def stock_tensors(cfg, slots):
    """GPT2LMHeadModel's tensors of a uniform model: {key: array}, Conv1D weights (in, out)."""
    if not cfg.is_uniform():
        raise ValueError("stock_tensors: the model is not uniform (GPTConfig.is_uniform)")
    return _tensors(cfg, slots, STOCK_KEYS, CONV1D_SLOTS)


def custom_tensors(cfg, slots):
    """LlmcGptForCausalLM's tensors: {key: array}, our (out, in) layout unchanged."""
    return _tensors(cfg, slots, CUSTOM_KEYS, ())


def custom_names(cfg):
    """[(slot, layer or None, key, shape)] of the custom layout in checkpoint order; wte has V
    rows (the checkpoint's Vp - V zero rows are not stored)."""
    out = []
    for s, shapes in enumerate(cfg.slot_shapes()):
        layers = slot_layers(cfg, s) if s in PER_LAYER_SLOTS else [None]
        for l, shape in zip(layers, shapes):
            if s == WTE:
                shape = (cfg.vocab_size, shape[1])
            out.append((s, l, CUSTOM_KEYS[s].format(l=l), tuple(shape)))
    return out


def custom_config(cfg):
    """The fields of CUSTOM_FIELDS for cfg: sizes, the layer table (heads, head size, kind name
    per layer) and the header[9] flags (doc/formats.md "Per-layer heads") as booleans and the S-D sign; then
    emb_scale (header[10], the float32 value) when it is not 1."""
    conf = {"vocab_size": cfg.vocab_size, "padded_vocab_size": cfg.padded_vocab_size,
            "n_positions": cfg.block_size, "n_embd": cfg.n_embd, "n_layer": cfg.n_layer,
            "n_head": cfg.n_head,
            "layer_heads": [h for h, _, _ in cfg.layers],
            "layer_head_sizes": [d for _, d, _ in cfg.layers],
            "layer_kinds": [KINDS[k] for _, _, k in cfg.layers],
            "layer_norm": cfg.use_ln, "sd_scalar_d": cfg.sd_scalar_d,
            "sd_sign": int(cfg.sd_sign), "lin_prescale": cfg.lin_prescale}
    if cfg.emb_scale != 1.0:
        conf["emb_scale"] = cfg.emb_scale
    return conf


def config_from_custom(conf, path):
    """GPTConfig from a custom export's config.json (a dict); every missing or bad field is a
    FormatError naming path and the field."""
    if conf.get("model_type") != CUSTOM_MODEL_TYPE:
        raise FormatError(f"{path}: model_type {conf.get('model_type')!r}: expected "
                          f"'{CUSTOM_MODEL_TYPE}'")
    for f in CUSTOM_FIELDS:
        if f not in conf:
            raise FormatError(f"{path}: field '{f}': missing")

    def integer(f, lo=1):
        v = conf[f]
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise FormatError(f"{path}: field '{f}': {v!r}: expected an integer >= {lo}")
        return v

    def boolean(f):
        if not isinstance(conf[f], bool):
            raise FormatError(f"{path}: field '{f}': {conf[f]!r}: expected true or false")
        return conf[f]

    L = integer("n_layer")
    table = {}
    for f in ("layer_heads", "layer_head_sizes", "layer_kinds"):
        v = conf[f]
        if not isinstance(v, list) or len(v) != L:
            raise FormatError(f"{path}: field '{f}': expected a list of n_layer = {L} entries")
        table[f] = v
    layers = []
    for l in range(L):
        h, d, kind = (table["layer_heads"][l], table["layer_head_sizes"][l],
                      table["layer_kinds"][l])
        for f, v in (("layer_heads", h), ("layer_head_sizes", d)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise FormatError(f"{path}: field '{f}'[{l}]: {v!r}: expected an integer >= 1")
        if kind not in KINDS:
            raise FormatError(f"{path}: field 'layer_kinds'[{l}]: {kind!r}: expected one of "
                              f"{', '.join(KINDS)}")
        layers.append((h, d, KINDS.index(kind)))
    if conf["sd_sign"] not in (-1, 1) or isinstance(conf["sd_sign"], bool):
        raise FormatError(f"{path}: field 'sd_sign': {conf['sd_sign']!r}: expected -1 or 1")
    flags = ((0 if boolean("layer_norm") else FLAG_NO_LN) |
             (FLAG_SD_SCALAR_D if boolean("sd_scalar_d") else 0) |
             (FLAG_SD_PLUS_D if conf["sd_sign"] == 1 else 0) |
             (FLAG_LIN_PRESCALE if boolean("lin_prescale") else 0))
    emb_scale = conf.get("emb_scale", 1.0)
    if (isinstance(emb_scale, bool) or not isinstance(emb_scale, (int, float)) or
            not emb_scale_ok(emb_scale)):
        raise FormatError(f"{path}: field 'emb_scale': {emb_scale!r}: expected a number in "
                          f"(0, {EMB_SCALE_MAX:g}]")
    try:
        return GPTConfig(n_layer=L, n_embd=integer("n_embd"), n_head=integer("n_head"),
                         block_size=integer("n_positions"), vocab_size=integer("vocab_size"),
                         padded_vocab_size=integer("padded_vocab_size"), layers=layers,
                         flags=flags, emb_scale=emb_scale)
    except ValueError as e:
        raise FormatError(f"{path}: {e}") from None


def custom_slot_arrays(cfg, tensors, path):
    """The checkpoint's tensors in slot order from {key: array-like with .shape and .numpy()}
    of a custom export: every key of custom_names(cfg) with its shape (a FormatError naming the
    key otherwise); wte padded back to Vp rows with zeros. Keys outside the layout are the
    caller's to reject."""
    import numpy as np
    names = custom_names(cfg)
    for _, _, key, shape in names:
        if key not in tensors:
            raise FormatError(f"{path}: key '{key}': missing")
        if tuple(tensors[key].shape) != shape:
            raise FormatError(f"{path}: key '{key}': shape {list(tensors[key].shape)}, expected "
                              f"{list(shape)}")

    def arrays():   # one tensor at a time, after every check above
        for s, _, key, _ in names:
            a = tensors[key].numpy()
            if s == WTE and cfg.padded_vocab_size > cfg.vocab_size:
                pad = np.zeros((cfg.padded_vocab_size - cfg.vocab_size, cfg.n_embd), np.float32)
                a = np.concatenate([a, pad])
            yield a
    return arrays()
