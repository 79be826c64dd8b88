#!/usr/bin/env bash
# test/test_cli.sh: the trainer's command line. Every bad flag, value, flag combination, schedule
# or data file gives one error line naming the flag/file (and line) and a non-zero exit; --help is
# generated from the parser's table; GPU-only flags are named in a warning.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
d=build/tmp_cli
rm -rf "$d"; mkdir -p "$d"
TS=dev/data/tinyshakespeare
DATA=(-i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin")
RUN=(./train_gpt2 -e tiny "${DATA[@]}" -b 1 -t 16 -x 1 -s 0 -v 0 -m 1)

# --help: exit 0, every parsed flag listed with its default
help=$(./train_gpt2 --help); rc=$?
check "--help exits 0" test $rc -eq 0
missing=""
for f in -i -j -e -o -layers -prism -sd_scalar_d -sd_sign -sd_init_s -sd_init_theta -sd_init_u -lin_prescale -sd_decay_s -seed -n -nk -nm -y -b -t -d -x -k -l -u -q -c -sl -sg -v -m -s -g -h -tok -a -lg -f -w -ge -z -r -pn -pr -pg -pi -ps -pf; do
  printf '%s\n' "$help" | grep -Eq "^  $f +.*\(default " || missing="$missing $f"
done
check "--help lists every flag with its default (missing:$missing)" test -z "$missing"
# doc/formats.md "The trainer command line": its tables' first column names exactly --help's flags
help_flags=$(printf '%s\n' "$help" | grep -oE '^  -[a-z_0-9]+' | tr -d ' ' | sort -u)
doc_flags() { awk '/^## 10 The trainer command line/,/^## 11 /' "$1" | grep -E '^\| ' | cut -d'|' -f2 |
  grep -oE '`-[a-z_0-9]+[ `]' | tr -d '` ' | sort -u; }
table_diff=$(diff <(printf '%s\n' "$help_flags") <(doc_flags doc/formats.md) | grep '^[<>]' | tr '\n' ' ')
check "every --help flag is in doc/formats.md's flag tables and the other way round ($(wc -l <<<"$help_flags") flags; diff: $table_diff)" \
  test -z "$table_diff" -a "$(wc -l <<<"$help_flags")" -ge 50
sed '/^| `-rows 1`/d' doc/formats.md > "$d/formats_ctl.md"
ctl=$(diff <(printf '%s\n' "$help_flags") <(doc_flags "$d/formats_ctl.md") | grep '^[<>]' | tr '\n' ' ')
check "control: a flag table without -rows's row is found out ($ctl)" test "$ctl" = "< -rows "
check "--help shows the CPU default init gpt2_124M.bin" grep -q "default gpt2_124M.bin" <<<"$help"
check "--help shows -tok's default gpt2_tokenizer.bin" grep -Eq "^  -tok +.*\(default gpt2_tokenizer.bin\)" <<<"$help"

# flags and values
expect_error "unknown flag" "^error: -zz: unknown flag \(see .*--help\)" "${RUN[@]}" -zz 1
expect_error "flag without a value" "^error: -b: expected a value after the flag" "${RUN[@]}" -b
expect_error "non-integer value" "^error: -b 'abc': expected an integer" "${RUN[@]}" -b abc
expect_error "integer with trailing junk" "^error: -x '10k': expected an integer" "${RUN[@]}" -x 10k
expect_error "zero batch" "^error: -b '0': expected an integer in \[1," "${RUN[@]}" -b 0
expect_error "negative -data_seed" "^error: -data_seed '-1': expected an integer in \[0, 2147483647\]" "${RUN[@]}" -data_seed -1
expect_error "-m 0 (no val batch: a NaN loss)" "^error: -m 0: expected -1 \(the whole val data\) or a positive number" "${RUN[@]}" -m 0
expect_error "negative learning rate" "^error: -l '-1': expected a number in \[0," "${RUN[@]}" -l -1
expect_error "final fraction above 1" "^error: -q '1.5'" "${RUN[@]}" -q 1.5
expect_error "unknown schedule name" "^error: -k 'foo': expected one of \{cosine\|linear\|constant\|wsd\}" "${RUN[@]}" -k foo
expect_error "ZeRO stage 4 does not exist (2 and 3 run stage 0, as llm.c)" "^error: -z '4': expected an integer in \[0, 3\]" "${RUN[@]}" -z 4
expect_error "T above the model's maxT" "^error: -t 100 exceeds the model's maxT = 64" "${RUN[@]}" -t 100
expect_error "total batch not a multiple of B*T" "^error: -d 100 is not a multiple of B\*T\*processes = 16" "${RUN[@]}" -d 100
expect_error "-y 1 without -o" "^error: -y 1 resumes from -o" "${RUN[@]}" -y 1
expect_error "-n without -o" "^error: -n 5 writes checkpoints to -o" "${RUN[@]}" -n 5
expect_error "-nk without -n" "^error: -nk 2 needs checkpoints" "${RUN[@]}" -nk 2
expect_error "-k constant with warmup" "^error: -k constant ignores warmup" "${RUN[@]}" -k constant -u 10
expect_error "-prism_unchecked is retired: an unknown flag" "^error: -prism_unchecked: unknown flag" "${RUN[@]}" -prism_unchecked 1
expect_error "unknown descriptor" "^error: -e: descriptor 'd13': depth 13" "${RUN[@]}" -e d13
expect_error "malformed custom descriptor" "^error: -e: descriptor 'L4C64': expected L<layers>C<channels>H<heads>" "${RUN[@]}" -e L4C64
expect_error "gpt3:c5140 fails its divisibility check" "^error: -e: descriptor 'gpt3:c5140': C 5140 is not a multiple of head size 128" "${RUN[@]}" -e gpt3:c5140

# schedules: file:line in the message
printf '# comment\n1 2\n3 4\n' > "$d/nondivisor.txt"
printf '1 2 4\n' > "$d/short.txt"
printf '4 2 1 1\n' > "$d/decreasing.txt"
printf '1 2 4 4q\n' > "$d/syntax.txt"
printf '1 1 2 4\n' > "$d/warn.txt"
expect_error "schedule file missing" "^error: $d/none.txt: cannot read the layer table" "${RUN[@]}" -prism "$d/none.txt"
expect_error "-layers file missing" "^error: $d/none.txt: cannot read the layer table" "${RUN[@]}" -layers "$d/none.txt"
expect_error "-layers: a bad entry names file:line" "^error: $d/syntax.txt:1: bad entry '4q'" "${RUN[@]}" -layers "$d/syntax.txt"
expect_error "schedule: head count not dividing C" "^error: $d/nondivisor.txt:3: 3 heads do not divide C = 64" "${RUN[@]}" -prism "$d/nondivisor.txt"
expect_error "schedule: too few layers" "^error: $d/short.txt:1: the table covers 3 layers; the model has 4" "${RUN[@]}" -prism "$d/short.txt"
expect_error "schedule: decreasing, under -prism: one error naming -layers" "^error: $d/decreasing.txt:1: layer 1 has 2 heads after 4 .*runs with -layers FILE\)$" "${RUN[@]}" -prism "$d/decreasing.txt"
expect_error "schedule: bad entry" "^error: $d/syntax.txt:1: bad entry '4q'" "${RUN[@]}" -prism "$d/syntax.txt"
out=$("${RUN[@]}" -layers "$d/decreasing.txt" 2>&1); rc=$?
check "-layers runs a decreasing table (a negative control of Prism), with no Prism warning" \
  bash -c "[ $rc -eq 0 ] && ! grep -q '^warning: $d/decreasing.txt' <<<\"\$0\"" "$out"
# a run folder written before -layers: its flags.txt says -prism FILE -prism_unchecked 1
mkdir "$d/old"
printf -- '-e tiny\n-i %s\n-j %s\n-b 1\n-t 16\n-x 1\n-s 0\n-v 0\n-m 1\n-prism %s\n-prism_unchecked 1\n' \
  "$TS/tiny_shakespeare_train.bin" "$TS/tiny_shakespeare_val.bin" "$d/decreasing.txt" > "$d/old/flags.txt"
expect_error "-y 1 on a flags.txt with the retired -prism_unchecked: one error naming the line and -layers" \
  "^error: $d/old/flags.txt:11: -prism_unchecked: not a flag of this trainer \(a table without Prism's rules is -layers FILE\)" \
  ./train_gpt2 -o "$d/old" -y 1
expect_error "-decay_frac outside [0, 1]: one line naming the flag" "^error: -decay_frac '1.5': expected a number in \\[0, 1\\]" \
  "${RUN[@]}" -k wsd -decay_frac 1.5
expect_error "-layers with -prism: one error" "^error: -layers and -prism both give a layer table" \
  "${RUN[@]}" -layers "$d/warn.txt" -prism "$d/warn.txt"
out=$("${RUN[@]}" -prism "$d/warn.txt" 2>&1); rc=$?
check "schedule warnings name file:line and the run proceeds" \
  bash -c "[ $rc -eq 0 ] && grep -q 'warning: $d/warn.txt:1: a run of 1 layer with 2 heads' <<<\"\$0\"" "$out"
check "the start-up table shows the per-layer heads" bash -c "grep -q 'layers  0-1 :   1 heads x  64' <<<\"\$0\"" "$out"

# data files
head -c 2000 "$TS/tiny_shakespeare_val.bin" > "$d/truncated_val.bin"
cp "$TS/tiny_shakespeare_val.bin" "$d/badmagic_val.bin"; printf '\x00\x00\x00\x00' | dd of="$d/badmagic_val.bin" conv=notrunc 2>/dev/null
printf '\xa1\xd9\x34\x01\x07\x00\x00\x00' > "$d/llama3.bin"; head -c 2000 /dev/zero >> "$d/llama3.bin"
expect_error "no shard matches" "^error: $d/nothing_\*.bin: no file matches this shard pattern, relative to the working directory $PWD \(make data" ./train_gpt2 -e tiny -i "$d/nothing_*.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1
expect_error "no shard matches an absolute pattern" "^error: $PWD/$d/nothing_\*.bin: no file matches this shard pattern \(make data" ./train_gpt2 -e tiny -i "$PWD/$d/nothing_*.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1
expect_error "truncated shard" "^error: $d/truncated_val.bin: header\[2\] says 32768 tokens.*truncated" ./train_gpt2 -e tiny "${DATA[@]:0:2}" -j "$d/truncated_val.bin" -b 1 -t 16 -x 1
expect_error "shard with a wrong magic" "^error: $d/badmagic_val.bin: bad magic 0 in header\[0\]" ./train_gpt2 -e tiny "${DATA[@]:0:2}" -j "$d/badmagic_val.bin" -b 1 -t 16 -x 1
expect_error "a Llama-3 shard" "^error: $d/llama3.bin: header\[0\] = 20240801 is a Llama-3 shard" ./train_gpt2 -e tiny -i "$d/llama3.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1
${PYTHON:-/usr/bin/python3} -c "from dev.data import data_common as dc; dc.write_datafile('$d/oov.bin', [60000] * 100)"
expect_error "a token outside the vocabulary" "^error: $d/oov.bin: token 60000 at position [0-9]+ is outside the vocabulary \[0, 50257\)" ./train_gpt2 -e tiny -i "$d/oov.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1 -s 0
expect_error "shard smaller than one window" "tiny_shakespeare_val.bin: 32768 tokens, fewer than one window" ./train_gpt2 -e L1C64H1T4096 "${DATA[@]}" -b 16 -t 4096 -x 1
expect_error "-rows 1: a train shard with fewer than B rows of T + 1 tokens" "tiny_shakespeare_train.bin: 305260 tokens, fewer than one window of nproc\*B\*T \+ 1 = 327681" \
  ./train_gpt2 -e L1C64H1T64 "${DATA[@]}" -b 5120 -t 64 -x 1 -rows 1
expect_error "-rows 2" "^error: -rows '2': expected" ./train_gpt2 -e L1C64H1T64 "${DATA[@]}" -rows 2

# S-D / linear / -ln model options
expect_error "-sd_sign 0" "^error: -sd_sign 0: expected -1 or \+1" "${RUN[@]}" -sd_sign 0
expect_error "-ln 2" "^error: -ln '2': expected an integer in \[0, 1\]" "${RUN[@]}" -ln 2
./train_gpt2 -e tiny "${DATA[@]}" -b 1 -t 16 -x 1 -s 0 -v 0 -m 1 -n 1 -o "$d/ckpt" > /dev/null 2>&1
expect_error "-ln with a checkpoint" "^error: -ln: the checkpoint $d/ckpt/model_00000001.bin carries its own model options" \
  "${RUN[@]}" -e "$d/ckpt/model_00000001.bin" -ln 0
printf '4:sd 4:sdlin 4:lin 4\n' > "$d/kinds.txt"
out=$("${RUN[@]}" -prism "$d/kinds.txt" -ln 0 -sd_scalar_d 1 -lin_prescale 1 2>&1); rc=$?
check "a table of every kind trains with -ln 0 -sd_scalar_d 1 -lin_prescale 1" \
  bash -c "[ $rc -eq 0 ] && grep -q 'no per-block LayerNorm, S-D logits u (S - D) u\^T with scalar D, linear q/k prescaled' <<<\"\$0\" && grep -q 'layer   1   :   4 heads x  16 (sdlin)' <<<\"\$0\"" "$out"

# GPU-only flags are accepted with a warning naming them
out=$("${RUN[@]}" -z 1 -ge 2 2>&1); rc=$?
check "GPU flags: run proceeds and -z is named in a warning" bash -c "[ $rc -eq 0 ] && grep -q 'warning: -z is a GPU trainer flag' <<<\"\$0\"" "$out"
finish
