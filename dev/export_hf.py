#!/usr/bin/env python3
"""dev/export_hf.py: a trained checkpoint as a Hugging Face model directory (doc/export.md).

    /usr/bin/python3 dev/export_hf.py CKPT OUT_DIR [--force] [--dtype fp32|bf16] [--tokenizer_dir DIR]

CKPT is any checkpoint the trainers write or read (versions 3, 5, 103, 105; bf16 is widened
exactly; read by llmc_formats/checkpoint.py). OUT_DIR receives:
- model.safetensors (the safetensors library; fp32, or bf16 with --dtype bf16, rounded to nearest
  even) and config.json, generation_config.json;
- a uniform model with its LayerNorms and emb_scale 1 (doc/formats.md "Per-layer heads") as transformers' own
  GPT2LMHeadModel (model_type gpt2: Conv1D weights transposed to (in, out), gelu_new,
  layer_norm_epsilon 1e-5, n_positions = maxT); any other model (another layer table, -ln 0, an
  input scale emb_scale != 1, which GPT-2 cannot express) as LlmcGptForCausalLM, whose code
  (dev/hf/configuration_llmc_gpt.py, modeling_llmc_gpt.py) is copied beside the weights and named
  in config.json's auto_map, so that
  AutoModelForCausalLM.from_pretrained(OUT_DIR, trust_remote_code=True) loads it. The tensor
  names and config fields are llmc_formats/hf_export.py's;
- for GPT-2's vocabulary (V 50257) the GPT-2 tokenizer: vocab.json and merges.txt copied from
  encoder.json and vocab.bpe of --tokenizer_dir (default: the gpt2 folder of the offline data,
  dev/data/data_common.py's shared_data_dir()), with tokenizer_config.json
  and special_tokens_map.json (<|endoftext|> as bos, eos and unk), so that
  AutoTokenizer.from_pretrained(OUT_DIR) is GPT-2's tokenizer. Another vocabulary gets no
  tokenizer files (a line says so).
Only wte's V real rows are exported; a checkpoint whose padded rows V..Vp-1 are not zero cannot be
represented and is refused. Everything is written into a temporary directory beside OUT_DIR,
fsynced, and renamed to OUT_DIR; an OUT_DIR that exists and is not empty is refused unless
--force, which replaces it. Every error is one line naming the file or flag, exit 1.
sd_attention/import_hf.py reads both layouts back into the same checkpoint, byte for byte.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy", "safetensors")  # else one line naming `make deps`
import numpy as np  # noqa: E402
from llmc_formats import FormatError, checkpoint, hf_export  # noqa: E402
from dev.data.data_common import shared_data_dir  # noqa: E402

HF_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "hf")
CUSTOM_FILES = ("configuration_llmc_gpt.py", "modeling_llmc_gpt.py")
GPT2_EOT = 50256
EOT_TEXT = "<|endoftext|>"
TOKENIZER_FILES = (("encoder.json", "vocab.json"), ("vocab.bpe", "merges.txt"))


class ExportError(ValueError):
    """A bad input; the message names the file or flag."""


def default_tokenizer_dir():
    return os.path.join(shared_data_dir(), "gpt2")


def check_out_dir(out, force):
    if os.path.exists(out) and not os.path.isdir(out):
        raise ExportError(f"{out}: exists and is not a directory (OUT_DIR)")
    if os.path.isdir(out) and os.listdir(out) and not force:
        raise ExportError(f"{out}: OUT_DIR exists and is not empty (--force replaces it)")


def tokenizer_sources(tok_dir):
    """The (source, name in OUT_DIR) pairs, after checking that every source is a file."""
    pairs = []
    for src, dst in TOKENIZER_FILES:
        path = os.path.join(tok_dir, src)
        if not os.path.isfile(path):
            raise ExportError(f"{path}: no such file (--tokenizer_dir {tok_dir}: expected GPT-2's "
                              f"encoder.json and vocab.bpe)")
        pairs.append((path, dst))
    return pairs


def _fsync_file(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _json(obj):
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def stock_config(cfg, dtype):
    from transformers import GPT2Config
    gpt2_vocab = cfg.vocab_size == checkpoint.GPT2_VOCAB
    conf = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
                      n_layer=cfg.n_layer, n_head=cfg.layers[0][0], n_inner=None,
                      activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0, layer_norm_epsilon=1e-5, initializer_range=0.02,
                      scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                      reorder_and_upcast_attn=False, tie_word_embeddings=True,
                      bos_token_id=GPT2_EOT if gpt2_vocab else None,
                      eos_token_id=GPT2_EOT if gpt2_vocab else None,
                      architectures=[hf_export.STOCK_ARCH],
                      torch_dtype="float32" if dtype == "fp32" else "bfloat16")
    # transformers writes the fields that differ from GPT2Config(); the shape is written whatever
    # the defaults, and Vp for the way back (sd_attention/import_hf.py)
    d = json.loads(conf.to_json_string(use_diff=True))
    d.update(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
             n_layer=cfg.n_layer, n_head=cfg.layers[0][0], padded_vocab_size=cfg.padded_vocab_size)
    return _json(d)


def custom_config(cfg, dtype):
    from dev.hf.configuration_llmc_gpt import LlmcGptConfig
    gpt2_vocab = cfg.vocab_size == checkpoint.GPT2_VOCAB
    stem = [f[:-3] for f in CUSTOM_FILES]
    conf = LlmcGptConfig(**hf_export.custom_config(cfg), layer_norm_epsilon=1e-5, lin_eps=1e-6,
                         bos_token_id=GPT2_EOT if gpt2_vocab else None,
                         eos_token_id=GPT2_EOT if gpt2_vocab else None,
                         architectures=[hf_export.CUSTOM_ARCH],
                         auto_map={"AutoConfig": f"{stem[0]}.LlmcGptConfig",
                                   "AutoModelForCausalLM": f"{stem[1]}.{hf_export.CUSTOM_ARCH}"},
                         torch_dtype="float32" if dtype == "fp32" else "bfloat16")
    d = json.loads(conf.to_json_string(use_diff=True))
    d.update(hf_export.custom_config(cfg), layer_norm_epsilon=1e-5, lin_eps=1e-6)  # all, defaults too
    if cfg.emb_scale == 1.0:
        del d["emb_scale"]     # written only when not 1, as header[10] (hf_export.custom_config)
    return _json(d)


def generation_config(cfg, stock):
    from transformers import GenerationConfig
    kw = {}
    if cfg.vocab_size == checkpoint.GPT2_VOCAB:
        kw.update(bos_token_id=GPT2_EOT, eos_token_id=GPT2_EOT)
    if not stock:
        kw["use_cache"] = False      # the custom model has no key/value cache
    return GenerationConfig(**kw).to_json_string()


def write_weights(path, tensors, dtype):
    """model.safetensors with the safetensors library: fp32 from numpy, or bf16 through torch
    (round to nearest even, as llmc_formats/checkpoint.py f32_to_bf16)."""
    meta = {"format": "pt"}
    if dtype == "fp32":
        from safetensors.numpy import save_file
        save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
                  path, metadata=meta)
    else:
        import torch
        from safetensors.torch import save_file
        save_file({k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)).to(torch.bfloat16)
                   for k, v in tensors.items()}, path, metadata=meta)
    _fsync_file(path)


def export(ckpt, out, force=False, dtype="fp32", tokenizer_dir=None):
    """Writes OUT_DIR; returns (cfg, version, stock, wrote_tokenizer)."""
    cfg, version, flat = checkpoint.read(ckpt)
    slots = hf_export.split_body(cfg, flat)
    bad = hf_export.padding_nonzero(cfg, slots)
    if bad:
        raise ExportError(f"{ckpt}: wte rows {cfg.vocab_size}..{cfg.padded_vocab_size - 1} (the "
                          f"padded vocabulary) hold {bad} non-zero values: a Hugging Face model "
                          f"keeps the V = {cfg.vocab_size} real rows only, so the export cannot "
                          f"represent this checkpoint")
    check_out_dir(out, force)
    tok = None
    if cfg.vocab_size == checkpoint.GPT2_VOCAB:
        tok = tokenizer_sources(tokenizer_dir or default_tokenizer_dir())
    stock = cfg.is_uniform()
    tensors = hf_export.stock_tensors(cfg, slots) if stock else hf_export.custom_tensors(cfg, slots)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.abspath(out)) + ".tmp-", dir=parent)
    old = None
    try:
        write_weights(os.path.join(tmp, "model.safetensors"), tensors, dtype)
        _write_text(os.path.join(tmp, "config.json"),
                    stock_config(cfg, dtype) if stock else custom_config(cfg, dtype))
        _write_text(os.path.join(tmp, "generation_config.json"), generation_config(cfg, stock))
        if not stock:
            for name in CUSTOM_FILES:
                shutil.copyfile(os.path.join(HF_DIR, name), os.path.join(tmp, name))
                _fsync_file(os.path.join(tmp, name))
        if tok:
            for src, dst in tok:
                shutil.copyfile(src, os.path.join(tmp, dst))
                _fsync_file(os.path.join(tmp, dst))
            special = {"bos_token": EOT_TEXT, "eos_token": EOT_TEXT, "unk_token": EOT_TEXT}
            _write_text(os.path.join(tmp, "special_tokens_map.json"), _json(special))
            _write_text(os.path.join(tmp, "tokenizer_config.json"), _json(dict(
                special, tokenizer_class="GPT2Tokenizer", add_prefix_space=False,
                add_bos_token=False, errors="replace", model_max_length=cfg.block_size,
                clean_up_tokenization_spaces=False)))
        for name in os.listdir(tmp):
            os.chmod(os.path.join(tmp, name), 0o644)
        os.chmod(tmp, 0o755)
        if os.path.isdir(out):      # empty, or --force: moved aside, then removed
            old = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.abspath(out)) + ".old-",
                                   dir=parent)
            os.rename(out, os.path.join(old, "d"))
        os.rename(tmp, out)
        tmp = None
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            if old is not None and os.path.isdir(os.path.join(old, "d")) and not os.path.exists(out):
                os.rename(os.path.join(old, "d"), out)      # the failed replace leaves the old one
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return cfg, version, stock, bool(tok)


def parse_args(argv):
    p = argparse.ArgumentParser(description="llmc checkpoint -> Hugging Face model directory "
                                "(GPT2LMHeadModel, or LlmcGptForCausalLM with trust_remote_code)")
    p.add_argument("ckpt", help="checkpoint (.bin, version 3, 5, 103 or 105)")
    p.add_argument("out_dir", help="output directory (must be absent or empty without --force)")
    p.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                   help="model.safetensors' dtype (default fp32)")
    p.add_argument("--tokenizer_dir", default=None,
                   help="folder with GPT-2's encoder.json and vocab.bpe (default: "
                        f"{default_tokenizer_dir()})")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        cfg, version, stock, tok = export(args.ckpt, args.out_dir, args.force, args.dtype,
                                          args.tokenizer_dir)
    except (ExportError, FormatError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        print(llmc_formats.missing_module_line(__file__, e.name), file=sys.stderr)
        return 1
    kind = (f"{hf_export.STOCK_ARCH} (model_type {hf_export.STOCK_MODEL_TYPE})" if stock else
            f"{hf_export.CUSTOM_ARCH} (model_type {hf_export.CUSTOM_MODEL_TYPE}, trust_remote_code=True)")
    print(f"{args.ckpt}: version {version}, {cfg.describe()} -> {args.out_dir}: {kind}, {args.dtype}")
    if not tok:
        print(f"no tokenizer files: V = {cfg.vocab_size} is not GPT-2's vocabulary "
              f"({checkpoint.GPT2_VOCAB})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
