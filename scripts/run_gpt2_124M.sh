#!/usr/bin/env bash
# scripts/run_gpt2_124M.sh: GPT-2 124M (d12, 12 x 768) on FineWeb 10B: llm.c's scripts/run_gpt2_124M.sh recipe,
# uniform or Prism. A thin wrapper of scripts/run_gpt2.sh (all options there; --help).
#
#   scripts/run_gpt2_124M.sh --arm prism --seed 42 [--gpus 8] [--dry-run]
exec "$(dirname "$0")/run_gpt2.sh" --size 124M "$@"
