#!/usr/bin/env bash
# test/test_search.sh: prism/search.py, successive halving over layer tables (doc/prism.md
# "Searching for a table"), on the tiny preset with 8 steps of B 2 x T 32 on TinyShakespeare:
#   - the candidates: every non-decreasing head-count sequence at H 2 with mha or lin in layer 0,
#     uniform, and a table that does not parse (recorded with its error and dropped);
#   - the halving: rung 1 (4 steps) trains all, rung 2 (8 steps) the best half plus uniform, each
#     resumed from its rung-1 checkpoint with -k wsd, the decay only in the last rung;
#   - a search stopped after 5 trainings continues from its record to the same record and finalists,
#     two trainings at a time (--jobs 2);
#   - the finalists against uniform by scripts/ab.py (2 seeds), and the one-line errors;
#   - a GPU size (124M) planned by --dry-run: the launcher's commands, nothing written.
set -u
cd "$(dirname "$0")/.."
. test/lib.sh
PYTHON=${PYTHON:-/usr/bin/python3}
d=build/tmp_search
rm -rf "$d"
mkdir -p "$d"
printf '4q 2\n' > "$d/bad.txt"
S=(--size tiny --data shakespeare --steps 8 --rungs 2 --micro-batch 2 --seq-len 32 --val-batches 2
   --kinds mha,lin --kind-layers 1 --extra "bad=$d/bad.txt" --threads 1)

"$PYTHON" prism/search.py "${S[@]}" --finalists 1 --seeds 1,2 --out "$d/A" > "$d/A.log" 2>&1; rc=$?
check "a search of 11 candidates runs to its finals (exit $rc)" test $rc -eq 0 -a -f "$d/A/search.md" -a -f "$d/A/finals/summary.md"
[ $rc -eq 0 ] || tail -5 "$d/A.log"
# the record: (name, rung, status, val) per line
rec() { "$PYTHON" -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in sorted(rows, key=lambda r: (r['rung'], r['name'])):
    print(r['name'], r['rung'], r['status'], r.get('val', ''))" "$1"; }
recA=$(rec "$d/A/search.jsonl")
check "rung 1: 11 records, the unparsable table among them as failed, the other 10 ok" \
  test "$(grep -c ' 0 ok ' <<<"$recA")/$(grep -c '^bad 0 failed' <<<"$recA")" = "10/1"
check "rung 2: the best ceil(10/2) = 5 of rung 1 and uniform, or 5 with uniform among them" \
  bash -c "n=\$(grep -c ' 1 ok ' <<<\"\$0\"); grep -q '^uniform 1 ok' <<<\"\$0\" && [ \$n -eq 5 -o \$n -eq 6 ]" "$recA"
best=$(grep ' 0 ok ' <<<"$recA" | sort -k4,4g -k1,1 | head -n 5 | awk '{print $1}' | sort | tr '\n' ' ')
kept=$(grep ' 1 ok ' <<<"$recA" | awk '{print $1}' | grep -v '^uniform$' | sort | tr '\n' ' ')
kept_all=$(grep ' 1 ok ' <<<"$recA" | awk '{print $1}' | sort | tr '\n' ' ')
check "the candidates kept are rung 1's best by val loss ($kept)" \
  bash -c "[ '$kept' = \"\$(tr ' ' '\n' <<<'$best' | grep -v '^uniform$' | grep . | sort | tr '\n' ' ')\" ]"
check "the dropped table's error names its file and line" grep -q "^- bad (rung 1): $d/bad.txt:1: bad entry '4q'" "$d/A/search.md"
c=$(grep ' 1 ok ' <<<"$recA" | grep -v '^uniform ' | head -n 1 | awk '{print $1}')
check "rung 2 resumed $c from its step-4 checkpoint, with -k wsd and the decay only now (-decay_frac 0.2)" \
  bash -c "grep -q 'resumed from step 4' '$d/A/${c}_seed1/stdout.log' && grep -qx -- '-k wsd' '$d/A/${c}_seed1/flags.txt' && grep -q -- '^-decay_frac 0.2' '$d/A/${c}_seed1/flags.txt'"
check "a rung-1-only candidate ran 4 steps with no decay (-decay_frac 0)" \
  bash -c "x=\$(grep ' 0 ok ' <<<'$recA' | awk '{print \$1}' | grep -vxF -f <(tr ' ' '\n' <<<'$kept_all' | grep .) | head -n 1); [ -n \"\$x\" ] && grep -qx -- '-decay_frac 0' '$d/A/'\"\$x\"'_seed1/flags.txt' && grep -qx -- '-x 4' '$d/A/'\"\$x\"'_seed1/flags.txt'"
fin=$(sed -n 's/^Finalists: \([^;.]*\).*/\1/p' "$d/A/search.md")
top=$(grep ' 1 ok ' <<<"$recA" | grep -v '^uniform ' | sort -k4,4g -k1,1 | head -n 1 | awk '{print $1}')
check "the finalist is rung 2's best ($fin; $top), trained against uniform with seeds 1 and 2" \
  bash -c "[ '$fin' = '$top' ] && [ -f '$d/A/finals/${top}_seed2/main.log' ] && [ -f '$d/A/finals/uniform_seed2/main.log' ] && grep -q '^| $top | -\?[0-9.]* \[' '$d/A/finals/summary.md'"
grep -q "^rung 2 ranking: " "$d/A.log" && grep -q "left ~" "$d/A.log"
check "progress: one line per training with the time left, the ranking after each rung" \
  test "$(grep -c '^rung [12]/2 ' "$d/A.log")" -eq "$(grep -c ' ok \| failed' <<<"$recA" | tail -n 1)" -o "$(grep -c '^rung [12]/2 ' "$d/A.log")" -ge 15

# stopped after 5 trainings, then continued: the same record and finalists
# (both parts with --jobs 2: two trainings at once give the same record)
"$PYTHON" prism/search.py "${S[@]}" --finalists 1 --seeds '' --max-trainings 5 --jobs 2 --out "$d/B" > "$d/B1.log" 2>&1; rc1=$?
n1=$(grep -c . "$d/B/search.jsonl")
"$PYTHON" prism/search.py "${S[@]}" --finalists 1 --seeds '' --jobs 2 --out "$d/B" > "$d/B2.log" 2>&1; rc2=$?
recB=$(rec "$d/B/search.jsonl")
check "--max-trainings 5 stops with exit 3 after 5 trainings (+ the dropped table: $n1 lines); started again it finishes" \
  test "$rc1/$n1/$rc2" = "3/6/0"
check "the continued search's record equals the uninterrupted one (every candidate, rung and val loss)" \
  test "$recA" = "$recB"
check "and names the same finalist" grep -q "^Finalists: $top" "$d/B/search.md"

# a launcher size (GPU): --dry-run prints each candidate's first rung through scripts/run_gpt2.sh,
# the rung's flags after its `--` (which override the recipe's), and writes nothing
"$PYTHON" prism/search.py --size 124M --bin ./train_gpt2cu --steps 4000 --dry-run --out "$d/G" > "$d/G.log" 2>&1; rc=$?
check "124M --dry-run: exit 0, 91 candidates (every non-decreasing sequence of 3, 6, 12 heads over 12 layers), nothing written" \
  test "$rc/$(grep -c '^bash scripts/run_gpt2.sh --size 124M ' "$d/G.log")/$(test -e "$d/G" && echo written)" = "0/91/"
check "each launches rung 1 (500 of 4,000 steps) with -k wsd, no decay, a checkpoint and val at the rung" \
  test "$(grep '^bash ' "$d/G.log" | grep -c -- '--steps 500 .*-- -n 500 -v 500 -k wsd -decay_frac 0 > ')" -eq 91
check "a table is run without Prism's rules (--arm table), uniform as the size's own model" \
  bash -c "grep -q -- '--out $d/G/3-6-6-12-12-12-12-12-12-12-12-12_seed1 --arm table --schedule $d/G/tables/3-6-6-12-12-12-12-12-12-12-12-12.txt' '$d/G.log' && grep -q -- '--out $d/G/uniform_seed1 --arm uniform' '$d/G.log'"
expect_error "a launcher size without --steps: one line" "^error: --size 124M: give --steps N" \
  "$PYTHON" prism/search.py --size 124M --dry-run --out "$d/G"

# --jobs 2 with a GPU trainer (a stand-in named train_gpt2cu that notes its CUDA_VISIBLE_DEVICES and
# runs the CPU trainer): each training sees one GPU, 0 or 1
printf '#!/usr/bin/env bash\necho "${CUDA_VISIBLE_DEVICES-unset}" >> %s/devices.txt\nexec ./train_gpt2 "$@"\n' "$PWD/$d" \
  > "$d/train_gpt2cu"
chmod +x "$d/train_gpt2cu"
"$PYTHON" prism/search.py --size tiny --data shakespeare --steps 8 --rungs 2 --micro-batch 2 --seq-len 32 --val-batches 2 \
  --threads 1 --jobs 2 --bin "$d/train_gpt2cu" --seeds '' --max-trainings 4 --out "$d/J" > "$d/J.log" 2>&1
check "--jobs 2 with a GPU trainer: 4 trainings, each on GPU 0 or 1, both used ($(sort "$d/devices.txt" | tr '\n' ' '))" \
  test "$(grep -cx '[01]' "$d/devices.txt")/$(sort -u "$d/devices.txt" | tr -d '\n')" = "4/01"

# Ctrl-C with --jobs 2 (SIGINT to the search's session, as a terminal sends it): the running
# trainings stop at their checkpoint and no queued one starts. (A background job ignores SIGINT, so
# the search is started with it restored.)
( setsid "$PYTHON" -c "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.executable, [sys.executable] + sys.argv[1:])" \
    prism/search.py --size tiny --data shakespeare --steps 200 --rungs 2 --micro-batch 2 --seq-len 32 --val-batches 2 \
    --threads 1 --jobs 2 --seeds '' --out "$d/I" > "$d/I.log" 2>&1 & )
for _ in $(seq 50); do [ "$(ls -d "$d"/I/*_seed1 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.2; done
sid=$(pgrep -f -- "--out $d/I" | head -n 1)
pkill -INT -s "$sid"; t0=$(date +%s)
while pgrep -s "$sid" > /dev/null; do [ $(( $(date +%s) - t0 )) -lt 30 ] || break; sleep 0.5; done
check "Ctrl-C with --jobs 2: the search exits within 10 s, starting none of the 3 queued trainings ($(( $(date +%s) - t0 )) s; $(ls -d "$d"/I/*_seed1 | wc -l) run folders)" \
  test $(( $(date +%s) - t0 )) -le 10 -a "$(ls -d "$d"/I/*_seed1 | wc -l)" -eq 2 -a -n "$(grep '^interrupted' "$d/I.log")"
pkill -9 -s "$sid" 2> /dev/null

# errors: one line each
expect_error "another search's folder: one line naming what differs" "^error: $d/A: holds a search with other settings \(.*steps" \
  "$PYTHON" prism/search.py "${S[@]}" --steps 16 --out "$d/A"
expect_error "a rung inside the decay: one line" "^error: --rungs 2 --eta 2: rung 4 falls in the decay" \
  "$PYTHON" prism/search.py "${S[@]}" --decay-frac 0.9 --out "$d/C"
expect_error "--jobs 0: one line" "^error: --rungs >= 1, .*--jobs >= 1" \
  "$PYTHON" prism/search.py --size tiny --jobs 0 --out "$d/C"
expect_error "an unknown kind: one line" "^error: --kinds mha,xyz: expected a comma list" \
  "$PYTHON" prism/search.py --size tiny --kinds mha,xyz --out "$d/C"
finish
