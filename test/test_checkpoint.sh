#!/usr/bin/env bash
# test/test_checkpoint.sh: checkpoint compatibility (build/test_checkpoint on files written by
# train_gpt2.py) and the one-line errors for bad model files given to the trainer.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_checkpoint
rm -rf "$d"; mkdir -p "$d"
printf '1 2 4*2\n' > "$d/prism.txt"
$PYTHON train_gpt2.py --model tiny --write_model "$d/uniform.bin" > /dev/null &&
$PYTHON train_gpt2.py --model tiny --prism "$d/prism.txt" --write_model "$d/prism.bin" > /dev/null &&
$PYTHON train_gpt2.py --model "$d/uniform.bin" --write_model "$d/uniform_bf16.bin" --write_dtype bf16 > /dev/null
check "train_gpt2.py wrote the fp32, Prism and bf16 files" test -f "$d/uniform_bf16.bin"
run_sub ./build/test_checkpoint "$d/uniform.bin" "$d/prism.bin" "$d/uniform_bf16.bin" "$d"

TS=dev/data/tinyshakespeare
RUN=(./train_gpt2 -i "$TS/tiny_shakespeare_train.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1 -s 0)
head -c 100 "$d/uniform.bin" > "$d/short_header.bin"
head -c 50000 "$d/uniform.bin" > "$d/truncated.bin"
cp "$d/uniform.bin" "$d/bad_magic.bin"; printf '\x01\x02\x03\x04' | dd of="$d/bad_magic.bin" conv=notrunc 2>/dev/null
cp "$d/uniform.bin" "$d/bad_version.bin"; printf '\x04\x00\x00\x00' | dd of="$d/bad_version.bin" bs=1 seek=4 conv=notrunc 2>/dev/null
cp "$d/uniform.bin" "$d/v5_header_fp32_body.bin"; printf '\x05\x00\x00\x00' | dd of="$d/v5_header_fp32_body.bin" bs=1 seek=4 conv=notrunc 2>/dev/null
cp "$d/prism.bin" "$d/bad_table.bin"; printf '\x07\x00\x00\x00' | dd of="$d/bad_table.bin" bs=1 seek=$((4 * 18)) conv=notrunc 2>/dev/null
# header[9] = 0x21: no LayerNorm (1) and a bit no option of the registry owns (32)
cp "$d/prism.bin" "$d/bad_flags.bin"; printf '\x21\x00\x00\x00' | dd of="$d/bad_flags.bin" bs=1 seek=$((4 * 9)) conv=notrunc 2>/dev/null
expect_error "missing checkpoint" "nonexistent.bin.*cannot open" "${RUN[@]}" -e "$d/nonexistent.bin"
expect_error "file shorter than the header" "short_header.bin.*shorter than the 1024-byte header" "${RUN[@]}" -e "$d/short_header.bin"
expect_error "truncated checkpoint" "truncated.bin.*truncated" "${RUN[@]}" -e "$d/truncated.bin"
expect_error "wrong magic" "bad_magic.bin: bad magic .* header\[0\]" "${RUN[@]}" -e "$d/bad_magic.bin"
expect_error "unsupported version" "bad_version.bin: unsupported version 4 in header\[1\]" "${RUN[@]}" -e "$d/bad_version.bin"
expect_error "bf16 header on an fp32 body" "v5_header_fp32_body.bin.*bf16" "${RUN[@]}" -e "$d/v5_header_fp32_body.bin"
expect_error "unknown attention kind in a table" "bad_table.bin: header\[16..18\] layer 0: heads 1, head size 64, kind 7: expected 1..4096 heads of size 1..4096, at most 65536 wide, and a kind in 0..3" "${RUN[@]}" -e "$d/bad_table.bin"
expect_error "header[9] with a bit no kind option owns: one line listing the known bits" "bad_flags.bin: header\[9\] flags 0x21: unknown bits \(known: 1 no LayerNorm, 2 -sd_scalar_d 1, 4 -sd_sign 1, 8 -lin_prescale 1\)$" "${RUN[@]}" -e "$d/bad_flags.bin"

# Every shape field of the header is bounded (llmc/config.h) before any size is computed from it:
# one past its bound is an error naming the field, at its bound the size check names the file.
# header FILE FROM INDEX=VALUE...: a header-only (1024-byte) copy of FROM's header, fields replaced
header() {
  "$PYTHON" - "$@" <<'PY'
import struct, sys
out, src = sys.argv[1], sys.argv[2]
h = list(struct.unpack("<256i", open(src, "rb").read(1024)))
for kv in sys.argv[3:]:
    i, v = kv.split("=")
    h[int(i)] = int(v)
open(out, "wb").write(struct.pack("<256i", *h))
PY
}
for f in "2 max_seq_len 1048576" "3 vocab_size 16777216" "5 num_heads 4096" "6 channels 65536" "7 padded_vocab_size 16777216"; do
  set -- $f
  extra=""
  [ "$1" = 3 ] && extra="7=16777216"          # V at its bound needs Vp >= V
  [ "$1" = 5 ] && extra="6=65536"             # 4096 heads must divide C
  [ "$1" = 6 ] && extra="5=16"                # heads of 4096 at most
  header "$d/at_$2.bin" "$d/uniform.bin" "$1=$3" $extra
  header "$d/past_$2.bin" "$d/uniform.bin" "$1=$(($3 + 1))" $extra
  expect_error "header[$1] $2 at its bound $3: the size check, no overflow" "at_$2.bin: file is 1024 bytes; the header describes [0-9]+ fp32 parameters" "${RUN[@]}" -e "$d/at_$2.bin"
  expect_error "header[$1] $2 one past its bound" "past_$2.bin: header\[$1\] $2 = $(($3 + 1)): expected 1..$3" "${RUN[@]}" -e "$d/past_$2.bin"
done
header "$d/past_layers.bin" "$d/uniform.bin" "4=81"
expect_error "header[4] num_layers one past its bound" "past_layers.bin: header\[4\] num_layers = 81: expected 1..80" "${RUN[@]}" -e "$d/past_layers.bin"
# sizes whose products wrapped around 64 bits to exactly a header-only file (C 2^30, Vp 2^31 - 1,
# maxT 2^31 - 14): every program that reads checkpoints names the first field out of bounds
header "$d/wrap.bin" "$d/uniform.bin" "2=2147483634" "6=1073741824" "7=2147483647" "5=1"
for prog in "./train_gpt2 -i $TS/tiny_shakespeare_train.bin -j $TS/tiny_shakespeare_val.bin -x 1 -e" \
            "./sd_surgery -op linearize -k 1 -o $d/wrap_out.bin -e" "./sd_spectrum" "./eval_gpt2 -tasks lambada -e" \
            "./attn_distance -j $TS/tiny_shakespeare_val.bin -e"; do
  expect_error "${prog%% *}: a header whose sizes wrap around 64 bits" "wrap.bin: header\[2\] max_seq_len = 2147483634: expected 1..1048576" $prog "$d/wrap.bin"
done
check "sd_surgery wrote nothing for it" test ! -e "$d/wrap_out.bin"
# a layer table entry whose heads x head size overflow an int
header "$d/wide_layer.bin" "$d/prism.bin" "17=1000000000"
expect_error "a table layer 1e9 wide" "wide_layer.bin: header\[16..18\] layer 0: heads 1, head size 1000000000, kind 0: expected 1..4096 heads" "${RUN[@]}" -e "$d/wide_layer.bin"
printf '4x1000000000*4\n' > "$d/wide.txt"
expect_error "a layer table entry 4 x 1e9 wide" "wide.txt:1: entry '4x1000000000\*4': 4 heads x 1000000000: expected at most 4096 heads" "${RUN[@]}" -e tiny -prism "$d/wide.txt"
printf '4096x16*4\n' > "$d/widest.txt"
check "a layer table entry at the width bound (4096 heads x 16) trains" "${RUN[@]}" -e tiny -prism "$d/widest.txt"
# a directory or a special file where a file is read is named as such, not "truncated"
mkdir -p "$d/a_dir.bin" "$d/a_dir.txt"
mkfifo "$d/a_fifo.bin" 2>/dev/null
expect_error "a directory as the checkpoint" "a_dir.bin: is a directory; expected a file" "${RUN[@]}" -e "$d/a_dir.bin"
expect_error "a FIFO as the checkpoint" "a_fifo.bin: is not a regular file" "${RUN[@]}" -e "$d/a_fifo.bin"
expect_error "a directory as the train shard" "a_dir.bin: is a directory; expected a file" ./train_gpt2 -e tiny -i "$d/a_dir.bin" -j "$TS/tiny_shakespeare_val.bin" -b 1 -t 16 -x 1
expect_error "a directory as the layer table" "a_dir.txt: is a directory; expected a file" "${RUN[@]}" -e tiny -prism "$d/a_dir.txt"
expect_error "a directory given to sd_spectrum" "a_dir.bin: is a directory; expected a file" ./sd_spectrum "$d/a_dir.bin"
expect_error "a directory as an eval file" "a_dir.bin: is a directory; expected a file" ./eval_gpt2 -e "$d/uniform.bin" -tasks "$d/a_dir.bin"
expect_error "a descriptor one past the channel bound" "-e L2C65544H8: channels C 65544 out of range \[1, 65536\]" "${RUN[@]}" -e L2C65544H8
expect_error "-prism with a checkpoint" "carries its own layer table" "${RUN[@]}" -e "$d/uniform.bin" -prism "$d/prism.txt"

# The input scale (-emb_scale, header[10] as float32 bits; doc/formats.md "Per-layer heads"): written by the
# trainer into a table-version file, read back by every program, and bad values refused.
"${RUN[@]}" -e tiny -ln 0 -emb_scale 35.36 -n 1 -o "$d/emb" > "$d/emb.log" 2>&1
check "-emb_scale 35.36: the trainer states the scale" grep -q "no per-block LayerNorm, input x 35.36" "$d/emb.log"
emb_h=$("$PYTHON" -c "import struct,sys; h=struct.unpack('<256i', open(sys.argv[1],'rb').read(1024)); print(h[1], struct.unpack('<f', struct.pack('<i', h[10]))[0] == struct.unpack('<f', struct.pack('<f', 35.36))[0])" "$d/emb/model_00000001.bin")
check "-emb_scale 35.36: version 103, header[10] the float32 35.36 ($emb_h)" test "$emb_h" = "103 True"
# the tools read it: the same weights with header[10] cleared give other attention distances, and
# sd_surgery's output keeps the scale
header "$d/emb_cleared_h.bin" "$d/emb/model_00000001.bin" "10=0"
{ cat "$d/emb_cleared_h.bin"; tail -c +1025 "$d/emb/model_00000001.bin"; } > "$d/emb_cleared.bin"
AD=(./attn_distance -j "$TS/tiny_shakespeare_val.bin" -t 16 -e)
"${AD[@]}" "$d/emb/model_00000001.bin" 2>&1 | grep -E '^ +[0-9]' > "$d/emb.ad"
"${AD[@]}" "$d/emb_cleared.bin" 2>&1 | grep -E '^ +[0-9]' > "$d/emb_cleared.ad"
check "attn_distance applies the scale (rows differ from the same weights at F = 1)" sh -c "test -s $d/emb.ad && ! cmp -s $d/emb.ad $d/emb_cleared.ad"
./sd_surgery -e "$d/emb/model_00000001.bin" -o "$d/emb_lin.bin" -op linearize -k 1 > /dev/null 2>&1
emb_lin=$("$PYTHON" -c "import struct,sys; h=struct.unpack('<256i', open(sys.argv[1],'rb').read(1024)); h2=struct.unpack('<256i', open(sys.argv[2],'rb').read(1024)); print(h[10] == h2[10] != 0)" "$d/emb_lin.bin" "$d/emb/model_00000001.bin")
check "sd_surgery's output keeps header[10]" test "$emb_lin" = "True"
"${RUN[@]}" -e tiny -n 1 -o "$d/emb1" -emb_scale 1 > /dev/null 2>&1
emb1_h=$("$PYTHON" -c "import struct,sys; h=struct.unpack('<256i', open(sys.argv[1],'rb').read(1024)); print(h[1], h[10])" "$d/emb1/model_00000001.bin")
check "-emb_scale 1 is GPT-2: version 3, header[10] 0 ($emb1_h)" test "$emb1_h" = "3 0"
for bad in "nan 2143289344 nan" "negative -1082130432 -1" "past 1184645120 20000"; do
  set -- $bad
  header "$d/emb_$1.bin" "$d/prism.bin" "10=$2"
  expect_error "header[10] emb_scale $3" "emb_$1.bin: header\[10\] emb_scale = $3 \(bits 0x[0-9a-f]+\): expected a float in \(0, 10000\], or 0 bits for 1" "${RUN[@]}" -e "$d/emb_$1.bin"
done
expect_error "-emb_scale 0" "-emb_scale" "${RUN[@]}" -e tiny -emb_scale 0
expect_error "-emb_scale with a checkpoint" "-emb_scale: the checkpoint .* carries its own model options" "${RUN[@]}" -e "$d/uniform.bin" -emb_scale 2
finish
