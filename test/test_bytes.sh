#!/usr/bin/env bash
# test/test_bytes.sh: byte-level models (V 256, descriptor ...V256) end to end on the CPU, on byte
# shards made here from the first 24 KB of TinyShakespeare (not the prose corpus):
#   - build/test_vocab: descriptor V parsing and its one-line errors, a V 256 checkpoint header,
#     the evals' vocabulary check, tokenizer_init_for_model;
#   - bad V on the trainer's command line: one error line;
#   - an L2C64H2T64V256 model against train_gpt2.py: build/test_gpt2_cpu checks init, logits, loss,
#     every gradient and the AdamW trajectory (its tolerances), and ./train_gpt2 -a 1 trains 5 steps
#     on the same checkpoint and batch with losses equal to the PyTorch trajectory's (5e-6
#     relative, test_gpt2_cpu's tolerance);
#   - samples: -tok bytes_tokenizer.bin prints the sampled bytes; a tokenizer of another size
#     gives one warning naming both sizes and prints the same sample as token ids;
#   - a token >= 256 in a shard is refused for a V 256 model;
#   - eval_gpt2 and the trainer's -h 1 refuse the V 256 model in one line naming it.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_bytes
rm -rf "$d"; mkdir -p "$d"
DESC=L2C64H2T64V256

for b in ./train_gpt2 ./eval_gpt2 build/test_vocab build/test_gpt2_cpu; do
  [ -x "$b" ] || { fail "$b is not built (make train_gpt2 eval_gpt2 build/test_vocab build/test_gpt2_cpu)"; finish; exit 1; }
done

run_sub build/test_vocab "$d"

expect_error "-e ${DESC%256}1: V below 2" "^error: -e: descriptor 'L2C64H2T64V1': V<vocab> expects an integer in \[2, 16777216\]" \
  ./train_gpt2 -e L2C64H2T64V1 -x 1
expect_error "-e L2C64H2T64V: V without a number" "^error: -e: descriptor 'L2C64H2T64V': V<vocab> expects" ./train_gpt2 -e L2C64H2T64V -x 1
expect_error "-e L2C64: the expected format names [V<vocab>]" "^error: -e: descriptor 'L2C64': expected L<layers>C<channels>H<heads>\[T<maxT>\]\[V<vocab>\]" \
  ./train_gpt2 -e L2C64 -x 1

# byte shards and tokenizers: train = the first 20 KB, val = the next 4 KB, documents at blank lines
if ! $PYTHON - "$d" > "$d/shards.log" 2>&1 <<'EOF'
import os, sys
import numpy as np
from dev.data import bytes_tokenizer, data_common
d = sys.argv[1]
text = open(os.path.join(data_common.shared_data_dir(), "tinyshakespeare", "input.txt"), "rb").read()[:24000]
for name, part in (("train", text[:20000]), ("val", text[20000:])):
    docs = [p for p in part.split(b"\n\n") if p]
    data_common.write_datafile(os.path.join(d, f"bytes_{name}.bin"), bytes_tokenizer.encode_documents(docs, name))
data_common.write_datafile(os.path.join(d, "oov.bin"), np.array([0] + [300] * 200))
bytes_tokenizer.write_tokenizer(os.path.join(d, "bytes_tokenizer.bin"))
print("ok")
EOF
then
  fail "could not write the byte shards: $(tail -1 "$d/shards.log")"; finish; exit 1
fi
TR=$d/bytes_train.bin
VA=$d/bytes_val.bin

# the C model against PyTorch on the first 4 x 64 + 1 val bytes, 6 AdamW steps (lr 1e-3, wd 0.1)
if $PYTHON train_gpt2.py --model $DESC --write_model "$d/m.bin" --debug_state "$d/state.bin" --data "$VA" \
     --B 4 --T 64 --steps 6 > "$d/py.log" 2>&1; then
  pass "train_gpt2.py writes a $DESC checkpoint and debug state"
else
  fail "train_gpt2.py --model $DESC: $(tail -1 "$d/py.log")"
fi
run_sub build/test_gpt2_cpu "$d/m.bin" "$d/state.bin" -init $DESC

# the trainer on the same checkpoint and batch: -a 1 repeats the first val batch every step
./train_gpt2 -e "$d/m.bin" -i "$VA" -j "$VA" -tok "$d/bytes_tokenizer.bin" -a 1 -b 4 -t 64 -x 5 -l 1e-3 -c 0.1 -v 5 -m 1 -s 0 \
  > "$d/train.log" 2>&1
py=$(awk '/^step [0-9]+: loss/ {print $4}' "$d/py.log" | head -5 | tr '\n' ' ')
c=$(grep -E '^step +[0-9]+/5 ' "$d/train.log" | awk '{print $5}' | tr '\n' ' ')
worst=$(paste <(tr ' ' '\n' <<<"$py" | sed '/^$/d') <(tr ' ' '\n' <<<"$c" | sed '/^$/d') |
  awk '{ n++; r = ($1 - $2) / $1; if (r < 0) r = -r; if (r > w) w = r } END { if (n != 5) print "n" n; else printf "%.1e", w }')
check "./train_gpt2 on $DESC: 5 step losses = PyTorch's trajectory within 5e-6 relative (C $c| torch $py| worst $worst)" \
  awk -v w="$worst" 'BEGIN { exit !(w ~ /^[0-9.e+-]+$/ && w + 0 <= 5e-6) }'
check "the run's model line reads V 256 (padded 256)" grep -q "V 256 (padded 256)" "$d/train.log"

# samples: the same draw (same weights, same sampling RNG) decoded by the byte tokenizer, and as ids
SAMPLE=(./train_gpt2 -e "$d/m.bin" -i "$TR" -j "$VA" -b 1 -t 64 -x 1 -v 0 -m 1 -s 1 -g 48)
"${SAMPLE[@]}" -tok "$d/bytes_tokenizer.bin" > "$d/s_bytes.log" 2> "$d/s_bytes.err"
"${SAMPLE[@]}" -tok "$d/t300.bin" > "$d/s_ids.log" 2> "$d/s_ids.err"
check "-tok bytes_tokenizer.bin on a V 256 model: no warning ($(head -c 200 "$d/s_bytes.err"))" test ! -s "$d/s_bytes.err"
check "-tok of 300 tokens: one warning naming both sizes ($(cat "$d/s_ids.err"))" \
  bash -c "[ \$(grep -c . '$d/s_ids.err') = 1 ] && grep -q '^warning: -tok $d/t300.bin: the tokenizer has 300 tokens but the model.s vocabulary V is 256' '$d/s_ids.err'"
cmp_out=$($PYTHON - "$d/s_ids.log" "$d/s_bytes.log" <<'EOF'
import re, sys
def sample(path):
    text = open(path, "rb").read()
    a = text.index(b"generating:\n---\n") + len(b"generating:\n---\n")
    return text[a:text.index(b"\n---\n", a)]
ids = sample(sys.argv[1]).decode()
toks = [int(t) for t in re.findall(r"<(\d+)>", ids)]
if re.sub(r"<\d+>", "", ids) or len(toks) != 47 or max(toks) > 255:
    print(f"the mismatched run's sample is not 47 ids below 256: {ids[:80]!r}"); sys.exit(1)
# tokenizer_print: a lone byte that is neither printable ASCII nor space is skipped; 0 is empty
want = bytes(t for t in toks if 0x20 <= t < 0x7F or t in (9, 10, 11, 12, 13))
got = sample(sys.argv[2])
if got != want:
    print(f"decoded {got!r} != bytes of the ids {want!r}"); sys.exit(1)
print(f"47 ids -> {len(want)} printed bytes {want[:40]!r}")
EOF
)
check "the byte tokenizer prints the sampled bytes: the same draw as the ids run, decoded ($cmp_out)" \
  test "${cmp_out#47 ids}" != "$cmp_out"
./train_gpt2 -e "$d/m.bin" -i "$TR" -j "$VA" -b 1 -t 64 -x 1 -v 0 -m 1 -s 1 -g 8 > "$d/s_default.log" 2> "$d/s_default.err"
rc=$?
check "a V 256 model with the default -tok (gpt2_tokenizer.bin): one warning, the run completes (rc $rc: $(cat "$d/s_default.err"))" \
  bash -c "[ $rc = 0 ] && [ \$(grep -c . '$d/s_default.err') = 1 ] && grep -q '^warning: ' '$d/s_default.err'"

expect_error "a shard token >= V for a V 256 model" "^error: $d/oov.bin: token 300 at position [0-9]+ is outside the vocabulary \[0, 256\)" \
  ./train_gpt2 -e "$d/m.bin" -i "$d/oov.bin" -j "$VA" -b 1 -t 16 -x 1 -s 0 -tok "$d/bytes_tokenizer.bin"

# evals: GPT-2-tokenized files, a V 256 model refused before anything is read or built
expect_error "eval_gpt2 refuses a V 256 checkpoint" \
  "^error: -e $d/m.bin: the model's vocabulary V is 256, but the eval files are GPT-2-tokenized \(V = 50257\)" \
  ./eval_gpt2 -e "$d/m.bin" -tasks hellaswag
expect_error "eval_gpt2 refuses a V 256 descriptor" \
  "^error: -e $DESC: the model's vocabulary V is 256, but the eval files are GPT-2-tokenized" ./eval_gpt2 -e $DESC -tasks all
expect_error "the trainer's -h 1 refuses a V 256 model" \
  "^error: -h 1: -e $d/m.bin: the model's vocabulary V is 256, but the eval files are GPT-2-tokenized" \
  ./train_gpt2 -e "$d/m.bin" -i "$TR" -j "$VA" -b 4 -t 64 -x 1 -s 0 -h 1
finish
