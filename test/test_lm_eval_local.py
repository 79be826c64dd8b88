"""test/test_lm_eval_local.py: EleutherAI's lm-evaluation-harness against eval_gpt2 on one model
(doc/evals.md "EleutherAI's lm-evaluation-harness").

Two models, each in two forms: a Hugging Face folder and our checkpoint. model_pair is a
random GPT2LMHeadModel (L 2, C 64, 4 heads, V 50257, 256 positions; LayerNorm and bias
parameters moved off their init so that each lands in its own slot) saved with the GPT-2
tokenizer files made from the offline encoder.json / vocab.bpe, and imported into our format by
sd_attention/import_hf.py. dev/eval/lm_eval_local.py runs the harness on the first N items of
llmc_hellaswag, llmc_winogrande and llmc_arc_easy (--log_samples), eval_gpt2 scores the same
items of our eval files (-n N -scores), and per example:

- the same text: the harness's (context, continuation) pairs are our writers' rendering;
- the same tokens: the HF tokenizer, used as the harness uses it (context + continuation encoded
  whole, split at the context's length), gives our eval file's tokens for every option;
- the same log-likelihoods: every option's harness log-likelihood is minus eval_gpt2's summed
  loss within 1e-4 + 1e-6 |loss| nats (fp32 both; the harness sums in fp32, eval_gpt2 in double;
  observed on 500 items of each task: at most 5.7e-5, 2.2e-7 relative);
- acc: the harness's prediction (argmax of the summed log-likelihood) is eval_gpt2's (argmin of
  the summed loss) on every example whose best two options are further apart than their two
  tolerances (at most N/10 closer ones are allowed, and reported), and the two acc agree;
- acc_norm, which the two define differently: eval_gpt2 divides by the completion's tokens, the
  harness by the choice's characters. Checked: the harness's acc_norm per example is the
  character-normalised prediction made from eval_gpt2's losses, and eval_gpt2's acc_norm is the
  token-normalised prediction made from the harness's log-likelihoods (with our token counts).
  How often the two normalisations pick different options is reported;
- WinoGrande has acc only in both.

exported_pair is the other direction: ./train_gpt2 trains two S-D layers without LayerNorm
(-ln 0, V 50257) for 12 steps and dev/export_hf.py exports the checkpoint as the custom class
(trust_remote_code=True); the same comparison then runs on HellaSwag and WinoGrande.

Negative control: the same comparison against a checkpoint whose final LayerNorm bias moved by
1e-2 must miss the log-likelihood tolerance. The wrapper's one-line errors are checked too.

Without lm_eval importable the test fails with one line naming the set-up command (make deps).

Run: /usr/bin/python3 test/test_lm_eval_local.py   (needs make train_gpt2 data eval_gpt2 evals; LM_EVAL_AGREE_N=500 for
a longer comparison, default 30)
"""
import csv
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's root first (llmc_formats/__init__.py)
import llmc_formats  # noqa: E402,F401

from harness import check, finish  # noqa: E402
from dev.data import arc_easy, hellaswag, winogrande  # noqa: E402
from dev.data import eval_common  # noqa: E402
from dev.data.data_common import shared_data_dir  # noqa: E402
from llmc_formats.atomic import write_atomic  # noqa: E402

N = int(os.environ.get("LM_EVAL_AGREE_N", "30"))
TMP = os.path.join(REPO, "build", "tmp_lm_eval")
EVAL_GPT2 = os.path.join(REPO, "eval_gpt2")
LOCAL = os.path.join(REPO, "dev", "eval", "lm_eval_local.py")
EXPORT = os.path.join(REPO, "dev", "export_hf.py")
TRAINER = os.path.join(REPO, "train_gpt2")
TS_TRAIN = os.path.join(REPO, "dev", "data", "tinyshakespeare", "tiny_shakespeare_train.bin")
TS_VAL = os.path.join(REPO, "dev", "data", "tinyshakespeare", "tiny_shakespeare_val.bin")
EXPORTED_TASKS = ("hellaswag", "winogrande")  # the exported model: the two tasks' comparison again
# task: (writer module, eval file, whether the task has acc_norm)
TASKS = {
    "hellaswag": (hellaswag, "dev/data/hellaswag/hellaswag_val.bin", True),
    "winogrande": (winogrande, "dev/data/winogrande/winogrande_val.bin", False),
    "arc_easy": (arc_easy, "dev/data/arc_easy/arc_easy_test.bin", True),
}
TOL_ABS, TOL_REL = 1e-4, 1e-6  # nats, per option: |harness log-likelihood + our summed loss|
SETUP = "make deps (installs dev/requirements-eval.txt for /usr/bin/python3)"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": os.path.join(TMP, "hf_home"), "OMP_NUM_THREADS": "1"}


def run(cmd, env=None, cwd=REPO):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    return p.returncode, p.stdout, p.stderr


def tol(loss):
    return TOL_ABS + TOL_REL * abs(loss)


# ---------------------------------------------------------------------------------------------
# The model in both forms

def save_gpt2_tokenizer(out_dir, max_len):
    """The GPT-2 tokenizer files (vocab.json, merges.txt, tokenizer.json, ...) from the offline
    encoder.json and vocab.bpe, so that AutoTokenizer.from_pretrained(out_dir) works offline."""
    from transformers import GPT2TokenizerFast
    src = os.path.join(shared_data_dir(), "gpt2")
    tok = GPT2TokenizerFast(vocab_file=os.path.join(src, "encoder.json"),
                            merges_file=os.path.join(src, "vocab.bpe"), model_max_length=max_len)
    tok.save_pretrained(out_dir)


def random_hf_gpt2(out_dir, seed, ln_f_shift=0.0):
    """A random GPT2LMHeadModel and its tokenizer in out_dir. LayerNorm weights are 1 + N(0, 0.1),
    every bias N(0, 0.02) (HF's init leaves them at 1 and 0); ln_f_shift moves the final
    LayerNorm's bias by that times a fixed normal draw (the negative control)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=50257, n_positions=256, n_embd=64, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(0.1 * torch.randn(p.shape, generator=g) if name.endswith("weight")
                       else 0.02 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.add_(0.02 * torch.randn(p.shape, generator=g))
        if ln_f_shift:
            model.transformer.ln_f.bias.add_(ln_f_shift * torch.randn(cfg.n_embd, generator=g))
    model.save_pretrained(out_dir)
    save_gpt2_tokenizer(out_dir, cfg.n_positions)


def import_checkpoint(hf_dir, ckpt):
    rc, out, err = run([sys.executable, os.path.join(REPO, "sd_attention", "import_hf.py"), hf_dir, "-o", ckpt])
    if rc != 0:
        raise RuntimeError(f"import_hf.py {hf_dir}: {err.strip()}")


def model_pair(tmp, seed=1234, ln_f_shift=0.0):
    """(Hugging Face folder, our checkpoint) of one model: the one place the pair is made, so that a
    folder exported from our checkpoint can take the HF side's place here."""
    hf_dir, ckpt = os.path.join(tmp, f"hf_{seed}_{ln_f_shift}"), os.path.join(tmp, f"model_{seed}_{ln_f_shift}.bin")
    random_hf_gpt2(hf_dir, seed, ln_f_shift)
    import_checkpoint(hf_dir, ckpt)
    return hf_dir, ckpt


def exported_pair(tmp):
    """(Hugging Face folder, our checkpoint) of a model the CPU trainer trained and dev/export_hf.py
    exported: two S-D layers without LayerNorm (-ln 0), V 50257, 12 steps on TinyShakespeare. Its
    layer table is not GPT-2's, so the export is the custom class, loaded with
    trust_remote_code=True."""
    d, table = os.path.join(tmp, "sd_noln"), os.path.join(tmp, "sd_noln_layers.txt")
    with open(table, "w") as f:
        f.write("4:sd 2x32:sd\n")
    rc, out, err = run([TRAINER, "-e", "L2C64H4T256", "-layers", table, "-ln", "0",
                        "-sd_init_s", "0.1", "-sd_init_theta", "0.5", "-sd_init_u", "0.3",
                        "-i", TS_TRAIN, "-j", TS_VAL, "-b", "4", "-t", "64", "-x", "12", "-l", "3e-3",
                        "-v", "0", "-m", "1", "-s", "0", "-n", "1000", "-o", d],
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    ckpt, hf_dir = os.path.join(d, "model_00000012.bin"), os.path.join(tmp, "hf_sd_noln")
    if rc != 0 or not os.path.isfile(ckpt):
        raise RuntimeError(f"train_gpt2 (S-D, -ln 0): {err.strip()[-300:]}")
    rc, out, err = run([sys.executable, EXPORT, ckpt, hf_dir])
    if rc != 0:
        raise RuntimeError(f"export_hf.py {ckpt}: {err.strip()}")
    with open(os.path.join(hf_dir, "config.json")) as f:
        check(json.load(f).get("model_type") == "llmc_gpt",
              "the S-D -ln 0 model exports as the custom class (model_type llmc_gpt)")
    return hf_dir, ckpt


# ---------------------------------------------------------------------------------------------
# Both scorers' outputs

def eval_gpt2_scores(ckpt, tag, tasks):
    """eval_gpt2 on the first N examples: ({task: {example: [(sum_loss, n_tok), ...]}}, its JSON)."""
    scores, js = os.path.join(TMP, f"scores_{tag}.tsv"), os.path.join(TMP, f"eval_{tag}.json")
    rc, out, err = run([EVAL_GPT2, "-e", ckpt, "-tasks", ",".join(tasks), "-n", str(N),
                        "-scores", scores, "-json", js], env={**os.environ, "OMP_NUM_THREADS": "1"})
    if rc != 0:
        raise RuntimeError(f"eval_gpt2: {err.strip()}")
    table = {}
    with open(scores) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            opts = table.setdefault(r["task"], {}).setdefault(int(r["example"]), [])
            assert int(r["option"]) == len(opts)
            opts.append((float(r["sum_loss"]), int(r["n_tok"])))
    with open(js) as f:
        return table, json.load(f)


def harness_samples(out_dir, task):
    """The harness's per-sample records of llmc_<task>, in doc_id order."""
    files = glob.glob(os.path.join(out_dir, "**", f"samples_llmc_{task}_*.jsonl"), recursive=True)
    if len(files) != 1:
        raise RuntimeError(f"{out_dir}: expected one samples file of llmc_{task}, found {len(files)}")
    with open(files[0]) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda s: s["doc_id"])


def harness_results(out_dir):
    files = glob.glob(os.path.join(out_dir, "**", "results_*.json"), recursive=True)
    if len(files) != 1:
        raise RuntimeError(f"{out_dir}: expected one results file, found {len(files)}")
    with open(files[0]) as f:
        return json.load(f)["results"]


def option_lls(sample):
    """Each option's log-likelihood as the harness logged it (strings in its JSON)."""
    return [float(r[0]) for r in sample["filtered_resps"]]


def option_texts(sample):
    args = sample["arguments"]
    return [(args[f"gen_args_{i}"]["arg_0"], args[f"gen_args_{i}"]["arg_1"]) for i in range(len(args))]


def first_argmax(values):
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def near_tie(losses, bounds):
    """Whether the best two options' losses are within the sum of their tolerances of each other."""
    order = sorted(range(len(losses)), key=lambda i: losses[i])
    a, b = order[0], order[1]
    return losses[b] - losses[a] <= bounds[a] + bounds[b]


# ---------------------------------------------------------------------------------------------
# The comparison

def harness_split(tok, context, continuation):
    """The harness's tokens of one request (its HF model's _encode_pair): trailing spaces of the
    context move to the continuation, the whole is encoded and split at the context's length."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole = tok(context + continuation, add_special_tokens=False)["input_ids"]
    ctx = tok(context, add_special_tokens=False)["input_ids"]
    return whole[:len(ctx)], whole[len(ctx):]


def compare_task(task, samples, ours, our_json, results, tok, model=""):
    what = f"{task} ({model})" if model else task
    writer, path, has_norm = TASKS[task]
    _, examples = eval_common.read_evalfile(os.path.join(REPO, path), limit=N)
    rendered = writer.rendered(writer.default_input())[:N]
    check([s["doc_id"] for s in samples] == list(range(N)) and sorted(ours) == list(range(N)),
          f"{what}: both scored examples 0..{N - 1}")

    texts_ok = tokens_ok = rows_ok = True
    worst = (0.0, 0.0, None)  # (ratio to the tolerance, |difference|, (example, option, loss))
    n_opts = 0
    agree = near = near_same = 0
    lm_acc_ok = True
    norm_tok_ok = norm_char_ok = True
    norm_differs = 0
    tok_norm_hits = char_norm_hits = 0
    for i, (s, ex, (ctxs, comps, label)) in enumerate(zip(samples, examples, rendered)):
        lls, opts = option_lls(s), ours[i]
        rows_ok &= len(lls) == len(opts) == ex.n_rows
        if not rows_ok:
            break
        want = [(ctxs[r if len(ctxs) > 1 else 0], comps[r if len(comps) > 1 else 0]) for r in range(ex.n_rows)]
        texts_ok &= option_texts(s) == want
        for r, (c, d) in enumerate(option_texts(s)):
            tokens_ok &= harness_split(tok, c, d) == tuple(ex.row(r))
        losses = [sl for sl, _ in opts]
        for r, (ll, (sl, _)) in enumerate(zip(lls, opts)):
            n_opts += 1
            if worst[2] is None or abs(ll + sl) / tol(sl) > worst[0]:
                worst = (abs(ll + sl) / tol(sl), abs(ll + sl), (i, r, sl))
        bounds = [tol(sl) for sl in losses]
        same = first_argmax(lls) == eval_common.first_argmin(losses)
        if near_tie(losses, bounds):
            near += 1
            near_same += same
        else:
            agree += same
        lm_acc_ok &= s["acc"] == float(first_argmax(lls) == label)
        if has_norm:
            counts = [n for _, n in opts]
            chars = [len(d) - 1 for _, d in want]  # the choice without the delimiter " "
            tok_pred = eval_common.first_argmin([sl / n for sl, n in opts])
            char_pred = eval_common.first_argmin([sl / c for sl, c in zip(losses, chars)])
            # eval_gpt2's acc_norm from the harness's log-likelihoods and our token counts
            lm_tok_pred = first_argmax([ll / n for ll, n in zip(lls, counts)])
            norm_tok_ok &= lm_tok_pred == tok_pred or \
                near_tie([sl / n for sl, n in opts], [b / n for b, n in zip(bounds, counts)])
            # the harness's acc_norm from eval_gpt2's losses and the choices' characters
            norm_char_ok &= s["acc_norm"] == float(char_pred == label) or \
                near_tie([sl / c for sl, c in zip(losses, chars)], [b / c for b, c in zip(bounds, chars)])
            norm_differs += tok_pred != char_pred
            tok_norm_hits += lm_tok_pred == label
            char_norm_hits += char_pred == label
    check(rows_ok, f"{what}: every example has the same number of options in both")
    if not rows_ok:
        return None
    check(texts_ok, f"{what}: the harness's (context, continuation) pairs are our writer's rendering")
    check(tokens_ok, f"{what}: the HF tokenizer, used as the harness uses it, gives our eval file's "
                     f"tokens for every option ({n_opts} options)")
    ratio, diff, (i, r, sl) = worst
    check(ratio <= 1, f"{what}: every option's log-likelihood is minus eval_gpt2's summed loss within "
                      f"{TOL_ABS:g} + {TOL_REL:g}|loss| (worst {diff:.2e} at example {i} option {r}, "
                      f"loss {sl:.2f}: {ratio:.2f} of the tolerance; {n_opts} options)")
    check(agree == N - near and near <= N // 10,
          f"{what}: acc picks the same option on {agree} of the {N - near} examples without a near-tie "
          f"({near} near-ties, at most {N // 10} allowed; the same option on {near_same} of them)")
    check(lm_acc_ok, f"{what}: the harness's per-sample acc is its argmax against the label")
    lm_acc, our_acc = results[f"llmc_{task}"]["acc,none"], our_json["tasks"][task]["acc"]
    if near_same == near:
        check(abs(lm_acc - our_acc) < 1e-6, f"{what}: acc {lm_acc:.4f} (harness) = {our_acc:.4f} (eval_gpt2)")
    else:
        print(f"NOTE {what}: acc {lm_acc:.4f} (harness), {our_acc:.4f} (eval_gpt2): {near - near_same} "
              f"near-ties went different ways")
    summary = {"examples": N, "options": n_opts, "worst_abs": diff, "worst_loss": sl, "worst_ratio": ratio,
               "near_ties": near, "near_ties_same": near_same, "acc_harness": lm_acc, "acc_eval_gpt2": our_acc}
    if has_norm:
        lm_norm, our_norm = results[f"llmc_{task}"]["acc_norm,none"], our_json["tasks"][task]["acc_norm"]
        check(norm_tok_ok and abs(tok_norm_hits / N - our_norm) < 1e-6,
              f"{what}: eval_gpt2's acc_norm ({our_norm:.4f}) is the per-token normalisation of the "
              f"harness's log-likelihoods, example by example")
        check(norm_char_ok and abs(char_norm_hits / N - lm_norm) < 1e-6,
              f"{what}: the harness's acc_norm ({lm_norm:.4f}) is the per-character normalisation of "
              f"eval_gpt2's losses, example by example")
        print(f"NOTE {what}: the two normalisations pick different options on {norm_differs} of {N} "
              f"examples (acc_norm: per token {our_norm:.4f}, per character {lm_norm:.4f})")
        summary.update(norm_differs=norm_differs, acc_norm_tokens=our_norm, acc_norm_chars=lm_norm)
    else:
        check("acc_norm,none" not in results[f"llmc_{task}"] and "acc_norm" not in our_json["tasks"][task],
              f"{what}: acc only, in both")
    return summary


def negative_control(samples, tmp):
    """A model whose final LayerNorm bias moved by 1e-2: its losses must miss the tolerance."""
    _, ckpt = model_pair(tmp, ln_f_shift=1e-2)
    ours, _ = eval_gpt2_scores(ckpt, "shifted", ["winogrande"])
    ratio = max(abs(ll + sl) / tol(sl) for i, s in enumerate(samples)
                for ll, (sl, _) in zip(option_lls(s), ours["winogrande"][i]))
    check(ratio > 10, f"negative control: ln_f.bias moved by 1e-2 misses the log-likelihood tolerance "
                      f"on winogrande by {ratio:.0f}x (> 10x)")


def test_errors(hf_dir):
    rc, out, err = run([sys.executable, LOCAL, os.path.join(TMP, "no_such_model")])
    lines = err.strip().split("\n")
    check(rc != 0 and len(lines) == 1 and "no config.json" in lines[0],
          f"lm_eval_local.py on a folder without config.json: one error line ({lines[-1][:120]})")
    rc, out, err = run([sys.executable, LOCAL, hf_dir, "--tasks", "hellaswag,piqa"])
    lines = err.strip().split("\n")
    check(rc != 0 and len(lines) == 1 and "--tasks" in lines[0],
          f"lm_eval_local.py --tasks with an unknown task: one error line ({lines[-1][:120]})")


def exported_model(tmp, tok):
    """The same comparison on exported_pair's model: train, export, harness, eval_gpt2."""
    hf_dir, ckpt = exported_pair(tmp)
    ours, our_json = eval_gpt2_scores(ckpt, "exported", list(EXPORTED_TASKS))
    out_dir = os.path.join(tmp, "out_exported")
    rc, out, err = run([sys.executable, LOCAL, hf_dir, "--tasks", ",".join(EXPORTED_TASKS), "--limit", str(N),
                        "--output_path", out_dir], env={**os.environ, **OFFLINE})
    if not check(rc == 0, f"dev/eval/lm_eval_local.py ran the harness on the export of an S-D -ln 0 "
                          f"checkpoint (rc {rc}{': ' + err.strip()[-300:] if rc else ''})"):
        return {}
    results = harness_results(out_dir)
    return {f"{task}_exported": compare_task(task, harness_samples(out_dir, task), ours[task], our_json,
                                             results, tok, model="exported S-D -ln 0")
            for task in EXPORTED_TASKS}


def main():
    if importlib.util.find_spec("lm_eval") is None:
        check(False, f"lm_eval (lm-evaluation-harness) is not installed for {sys.executable}: run {SETUP}")
        finish()
    missing = [p for p in [EVAL_GPT2, TRAINER, TS_TRAIN, TS_VAL] + [os.path.join(REPO, t[1]) for t in TASKS.values()]
               if not os.path.isfile(p)]
    if missing:
        check(False, f"missing {', '.join(os.path.relpath(p, REPO) for p in missing)}: run make train_gpt2 data "
                     f"eval_gpt2 evals")
        finish()
    os.environ.update(OFFLINE)
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    t0 = time.time()
    hf_dir, ckpt = model_pair(TMP)
    ours, our_json = eval_gpt2_scores(ckpt, "model", list(TASKS))
    t1 = time.time()
    out_dir = os.path.join(TMP, "out")
    rc, out, err = run([sys.executable, LOCAL, hf_dir, "--tasks", ",".join(TASKS), "--limit", str(N),
                        "--output_path", out_dir], env={**os.environ, **OFFLINE})
    t2 = time.time()
    ok = check(rc == 0 and "running (from" in out, f"dev/eval/lm_eval_local.py ran the harness "
                                                   f"({t2 - t1:.1f} s; rc {rc}{': ' + err.strip()[-300:] if rc else ''})")
    if not ok:
        finish()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hf_dir)
    results = harness_results(out_dir)
    summaries = {}
    for task in TASKS:
        samples = harness_samples(out_dir, task)
        summaries[task] = compare_task(task, samples, ours[task], our_json, results, tok)
        if task == "winogrande":
            negative_control(samples, TMP)
    test_errors(hf_dir)
    t3 = time.time()
    summaries.update(exported_model(TMP, tok))
    print(f"NOTE model pair and eval_gpt2 {t1 - t0:.1f} s, harness {t2 - t1:.1f} s, "
          f"exported S-D model {time.time() - t3:.1f} s, all {time.time() - t0:.1f} s")
    write_atomic(os.path.join(TMP, "summary.json"), json.dumps(summaries, indent=1) + "\n")
    finish()


if __name__ == "__main__":
    main()
