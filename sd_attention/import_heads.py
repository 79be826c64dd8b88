"""sd_attention/import_heads.py: the attention heads of a Hugging Face BERT or GPT-NeoX/Pythia
checkpoint -> one of our (llm.c) version-3 checkpoints, so that ./sd_spectrum analyses those heads
unchanged (the 1,776-head analysis of arXiv 2605.18826: GPT-2 small/medium/large through
import_hf.py, BERT-base and Pythia-410M through this script; doc/sd_tools.md).

    python sd_attention/import_heads.py ~/hf/bert-base-uncased -o bert_base.bin
    python sd_attention/import_heads.py ~/hf/pythia-410m -o pythia_410m.bin
    ./sd_spectrum bert_base.bin -json bert_base.json

THE WRITTEN FILE IS FOR THE HEAD ANALYSIS ONLY. It is not a runnable GPT-2: BERT is bidirectional
and post-LN (and its GELU is the erf one), Pythia rotates q and k by position (rotary embeddings)
and adds attention and MLP to the same residual in parallel. Our trainers, evaluators and
sd_surgery would read the file as a causal pre-LN GPT-2 with learned positions and compute
something that is neither model.

Input: a directory (or a model file with config.json beside it, or --config) holding config.json
and model.safetensors or pytorch_model.bin (read with import_hf.py's readers: safetensors by hand,
F32/F16/BF16 widened to fp32; torch.load for .bin). Sharded checkpoints are not read.
  - config.json: model_type "bert" or "gpt_neox"; hidden_size C, num_hidden_layers L,
    num_attention_heads H (d = C / H), intermediate_size (must be 4C: our format's MLP),
    vocab_size V, max_position_embeddings (maxT); for gpt_neox rotary_pct (or
    partial_rotary_factor; HF's default 0.25), which only the printed summary uses.
  - bert (BertModel keys, or BertForMaskedLM / BertForPreTraining with `bert.`): per layer
    attention.self.{query,key,value}, attention.output.dense, attention.output.LayerNorm,
    intermediate.dense, output.dense, output.LayerNorm; embeddings.{word,position,token_type}_
    embeddings, embeddings.LayerNorm. LayerNorm.gamma / .beta (old checkpoints) are read as
    .weight / .bias. Skipped: pooler.*, cls.* (the MLM/NSP heads), embeddings.position_ids.
  - gpt_neox (GPTNeoXModel keys, or GPTNeoXForCausalLM with `gpt_neox.`): per layer
    attention.query_key_value, attention.dense, input_layernorm, post_attention_layernorm,
    mlp.dense_h_to_4h, mlp.dense_4h_to_h; embed_in, final_layer_norm. Skipped: embed_out (the
    untied LM head), the buffers attention.bias, attention.masked_bias, *rotary_emb.inv_freq.
  Any other key, a missing tensor or a wrong shape is a one-line error naming file and key.

Where each tensor goes (our slots, doc/formats.md "The 16 parameter tensors"; all nn.Linear (out, in) as in our format):
  qkvw = [W_Q; W_K; W_V] (3C, C), qkvb likewise. BERT: query, key, value stacked. GPT-NeoX: the
    fused query_key_value weight (3C, C) has its rows ordered (head, {q, k, v}, d), i.e. per head
    q, k and v interleaved; it is de-interleaved to (q|k|v, head, d), so that rows [h*d, (h+1)*d)
    of the Q block are head h's query rows, as sd_spectrum reads them.
  attprojw/b = attention.output.dense (BERT), attention.dense (NeoX); fcw/b, fcprojw/b = the MLP's
    two linears.
  wte = the token embeddings, padded with zero rows to Vp = ceil(V/128)*128.
  wpe = BERT: position_embeddings + token_type_embeddings[0] (what BERT adds for a one-segment
    input); NeoX: zeros (maxT, C): Pythia has no learned positions.
  LayerNorms, by the sublayer whose input they normalize: NeoX ln_1 = input_layernorm, ln_2 =
    post_attention_layernorm, ln_f = final_layer_norm. BERT (post-LN): ln_1 of layer 0 =
    embeddings.LayerNorm, of layer l > 0 = layer l-1's output.LayerNorm; ln_2 = the layer's
    attention.output.LayerNorm; ln_f = the last layer's output.LayerNorm.

What the analysis then means. sd_spectrum forms M = W_Q W_K^T per head (biases ignored, as for
GPT-2). BERT's logits are q_m . k_n = x_m M x_n^T for every pair, in both directions. Pythia
rotates the first r = int(rotary_pct * d) dims of each head's q and k by position (pairs (i, i+r/2),
angles m * theta_i): q_m . k_n = x_m W_Q P(n - m) W_K^T x_n^T with P(t) = diag(R(t), I), so the
logit kernel depends on the offset t = n - m and M = W_Q W_K^T is the kernel at offset 0 (m = n).
The d - r non-rotary dims contribute the same at every offset; at other offsets the rotary dims'
part of the kernel is rotated by R(t), which moves energy between its symmetric (filtering) and
skew (routing) parts: their shares, ranks and alpha/rho hold at offset 0 only.

Output: llm.c's version 3 (fp32), header (magic, 3, maxT, V, L, H, C, Vp), written by
import_hf.write_checkpoint (NAME.tmp, then renamed).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402

from sd_attention.import_hf import ImportError_, LazyTensor, read_any, resolve_input, write_checkpoint  # noqa: E402

NOTE = {
    "bert": "BERT is bidirectional and post-LN (LayerNorms mapped by the sublayer they feed)",
    "gpt_neox": "GPT-NeoX/Pythia uses rotary embeddings (here: no positions; M = W_Q W_K^T is the "
                "kernel at offset 0) and parallel residuals",
}


# ---------------------------------------------------------------------------------------------
# config.json

def read_config(model_path, config_path):
    cfg = config_path or os.path.join(os.path.dirname(os.path.abspath(model_path)), "config.json")
    if not os.path.isfile(cfg):
        raise ImportError_(f"{cfg}: no such file (expected the model's config.json with model_type)")
    try:
        with open(cfg) as f:
            conf = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportError_(f"{cfg}: {e}") from None
    if not isinstance(conf, dict):
        raise ImportError_(f"{cfg}: expected a JSON object")
    mt = conf.get("model_type")
    if mt not in NOTE:
        hint = " (GPT-2: sd_attention/import_hf.py)" if mt == "gpt2" else ""
        raise ImportError_(f"{cfg}: model_type {mt!r}: expected 'bert' or 'gpt_neox'{hint}")

    def integer(field):
        v = conf.get(field)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ImportError_(f"{cfg}: {field} {v!r}: expected a positive integer")
        return v

    C, L, H = integer("hidden_size"), integer("num_hidden_layers"), integer("num_attention_heads")
    V, maxT, inter = integer("vocab_size"), integer("max_position_embeddings"), integer("intermediate_size")
    if C % H:
        raise ImportError_(f"{cfg}: num_attention_heads {H}: expected a divisor of hidden_size {C}")
    if inter != 4 * C:
        raise ImportError_(f"{cfg}: intermediate_size {inter}: expected 4 * hidden_size = {4 * C} "
                           f"(our checkpoint format's MLP is C -> 4C -> C)")
    if mt == "bert" and conf.get("position_embedding_type", "absolute") != "absolute":
        raise ImportError_(f"{cfg}: position_embedding_type {conf['position_embedding_type']!r}: "
                           f"expected 'absolute'")
    rotary = None
    if mt == "gpt_neox":
        pct = conf.get("rotary_pct", conf.get("partial_rotary_factor", 0.25))   # HF's default
        if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 <= pct <= 1:
            raise ImportError_(f"{cfg}: rotary_pct {pct!r}: expected a number in [0, 1]")
        rotary = int(C // H * pct)
    return dict(model_type=mt, C=C, L=L, H=H, V=V, maxT=maxT, rotary=rotary, path=cfg)


# ---------------------------------------------------------------------------------------------
# HF key names, per family: prefix, tensors skipped, per-layer and global tensors with shapes

def expected_keys(cfg):
    """{HF key (prefix stripped): shape} and the family's prefix and skip pattern."""
    C, L, V, maxT = cfg["C"], cfg["L"], cfg["V"], cfg["maxT"]
    if cfg["model_type"] == "bert":
        prefix = "bert."
        skip = re.compile(r"(bert\.)?(pooler\..*|embeddings\.position_ids)|cls\..*")
        glob = {"embeddings.word_embeddings.weight": (V, C),
                "embeddings.position_embeddings.weight": (maxT, C),
                "embeddings.token_type_embeddings.weight": None,   # (type_vocab_size, C), checked below
                "embeddings.LayerNorm.weight": (C,), "embeddings.LayerNorm.bias": (C,)}
        layer = {"attention.self.query.weight": (C, C), "attention.self.query.bias": (C,),
                 "attention.self.key.weight": (C, C), "attention.self.key.bias": (C,),
                 "attention.self.value.weight": (C, C), "attention.self.value.bias": (C,),
                 "attention.output.dense.weight": (C, C), "attention.output.dense.bias": (C,),
                 "attention.output.LayerNorm.weight": (C,), "attention.output.LayerNorm.bias": (C,),
                 "intermediate.dense.weight": (4 * C, C), "intermediate.dense.bias": (4 * C,),
                 "output.dense.weight": (C, 4 * C), "output.dense.bias": (C,),
                 "output.LayerNorm.weight": (C,), "output.LayerNorm.bias": (C,)}
        lpre = "encoder.layer."
    else:
        prefix = "gpt_neox."
        skip = re.compile(r"embed_out\.weight|(gpt_neox\.)?(layers\.\d+\.attention\.(bias|masked_bias|"
                          r"rotary_emb\.inv_freq)|rotary_emb\.inv_freq)")
        glob = {"embed_in.weight": (V, C), "final_layer_norm.weight": (C,), "final_layer_norm.bias": (C,)}
        layer = {"input_layernorm.weight": (C,), "input_layernorm.bias": (C,),
                 "attention.query_key_value.weight": (3 * C, C), "attention.query_key_value.bias": (3 * C,),
                 "attention.dense.weight": (C, C), "attention.dense.bias": (C,),
                 "post_attention_layernorm.weight": (C,), "post_attention_layernorm.bias": (C,),
                 "mlp.dense_h_to_4h.weight": (4 * C, C), "mlp.dense_h_to_4h.bias": (4 * C,),
                 "mlp.dense_4h_to_h.weight": (C, 4 * C), "mlp.dense_4h_to_h.bias": (C,)}
        lpre = "layers."
    shapes = dict(glob)
    for l in range(L):
        shapes.update({f"{lpre}{l}.{k}": s for k, s in layer.items()})
    return shapes, prefix, skip


def select_tensors(tensors, cfg, path):
    """The family's tensors by key (prefix stripped, gamma/beta renamed), every shape checked."""
    shapes, prefix, skip = expected_keys(cfg)
    family = "BERT" if cfg["model_type"] == "bert" else "GPT-NeoX"
    out = {}
    for key, t in tensors.items():
        if skip.fullmatch(key):
            continue
        k = key[len(prefix):] if key.startswith(prefix) else key
        if cfg["model_type"] == "bert":
            k = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", k))
        if k not in shapes:
            raise ImportError_(f"{path}: key '{key}': not a tensor of a {cfg['L']}-layer {family} "
                               f"({cfg['model_type']}) model")
        if k in out:
            raise ImportError_(f"{path}: key '{key}': given twice (with and without '{prefix}', "
                               f"or as gamma/beta and weight/bias)")
        out[k] = t
    for k, shape in shapes.items():
        if k not in out:
            raise ImportError_(f"{path}: key '{k}': missing")
        got = out[k].shape
        ok = (len(got) == 2 and got[1] == cfg["C"] and got[0] >= 1) if shape is None else got == shape
        if not ok:
            want = f"[n, {cfg['C']}]" if shape is None else str(list(shape))
            raise ImportError_(f"{path}: key '{k}': shape {list(got)}, expected {want} "
                               f"(nn.Linear stores (out, in))")
    return out


# ---------------------------------------------------------------------------------------------
# Our slots under import_hf's GPT-2 names, in the layout its writer expects (Conv1D weights (in, out))

def as_conv1d(load, out_dim, in_dim):
    """An nn.Linear (out, in) weight as the (in, out) tensor that write_checkpoint transposes back."""
    return LazyTensor((in_dim, out_dim), lambda: load().T)


def deinterleave_qkv(a, H):
    """GPT-NeoX's fused rows (head, {q, k, v}, d) -> (q|k|v, head, d); a is (3C, ...) or (3C,)."""
    rest = a.shape[1:]
    return a.reshape(H, 3, -1, *rest).swapaxes(0, 1).reshape(a.shape)


# per layer: our slot (import_hf's GPT-2 name) -> the family's module; BERT's ln_1 comes from the
# layer before (gpt2_slots)
LAYER_MAP = {
    "bert": {"attn.c_proj": "attention.output.dense", "ln_2": "attention.output.LayerNorm",
             "mlp.c_fc": "intermediate.dense", "mlp.c_proj": "output.dense"},
    "gpt_neox": {"ln_1": "input_layernorm", "attn.c_proj": "attention.dense",
                 "ln_2": "post_attention_layernorm", "mlp.c_fc": "mlp.dense_h_to_4h",
                 "mlp.c_proj": "mlp.dense_4h_to_h"},
}
LINEAR = {"attn.c_proj", "mlp.c_fc", "mlp.c_proj"}


def qkv_loaders(t, p, bert, H):
    """Loaders of the layer's [W_Q; W_K; W_V] (3C, C) and its bias (3C,) in our row order."""
    if bert:
        parts = [p + f"attention.self.{n}" for n in ("query", "key", "value")]
        stack = lambda s: np.concatenate([t[n + s].numpy() for n in parts])
        return lambda: stack(".weight"), lambda: stack(".bias")
    w, b = t[p + "attention.query_key_value.weight"], t[p + "attention.query_key_value.bias"]
    return lambda: deinterleave_qkv(w.numpy(), H), lambda: deinterleave_qkv(b.numpy(), H)


def gpt2_slots(t, cfg):
    C, L, H, maxT = cfg["C"], cfg["L"], cfg["H"], cfg["maxT"]
    bert = cfg["model_type"] == "bert"
    lpre = "encoder.layer." if bert else "layers."
    g = {}
    for l in range(L):
        p, h = f"{lpre}{l}.", f"h.{l}."
        src = {ours: p + theirs for ours, theirs in LAYER_MAP[cfg["model_type"]].items()}
        if bert:   # the LayerNorm whose output enters this layer's attention
            src["ln_1"] = "embeddings.LayerNorm" if l == 0 else f"{lpre}{l - 1}.output.LayerNorm"
        for ours, theirs in src.items():
            w = t[theirs + ".weight"]
            g[h + ours + ".weight"] = as_conv1d(w.numpy, *w.shape) if ours in LINEAR else w
            g[h + ours + ".bias"] = t[theirs + ".bias"]
        load_w, load_b = qkv_loaders(t, p, bert, H)
        g[h + "attn.c_attn.weight"] = as_conv1d(load_w, 3 * C, C)
        g[h + "attn.c_attn.bias"] = LazyTensor((3 * C,), load_b)
    if bert:
        pos, tt = t["embeddings.position_embeddings.weight"], t["embeddings.token_type_embeddings.weight"]
        g["wte.weight"] = t["embeddings.word_embeddings.weight"]
        g["wpe.weight"] = LazyTensor((maxT, C), lambda: pos.numpy() + tt.numpy()[0])
        lnf = f"{lpre}{L - 1}.output.LayerNorm"
    else:
        g["wte.weight"] = t["embed_in.weight"]
        g["wpe.weight"] = LazyTensor((maxT, C), lambda: np.zeros((maxT, C), np.float32))
        lnf = "final_layer_norm"
    g["ln_f.weight"], g["ln_f.bias"] = t[lnf + ".weight"], t[lnf + ".bias"]
    return g


# ---------------------------------------------------------------------------------------------
# Command line

def parse_args(argv):
    p = argparse.ArgumentParser(description="Hugging Face BERT or GPT-NeoX/Pythia checkpoint -> our "
                                "version-3 checkpoint for ./sd_spectrum's head analysis (not a "
                                "runnable GPT-2)")
    p.add_argument("model", help="a directory with config.json and model.safetensors or "
                                 "pytorch_model.bin, or one of those files")
    p.add_argument("-o", "--out", required=True, help="output checkpoint (.bin)")
    p.add_argument("--config", default=None, help="config.json (default: next to the model file)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        out_dir = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_dir):
            raise ImportError_(f"-o {args.out}: directory {out_dir} does not exist")
        path = resolve_input(args.model)
        cfg = read_config(path, args.config)
        tensors = select_tensors(read_any(path), cfg, path)
        write_checkpoint(gpt2_slots(tensors, cfg), cfg["L"], cfg["C"], cfg["V"], cfg["maxT"],
                         cfg["H"], args.out, "fp32")
    except (ImportError_, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    L, C, H, r = cfg["L"], cfg["C"], cfg["H"], cfg["rotary"]
    rot = f", rotary on the first {r} of the {C // H} dims of q and k" if r is not None else ""
    print(f"note: {args.out} is for the head analysis only (./sd_spectrum), not a runnable GPT-2: "
          f"{NOTE[cfg['model_type']]}")
    print(f"{path}: {cfg['model_type']}, L {L}, C {C}, heads {H} per layer ({L * H} in all, "
          f"d {C // H}{rot}) -> {args.out} (version 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
