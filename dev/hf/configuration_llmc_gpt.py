"""configuration_llmc_gpt.py: the configuration of LlmcGptForCausalLM, a GPT-2 with a per-layer
attention table (heads, head size and kind per layer) exported from an llmc checkpoint.

Standalone: it imports transformers only, since Hugging Face copies it beside the weights and
loads it with `trust_remote_code=True`. dev/export_hf.py writes the config.json it reads (the
project's doc/export.md; the checkpoint's header fields are doc/formats.md "Header", "Per-layer heads").

Fields
- vocab_size V, padded_vocab_size Vp (the checkpoint's padded wte rows, which the export drops;
  kept for the way back), n_positions (maxT), n_embd (C), n_layer (L), n_head (the descriptor's
  base heads, checkpoint header[5]; the layers' own heads are below);
- layer_heads, layer_head_sizes, layer_kinds: per layer h_l, d_l and one of "mha" (softmax),
  "sd" (S-D, doc/methods.md "Formulation A"), "lin" (ELU+1 linear attention, doc/methods.md "ELU+1 causal linear attention"), "sdlin" (both);
- layer_norm: false for a model trained without ln_1 / ln_2 (doc/methods.md "Training without LayerNorm"; ln_f is kept);
- sd_scalar_d: one D value per S-D head; sd_sign: -1 for L = S - D, +1 for L = S + D (doc/methods.md "Formulation B");
- lin_prescale: linear layers scale q and k by d^(-1/4) before ELU+1;
- emb_scale: F, the blocks' input is F (wte[tokens] + wpe[positions]); the tied LM head reads wte
  unscaled (checkpoint header[10]; 1, GPT-2's, when absent);
- layer_norm_epsilon 1e-5, lin_eps 1e-6 (the normalizer's epsilon, doc/methods.md "ELU+1 causal linear attention").
"""
import math

from transformers import PretrainedConfig

KINDS = ("mha", "sd", "lin", "sdlin")


class LlmcGptConfig(PretrainedConfig):
    model_type = "llmc_gpt"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions",
                     "num_hidden_layers": "n_layer"}

    def __init__(self, vocab_size=50257, padded_vocab_size=None, n_positions=1024, n_embd=768,
                 n_layer=12, n_head=12, layer_heads=None, layer_head_sizes=None, layer_kinds=None,
                 layer_norm=True, sd_scalar_d=False, sd_sign=-1, lin_prescale=False,
                 emb_scale=1.0, layer_norm_epsilon=1e-5, lin_eps=1e-6, tie_word_embeddings=True,
                 **kwargs):
        self.vocab_size = vocab_size
        self.padded_vocab_size = padded_vocab_size if padded_vocab_size else (vocab_size + 127) // 128 * 128
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        # without a table: GPT-2's uniform one, n_head heads of n_embd / n_head
        self.layer_heads = list(layer_heads) if layer_heads is not None else [n_head] * n_layer
        self.layer_head_sizes = (list(layer_head_sizes) if layer_head_sizes is not None
                                 else [n_embd // n_head] * n_layer)
        self.layer_kinds = list(layer_kinds) if layer_kinds is not None else ["mha"] * n_layer
        for name in ("layer_heads", "layer_head_sizes", "layer_kinds"):
            if len(getattr(self, name)) != n_layer:
                raise ValueError(f"LlmcGptConfig: {name} has {len(getattr(self, name))} entries, "
                                 f"n_layer = {n_layer}")
        for l, kind in enumerate(self.layer_kinds):
            if kind not in KINDS:
                raise ValueError(f"LlmcGptConfig: layer_kinds[{l}] = {kind!r}: expected one of "
                                 f"{', '.join(KINDS)}")
        if sd_sign not in (-1, 1):
            raise ValueError(f"LlmcGptConfig: sd_sign = {sd_sign!r}: expected -1 or 1")
        if not (math.isfinite(emb_scale) and emb_scale > 0):
            raise ValueError(f"LlmcGptConfig: emb_scale = {emb_scale!r}: expected a finite number > 0")
        self.layer_norm = bool(layer_norm)
        self.sd_scalar_d = bool(sd_scalar_d)
        self.sd_sign = int(sd_sign)
        self.lin_prescale = bool(lin_prescale)
        self.emb_scale = float(emb_scale)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.lin_eps = lin_eps
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
