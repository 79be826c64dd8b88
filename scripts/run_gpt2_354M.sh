#!/usr/bin/env bash
# scripts/run_gpt2_354M.sh: GPT-2 354M (d24, 24 x 1024) on FineWeb 100B: llm.c's scripts/run_gpt2_350M.sh recipe,
# uniform or Prism. A thin wrapper of scripts/run_gpt2.sh (all options there; --help).
#
#   scripts/run_gpt2_354M.sh --arm prism --seed 42 [--gpus 8] [--dry-run]
exec "$(dirname "$0")/run_gpt2.sh" --size 354M "$@"
