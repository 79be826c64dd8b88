#!/usr/bin/env python3
"""scripts/sample.py: text from a checkpoint, continuing a prompt (train_gpt2.py's PyTorch model of
the same checkpoint, on the CPU).

  /usr/bin/python3 scripts/sample.py -e out/shakespeare_prism/model_00000300.bin --prompt "ROMEO:"
        [-n 64] [--temperature 1.0] [--top_k 0] [--seed 1337] [--samples 1]

The prompt is encoded with GPT-2's BPE (dev/data/gpt2_bpe.py, from the offline files in
../shared/data/gpt2); an empty prompt starts from <|endoftext|>, as the trainers' samples do. Each of
the -n new tokens is drawn from softmax(logits / temperature) restricted to the top_k largest logits
(0: all of them), with torch's generator seeded --seed, so a seed gives the same text every time;
the context is the last maxT tokens. Every checkpoint the trainers write is read, any layer kind
(mha, sd, lin, sdlin) and -ln 0 included. Errors are one line naming the file or flag.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401
import train_gpt2  # noqa: E402  (the PyTorch model; it names a missing numpy/torch in one line)
import torch  # noqa: E402
from dev.data.gpt2_bpe import get_encoder  # noqa: E402

EOT = 50256


def parse_args(argv):
    # every option's help names its default ("%(default)s" is argparse's value), so --help alone
    # says what a bare run does
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-e", "--model", required=True, help="checkpoint (.bin) written by a trainer (required)")
    p.add_argument("--prompt", default="", help="text to continue (default: empty, start from <|endoftext|>)")
    p.add_argument("-n", "--tokens", type=int, default=64, help="new tokens per sample (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="divide the logits by this before the softmax (default: %(default)s)")
    p.add_argument("--top_k", type=int, default=0,
                   help="sample among the k largest logits, 0: all (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1337, help="seed of torch's generator (default: %(default)s)")
    p.add_argument("--samples", type=int, default=1, help="samples drawn, one after another (default: %(default)s)")
    a = p.parse_args(argv)
    if a.tokens < 1:
        sys.exit(f"error: -n {a.tokens}: expected at least 1 token")
    if not a.temperature > 0:
        sys.exit(f"error: --temperature {a.temperature}: expected a number above 0")
    if a.top_k < 0:
        sys.exit(f"error: --top_k {a.top_k}: expected 0 (all) or more")
    if a.samples < 1:
        sys.exit(f"error: --samples {a.samples}: expected at least 1")
    return a


@torch.no_grad()
def sample(model, ids, n, temperature, top_k, gen):
    """ids followed by n tokens drawn one at a time."""
    maxT = model.config.block_size
    ids = list(ids)
    for _ in range(n):
        ctx = torch.tensor([ids[-maxT:]], dtype=torch.long)
        logits, _ = model(ctx)
        logits = logits[0, -1] / temperature
        if 0 < top_k < logits.numel():
            kth = torch.topk(logits, top_k).values[-1]
            logits = torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)
        ids.append(int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen)))
    return ids


def main(argv=None):
    a = parse_args(argv)
    if not os.path.isfile(a.model):
        sys.exit(f"error: -e {a.model}: no such checkpoint")
    try:
        model = train_gpt2.load_model(a.model)
        enc = get_encoder()
    except (OSError, train_gpt2.FormatError) as e:
        sys.exit(f"error: {e}")
    model.eval()
    prompt = enc.encode(a.prompt) if a.prompt else [EOT]
    if len(prompt) > model.config.block_size:
        sys.exit(f"error: --prompt: {len(prompt)} tokens, more than the model's maxT {model.config.block_size}")
    gen = torch.Generator().manual_seed(a.seed)
    for i in range(a.samples):
        ids = sample(model, prompt, a.tokens, a.temperature, a.top_k, gen)
        text = enc.decode(ids[len(prompt):])
        head = a.prompt if a.prompt else ""
        print(f"--- sample {i + 1} ({a.tokens} tokens, seed {a.seed}, temperature {a.temperature:g}"
              f"{f', top_k {a.top_k}' if a.top_k else ''})")
        print(head + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
