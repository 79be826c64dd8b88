"""sd_attention/import_hf.py: a Hugging Face GPT-2 checkpoint -> our (llm.c) model checkpoint, so that the
diagnostics (./sd_spectrum; the head analysis of arXiv 2605.18826) and the evaluators run on
pretrained GPT-2 small/medium/large/XL; and the way back from dev/export_hf.py (doc/export.md).

    python sd_attention/import_hf.py path/to/model.safetensors -o gpt2_124M.bin
    python sd_attention/import_hf.py path/to/pytorch_model.bin -o gpt2_124M.bin [--n_head 12]
    python sd_attention/import_hf.py path/to/hf_model_dir -o gpt2_355M.bin      (model.safetensors or
                                                                         pytorch_model.bin inside)

Input (doc/formats.md "The 16 parameter tensors": importing Hugging Face GPT-2):
  - model.safetensors, parsed by hand (no safetensors package): a little-endian u64 header length
    n, n bytes of JSON {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": ...},
    then the raw data; offsets count from the first byte after the JSON. F32, F16, BF16 (and F64)
    tensors are read and widened to fp32.
  - or a PyTorch state dict (pytorch_model.bin), read with torch.load on the CPU.
  Keys with and without the `transformer.` prefix are accepted. The causal-mask buffers
  attn.bias / attn.masked_bias are skipped; lm_head.weight is tied to wte (a warning if it
  differs). Any other unknown key, a missing tensor or a wrong shape is a one-line error.
Shape: L from the h.<l> keys, C from wte, V from wte's rows (padded with zero rows to
Vp = ceil(V/128)*128), maxT from wpe, heads from config.json ("n_head") next to the model file,
else --n_head.
Output: llm.c's version 3 (fp32; --dtype bf16: version 5), the 16 tensors in llm.c's order, the
Conv1D weights (stored (in, out) by HF) transposed to nn.Linear's (out, in): c_attn, attn.c_proj,
mlp.c_fc, mlp.c_proj. Written by llmc_formats/checkpoint.py (NAME.tmp, fsync, rename). A
config.json with "padded_vocab_size" (dev/export_hf.py writes it) sets Vp instead.

The custom export of dev/export_hf.py (config.json with model_type "llmc_gpt": the layer table,
the header[9] flags, V, Vp, maxT, C, L, the base heads and, when not 1, emb_scale, the input scale
of header[10]) is read with llmc_formats/hf_export.py's
names: every tensor of the layout must be there with its shape, nothing else (lm_head.weight, tied
to wte, aside); the output is the checkpoint the export came from, version 103 (105 with
--dtype bf16), or 3/5 where the table is uniform. Export then import gives that checkpoint back
byte for byte (test/test_export_hf.py).
"""
import argparse
import json
import math
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
llmc_formats.require(__file__, "numpy")  # else one line naming `make deps`
import numpy as np  # noqa: E402
from llmc_formats import FormatError, checkpoint, hf_export  # noqa: E402
from llmc_formats.checkpoint import GPTConfig, bf16_to_f32, padded_vocab  # noqa: E402


class ImportError_(ValueError):
    """A file that is not a GPT-2 checkpoint we can import; the message names file and field."""


# ---------------------------------------------------------------------------------------------
# Readers: each returns {name: LazyTensor} so that a large model is widened one tensor at a time.

class LazyTensor:
    def __init__(self, shape, load):
        self.shape = tuple(int(s) for s in shape)
        self._load = load

    def numpy(self):
        """The tensor as a C-contiguous float32 array."""
        return np.ascontiguousarray(self._load(), dtype=np.float32).reshape(self.shape)


SAFETENSORS_DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "F64": ("<f8", 8)}


def read_safetensors(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ImportError_(f"{path}: {size} bytes: too short for the u64 header length")
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            raise ImportError_(f"{path}: header length {n} exceeds the file ({size} bytes): "
                               f"not a safetensors file")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ImportError_(f"{path}: JSON header: {e}") from None
    if not isinstance(header, dict):
        raise ImportError_(f"{path}: JSON header: expected an object of tensors")
    base = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ImportError_(f"{path}: tensor '{name}': expected dtype, shape and "
                               f"data_offsets [begin, end)") from None
        if dtype not in SAFETENSORS_DTYPES:
            raise ImportError_(f"{path}: tensor '{name}': dtype {dtype}: expected one of "
                               f"{', '.join(SAFETENSORS_DTYPES)}")
        np_dtype, itemsize = SAFETENSORS_DTYPES[dtype]
        count = math.prod(shape)
        if end - begin != count * itemsize or begin < 0 or base + end > size:
            raise ImportError_(f"{path}: tensor '{name}': data_offsets [{begin}, {end}) do not "
                               f"hold {count} {dtype} values inside the file")

        def load(begin=begin, count=count, np_dtype=np_dtype, dtype=dtype):
            raw = np.frombuffer(data, dtype=np_dtype, count=count, offset=base + begin)
            return bf16_to_f32(raw) if dtype == "BF16" else raw.astype(np.float32)

        out[name] = LazyTensor(shape, load)
    return out


def read_torch(path):
    import torch  # only this format needs torch
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        sd = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001  (pickle and zip errors have many types)
        raise ImportError_(f"{path}: not a PyTorch state dict: {str(e).splitlines()[0]}") from None
    if not isinstance(sd, dict):
        raise ImportError_(f"{path}: expected a state dict (name -> tensor), got {type(sd).__name__}")
    return {k: LazyTensor(v.shape, lambda v=v: v.detach().float().numpy())
            for k, v in sd.items() if hasattr(v, "shape")}


def read_any(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return read_torch(path)


# ---------------------------------------------------------------------------------------------
# HF key names -> our slots

SKIPPED = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)")   # causal-mask buffers
LAYER_KEY = re.compile(r"h\.(\d+)\.(.+)")
PER_LAYER = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
             "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")
GLOBAL = ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")
CONV1D = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}


def normalize_keys(tensors, path):
    """Strips `transformer.`; returns (model tensors, lm_head or None). Unknown keys are errors."""
    out, lm_head = {}, None
    for key, t in tensors.items():
        k = key[len("transformer."):] if key.startswith("transformer.") else key
        if k == "lm_head.weight":
            lm_head = t
        elif SKIPPED.fullmatch(k):
            continue
        elif k in GLOBAL or (LAYER_KEY.fullmatch(k) and LAYER_KEY.fullmatch(k).group(2) in PER_LAYER):
            if k in out:
                raise ImportError_(f"{path}: key '{key}': given twice (with and without "
                                   f"'transformer.')")
            out[k] = t
        else:
            raise ImportError_(f"{path}: key '{key}': not a GPT-2 (GPT2LMHeadModel) tensor")
    return out, lm_head


def infer_shape(t, path, n_head):
    """(L, C, V, maxT) from the tensors, after checking every tensor's shape; n_head (from the
    caller) must divide C."""
    for k in GLOBAL:
        if k not in t:
            raise ImportError_(f"{path}: key '{k}': missing")
    V, C = t["wte.weight"].shape
    maxT = t["wpe.weight"].shape[0]
    layers = sorted({int(LAYER_KEY.fullmatch(k).group(1)) for k in t if LAYER_KEY.fullmatch(k)})
    if not layers or layers != list(range(len(layers))):
        raise ImportError_(f"{path}: keys h.<l>.*: layers {layers[:8]}...: expected 0..L-1")
    L = len(layers)
    if n_head < 1 or C % n_head:
        raise ImportError_(f"{path}: n_head {n_head}: expected a positive divisor of C = {C}")
    expect = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
              "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
              "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (C, 4 * C),
              "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
    for l in range(L):
        for name, shape in expect.items():
            k = f"h.{l}.{name}"
            if k not in t:
                raise ImportError_(f"{path}: key '{k}': missing")
            if t[k].shape != shape:
                raise ImportError_(f"{path}: key '{k}': shape {list(t[k].shape)}, expected "
                                   f"{list(shape)} (HF Conv1D stores (in, out))")
    for k, shape in (("wpe.weight", (maxT, C)), ("ln_f.weight", (C,)), ("ln_f.bias", (C,))):
        if t[k].shape != shape:
            raise ImportError_(f"{path}: key '{k}': shape {list(t[k].shape)}, expected {list(shape)}")
    return L, C, V, maxT


def slot_arrays(t, L, C, V, Vp):
    """Yields llm.c's 16 tensors in file order (doc/formats.md "The 16 parameter tensors"), one layer block at a time."""
    wte = t["wte.weight"].numpy()
    yield np.concatenate([wte, np.zeros((Vp - V, C), np.float32)]) if Vp > V else wte
    yield t["wpe.weight"].numpy()
    for name in PER_LAYER[:2]:
        for l in range(L):
            yield t[f"h.{l}.{name}"].numpy()
    for name in PER_LAYER[2:]:
        for l in range(L):
            a = t[f"h.{l}.{name}"].numpy()
            yield np.ascontiguousarray(a.T) if name in CONV1D else a   # (in, out) -> (out, in)
    yield t["ln_f.weight"].numpy()
    yield t["ln_f.bias"].numpy()


def write_checkpoint(t, L, C, V, maxT, n_head, out, dtype, Vp=0):
    """Header, then the slots of doc/formats.md "The 16 parameter tensors" in order; a per-layer slot holds every layer's
    tensor (all ln_1.weight, then all ln_1.bias, ...), which is how slot_arrays walks PER_LAYER.
    The writer is llmc_formats/checkpoint.py's (a uniform model: version 3, or 5 with bf16).
    Vp 0: ceil(V/128)*128."""
    cfg = GPTConfig(n_layer=L, n_embd=C, n_head=n_head, block_size=maxT, vocab_size=V,
                    padded_vocab_size=Vp)
    checkpoint.write(out, cfg, slot_arrays(t, L, C, V, cfg.padded_vocab_size), dtype)


def import_custom(path, conf, conf_path, n_head_flag, out, dtype):
    """A custom export (model_type llmc_gpt) -> its checkpoint; returns the GPTConfig."""
    cfg = hf_export.config_from_custom(conf, conf_path)
    if n_head_flag and n_head_flag != cfg.n_head:
        raise ImportError_(f"--n_head {n_head_flag}: {conf_path} says n_head {cfg.n_head}")
    tensors = read_any(path)
    known = {key for _, _, key, _ in hf_export.custom_names(cfg)}
    for key in tensors:
        if key not in known and key != "lm_head.weight":
            raise ImportError_(f"{path}: key '{key}': not a tensor of the {hf_export.CUSTOM_MODEL_TYPE} "
                               f"layout of {conf_path}")
    arrays = hf_export.custom_slot_arrays(cfg, tensors, path)
    lm_head, wte = tensors.get("lm_head.weight"), tensors["transformer.wte.weight"]
    if lm_head is not None and (lm_head.shape != wte.shape or
                                not np.array_equal(lm_head.numpy(), wte.numpy())):
        print(f"warning: {path}: lm_head.weight differs from transformer.wte.weight; our model "
              f"ties the LM head to wte, so lm_head.weight is ignored", file=sys.stderr)
    checkpoint.write(out, cfg, arrays, dtype)
    return cfg


# ---------------------------------------------------------------------------------------------
# Command line

def resolve_input(path):
    """A file, or a directory holding model.safetensors (preferred) or pytorch_model.bin."""
    if os.path.isdir(path):
        for name in ("model.safetensors", "pytorch_model.bin"):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        raise ImportError_(f"{path}: directory without model.safetensors or pytorch_model.bin")
    if not os.path.isfile(path):
        raise ImportError_(f"{path}: no such file")
    return path


def read_config(model_path, config_path):
    """(config.json as a dict, its path) from --config, else next to the model file; (None, None)
    when there is none."""
    cfg = config_path or os.path.join(os.path.dirname(os.path.abspath(model_path)), "config.json")
    if not os.path.isfile(cfg):
        if config_path:
            raise ImportError_(f"--config {config_path}: no such file")
        return None, None
    try:
        with open(cfg) as f:
            conf = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ImportError_(f"{cfg}: {e}") from None
    if not isinstance(conf, dict):
        raise ImportError_(f"{cfg}: expected a JSON object")
    return conf, cfg


def head_count(conf, cfg, model_path, n_head_flag):
    """n_head from config.json (conf, read from the path cfg), else --n_head."""
    if conf is not None and "n_head" in conf:
        if n_head_flag and n_head_flag != conf["n_head"]:
            raise ImportError_(f"--n_head {n_head_flag}: {cfg} says n_head {conf['n_head']}")
        return int(conf["n_head"]), cfg
    if not n_head_flag:
        raise ImportError_(f"--n_head: no config.json with n_head next to {model_path}; give "
                           f"the head count (GPT-2 small 12, medium 16, large 20, XL 25)")
    return n_head_flag, None


def parse_args(argv):
    p = argparse.ArgumentParser(description="Hugging Face GPT-2 (model.safetensors or "
                                "pytorch_model.bin) -> llm.c model checkpoint (v3/v5); a custom "
                                "export of dev/export_hf.py -> its checkpoint (v103/v105)")
    p.add_argument("model", help="model.safetensors, pytorch_model.bin, or a directory with one")
    p.add_argument("-o", "--out", required=True, help="output checkpoint (.bin)")
    p.add_argument("--config", default=None, help="config.json (default: next to the model)")
    p.add_argument("--n_head", type=int, default=0, help="heads per layer, without config.json")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                   help="fp32: version 3 (CPU trainer), bf16: version 5 (GPU trainer)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    version = 3 if args.dtype == "fp32" else 5
    try:
        path = resolve_input(args.model)
        conf, conf_path = read_config(path, args.config)
        if conf is not None and conf.get("model_type") == hf_export.CUSTOM_MODEL_TYPE:
            cfg = import_custom(path, conf, conf_path, args.n_head, args.out, args.dtype)
            version += 0 if cfg.is_uniform() else 100
            print(f"{path}: {cfg.describe()} ({conf_path}) -> {args.out} (version {version})")
            return 0
        n_head, cfg_used = head_count(conf, conf_path, path, args.n_head)
        Vp = conf.get("padded_vocab_size", 0) if conf is not None else 0
        tensors, lm_head = normalize_keys(read_any(path), path)
        L, C, V, maxT = infer_shape(tensors, path, n_head)
        if isinstance(Vp, bool) or not isinstance(Vp, int) or (Vp and Vp < V):
            raise ImportError_(f"{conf_path}: field 'padded_vocab_size': {Vp!r}: expected an "
                               f"integer >= V = {V}")
        if lm_head is not None:
            if lm_head.shape != (V, C) or not np.array_equal(lm_head.numpy(), tensors["wte.weight"].numpy()):
                print(f"warning: {path}: lm_head.weight differs from wte.weight; our model ties "
                      f"the LM head to wte, so lm_head.weight is ignored", file=sys.stderr)
        write_checkpoint(tensors, L, C, V, maxT, n_head, args.out, args.dtype, Vp or padded_vocab(V))
    except (ImportError_, FormatError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{path}: L {L}, C {C}, heads {n_head}{' (' + cfg_used + ')' if cfg_used else ''}, "
          f"V {V}, maxT {maxT} -> {args.out} (version {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
