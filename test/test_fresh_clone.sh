#!/usr/bin/env bash
# test/test_fresh_clone.sh: the experiment drivers run from one command on a fresh clone.
# A copy of the tracked files (as they are in the working tree, nothing built, no data) beside a
# link to ../shared, then:
#   - sd_claims.py --dry-run prints the one make command that builds its programs and shards, and
#     --build 0 instead names each missing input in one line;
#   - sd_claims.py (tiny, TinyShakespeare, 2 steps, seed 1) builds train_gpt2, sd_spectrum,
#     sd_surgery and the shards with that make, then runs and writes claims.md;
#   - ab.py (tiny, uniform vs Prism, 2 steps, seeds 1 and 2, no evals or attention distance) then runs
#     with nothing left to build and writes summary.md;
#   - a make that fails stops a driver with one line naming it.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
root=$(pwd)/build/tmp_fresh_clone
rm -rf "$root"
mkdir -p "$root/repo"
if [ ! -d ../shared/data ]; then
  fail "../shared/data is missing next to this checkout (the offline data the drivers prepare)"
  finish
  exit 1
fi
ln -s "$(cd ../shared && pwd)" "$root/shared"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$root/repo"
cd "$root/repo"
# the drivers' make is the user's own, not a sub-make of `make test`
unset MAKEFLAGS MFLAGS MAKELEVEL
check "the copy holds no program and no shard" \
  bash -c "[ ! -e train_gpt2 ] && [ ! -e sd_spectrum ] && [ ! -d dev/data/tinyshakespeare ]"

dry=$("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --dry-run 2>"$root/dry.err")
check "sd_claims --dry-run: the first line is the make that builds what is missing" \
  test "$(head -n 1 <<< "$dry")" = "make -j2 train_gpt2 sd_spectrum sd_surgery gpt2_tokenizer.bin data"
check "... and no missing-input warning for what that make builds" test ! -s "$root/dry.err"
err=$("$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --build 0 2>&1 >/dev/null)
check "sd_claims --build 0: one error line per missing input (3 programs, the tokenizer file of the floors, 2 shard sets), nothing built" \
  bash -c "[ \"\$(grep -c '^error: ' <<< \"\$1\")\" = 6 ] && grep -q '^error: ./train_gpt2: not built (make train_gpt2)$' <<< \"\$1\" && [ ! -e train_gpt2 ]" _ "$err"

MAKE=false "$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 > "$root/false.out" 2> "$root/false.err"
rc=$?
check "a make that fails: exit 1, one error line naming it (exit $rc)" \
  bash -c "[ $rc = 1 ] && [ \"\$(wc -l < '$root/false.err')\" = 1 ] && grep -q '^error: false -j2 train_gpt2 sd_spectrum sd_surgery gpt2_tokenizer.bin data failed (exit 1)' '$root/false.err'"

"$PYTHON" sd_attention/sd_claims.py --sizes tiny --data shakespeare --steps 2 --seeds 1 > "$root/sd.out" 2>&1
rc=$?
check "sd_claims from the fresh copy: builds, runs, exit 0 (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q '^building: make -j2 train_gpt2 sd_spectrum sd_surgery gpt2_tokenizer.bin data$' '$root/sd.out' && [ -s out/sd_claims/claims.md ]"
[ "$rc" = 0 ] || tail -n 5 "$root/sd.out"
check "... the programs and the shards it built are there" \
  bash -c "[ -x train_gpt2 ] && [ -x sd_spectrum ] && [ -x sd_surgery ] && [ -s dev/data/tinyshakespeare/tiny_shakespeare_val.bin ]"

"$PYTHON" scripts/ab.py --size tiny --data shakespeare --steps 2 --seeds 1,2 --evals 0 --attn 0 > "$root/ab.out" 2>&1
rc=$?
check "ab.py from the same copy: nothing left to build, runs, exit 0 (exit $rc)" \
  bash -c "[ $rc = 0 ] && ! grep -q '^building:' '$root/ab.out' && [ -s out/ab_tiny/summary.md ]"
[ "$rc" = 0 ] || tail -n 5 "$root/ab.out"
finish
