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
expect_error "missing checkpoint" "nonexistent.bin.*cannot open" "${RUN[@]}" -e "$d/nonexistent.bin"
expect_error "file shorter than the header" "short_header.bin.*shorter than the 1024-byte header" "${RUN[@]}" -e "$d/short_header.bin"
expect_error "truncated checkpoint" "truncated.bin.*truncated" "${RUN[@]}" -e "$d/truncated.bin"
expect_error "wrong magic" "bad_magic.bin: bad magic .* header\[0\]" "${RUN[@]}" -e "$d/bad_magic.bin"
expect_error "unsupported version" "bad_version.bin: unsupported version 4 in header\[1\]" "${RUN[@]}" -e "$d/bad_version.bin"
expect_error "bf16 header on an fp32 body" "v5_header_fp32_body.bin.*bf16" "${RUN[@]}" -e "$d/v5_header_fp32_body.bin"
expect_error "unknown attention kind in a table" "bad_table.bin: header\[16..18\] layer 0: heads 1, head size 64, kind 7: expected positive sizes and a kind in 0..3" "${RUN[@]}" -e "$d/bad_table.bin"
expect_error "-prism with a checkpoint" "carries its own layer table" "${RUN[@]}" -e "$d/uniform.bin" -prism "$d/prism.txt"
finish
