"""modeling_llmc_gpt.py: LlmcGptForCausalLM, the Hugging Face model of an llmc checkpoint whose layer
table GPT-2 cannot express: per-layer heads and head sizes, S-D attention, ELU+1 linear attention,
blocks without LayerNorm, a scaled input (the project's doc/export.md says how it is exported and
checked).

Standalone: it imports torch and transformers only (and its configuration beside it), since
Hugging Face copies it next to the weights and loads it with `trust_remote_code=True`.

The model is GPT-2 with pre-LayerNorm blocks and a tied LM head, in fp32 math:

    x = F (wte[tokens] + wpe[positions])      (F = emb_scale, 1 for GPT-2)
    per layer:  x = x + attn(ln_1(x));  x = x + proj(gelu_tanh(fc(ln_2(x))))
    logits = ln_f(x) wte^T          (LayerNorm eps 1e-5; the V real rows of wte only; wte unscaled)

With layer_norm false, ln_1 and ln_2 are the identity and ln_f stays (doc/methods.md "Training without LayerNorm",
option 1). Layer l's attention has h heads of size d, width A = h d (which may differ from C):

- mha:   q | k | v = x W_qkv^T + b, each A wide; head k owns columns [k d, (k+1) d) of each;
         softmax(q k^T / sqrt(d)) v over the causal window.
- sd:    u | v = x W_qkv^T + b (2A wide); per head the generator L = S + sign D, with S skew
         from its packed strict upper triangle (S_ij = s, S_ji = -s, i < j, row-major) and
         D = diag(softplus(theta)) (one value per head with sd_scalar_d); the logits are
         u_i L u_j^T / sqrt(d) (doc/methods.md "Formulation A", "Formulation B", "Parameter counts"), computed as q = u, k = u L^T
         (the fold, doc/methods.md "Realization with the standard attention kernels"), then softmax as mha.
- lin:   q | k | v as mha; ELU+1 linear attention in its normalized form (doc/methods.md "ELU+1 causal linear attention"):
         q~ = phi(c q), k~ = phi(c k), phi(x) = elu(x) + 1, c = d^(-1/4) with lin_prescale else 1;
         s_ts = q~_t . k~_s (s <= t), a_ts = s_ts / (sum_s s_ts + eps), o_t = sum_s a_ts v_s.
- sdlin: u | v with q = u, k = u L^T as sd, mixed as lin.
The heads' outputs, concatenated, go through proj (C x A).

Positions are 0..T-1, or with an attention_mask the count of real tokens before each one, so
left padding gives the real tokens the positions they have unpadded; an attention_mask of 0
also removes that key from every query's window. generate() recomputes the whole context at each
step: there is no key/value cache (past_key_values is always None).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_llmc_gpt import LlmcGptConfig

SD_KINDS = ("sd", "sdlin")
LINEAR_KINDS = ("lin", "sdlin")


def elu1(x):
    """phi(x) = elu(x) + 1: x + 1 above 0, e^x below (doc/methods.md "ELU+1 causal linear attention")."""
    return F.elu(x) + 1.0


class LlmcGptAttention(nn.Module):
    """One layer's attention of the kinds above; keys qkv, proj, and for sd / sdlin sd_skew
    (h, d(d-1)/2) and sd_theta (h, d), or (h) with sd_scalar_d."""

    def __init__(self, config, layer):
        super().__init__()
        C = config.n_embd
        self.n_head = config.layer_heads[layer]
        self.head_size = config.layer_head_sizes[layer]
        kind = config.layer_kinds[layer]
        self.sd = kind in SD_KINDS
        self.linear = kind in LINEAR_KINDS
        self.sd_sign = float(config.sd_sign)
        self.lin_prescale = config.lin_prescale
        self.lin_eps = config.lin_eps
        h, d = self.n_head, self.head_size
        width = h * d
        self.qkv = nn.Linear(C, (2 if self.sd else 3) * width)
        self.proj = nn.Linear(width, C)
        if self.sd:
            self.sd_skew = nn.Parameter(torch.zeros(h, d * (d - 1) // 2))
            self.sd_theta = nn.Parameter(torch.zeros(h) if config.sd_scalar_d else torch.zeros(h, d))

    def generator(self):
        """L (h, d, d) = S + sign diag(softplus(theta)) per head (doc/methods.md "Formulation A"). softplus is
        x itself above 20, log(1 + e^x) below: torch's default threshold, the C model's too."""
        h, d = self.n_head, self.head_size
        iu, ju = torch.triu_indices(d, d, offset=1, device=self.sd_skew.device)
        upper = self.sd_skew.new_zeros(h, d, d)
        upper[:, iu, ju] = self.sd_skew
        S = upper - upper.transpose(1, 2)
        D = F.softplus(self.sd_theta)
        if D.dim() == 1:
            D = D.unsqueeze(1).expand(h, d)
        return S + self.sd_sign * torch.diag_embed(D)

    def forward(self, x, key_mask=None):
        """x (B, T, C); key_mask (B, T) bool, False where a key is padding, or None."""
        B, T, _ = x.shape
        h, d = self.n_head, self.head_size
        heads = lambda t: t.reshape(B, T, h, d).transpose(1, 2)        # (B, h, T, d)
        parts = self.qkv(x).split(h * d, dim=-1)
        if self.sd:
            u, v = (heads(t) for t in parts)
            q, k = u, torch.einsum("bhti,hai->bhta", u, self.generator())   # k = u L^T (the fold)
        else:
            q, k, v = (heads(t) for t in parts)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :]
        if self.linear:
            c = d ** -0.25 if self.lin_prescale else 1.0
            qf, kf = elu1(c * q), elu1(c * k)
            s = (qf @ kf.transpose(-2, -1)).masked_fill(~allowed, 0.0)
            a = s / (s.sum(dim=-1, keepdim=True) + self.lin_eps)
        else:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            # the most negative finite value: a row with no key left (a padded query) stays finite
            a = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min).softmax(dim=-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, h * d)
        return self.proj(y)


class LlmcGptMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class LlmcGptBlock(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        C, eps = config.n_embd, config.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(C, eps=eps) if config.layer_norm else nn.Identity()
        self.attn = LlmcGptAttention(config, layer)
        self.ln_2 = nn.LayerNorm(C, eps=eps) if config.layer_norm else nn.Identity()
        self.mlp = LlmcGptMLP(config)

    def forward(self, x, key_mask=None):
        x = x + self.attn(self.ln_1(x), key_mask)
        return x + self.mlp(self.ln_2(x))


class LlmcGptPreTrainedModel(PreTrainedModel):
    config_class = LlmcGptConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["LlmcGptBlock"]

    def _init_weights(self, module):
        """GPT-2's init for a model built without weights: N(0, 0.02) matrices and embeddings,
        zero biases, unit LayerNorms; S-D: S = 0, theta = 0.1 (doc/methods.md "Parameter counts")."""
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, LlmcGptAttention) and module.sd:
            module.sd_skew.data.zero_()
            module.sd_theta.data.fill_(0.1)


class LlmcGptModel(LlmcGptPreTrainedModel):
    """Embeddings, blocks and ln_f: the final hidden states (B, T, C)."""

    def __init__(self, config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(LlmcGptBlock(config, l) for l in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.post_init()

    def get_input_embeddings(self):
        return self.wte

    def set_input_embeddings(self, value):
        self.wte = value

    def forward(self, input_ids, attention_mask=None, position_ids=None, output_hidden_states=False):
        B, T = input_ids.shape
        if T > self.config.n_positions:
            raise ValueError(f"LlmcGptModel: {T} positions, the model has n_positions = "
                             f"{self.config.n_positions}")
        key_mask = None
        if attention_mask is not None and not bool(attention_mask.all()):
            key_mask = attention_mask.bool()
        if position_ids is None:
            if attention_mask is None:
                position_ids = torch.arange(T, device=input_ids.device).unsqueeze(0)
            else:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        x = self.wte(input_ids) + self.wpe(position_ids)
        if self.config.emb_scale != 1.0:
            x = x * self.config.emb_scale      # the blocks' input; the LM head's wte is unscaled
        hidden = [x] if output_hidden_states else None
        for block in self.h:
            x = block(x, key_mask)
            if output_hidden_states:
                hidden.append(x)
        x = self.ln_f(x)
        if output_hidden_states:
            hidden[-1] = x     # as transformers' GPT-2: the last entry after ln_f
        return x, (tuple(hidden) if output_hidden_states else None)


class LlmcGptForCausalLM(LlmcGptPreTrainedModel, GenerationMixin):
    """The LM: LlmcGptModel and a head tied to wte. forward(input_ids, attention_mask=None,
    labels=None, ...) gives CausalLMOutputWithPast with logits (B, T, V) and, with labels, the
    mean cross-entropy of predicting labels[:, 1:] from positions [:, :-1] (-100 ignored)."""
    _tied_weights_keys = ["lm_head.weight"]

    def __init__(self, config):
        super().__init__(config)
        self.transformer = LlmcGptModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.transformer.wte

    def set_input_embeddings(self, value):
        self.transformer.wte = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, position_ids=None,
                                      **kwargs):
        # no cache: every step sees the whole context
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, labels=None,
                past_key_values=None, use_cache=None, output_attentions=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        if input_ids is None:
            raise ValueError("LlmcGptForCausalLM: input_ids is required (no inputs_embeds)")
        x, hidden = self.transformer(input_ids, attention_mask, position_ids,
                                     bool(output_hidden_states))
        logits = self.lm_head(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                   labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100)
        if return_dict is False:
            out = (logits,) + ((hidden,) if hidden is not None else ())
            return ((loss,) + out) if loss is not None else out
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=None,
                                      hidden_states=hidden)
