#!/usr/bin/env bash
# scripts/run_gpt2_757M.sh: the 757M model (24 x 1536, -e L24C1536H24; doc/prism.md "Model sizes") on FineWeb 100B: llm.c's 774M recipe,
# uniform or Prism. A thin wrapper of scripts/run_gpt2.sh (all options there; --help).
#
#   scripts/run_gpt2_757M.sh --arm prism --seed 42 [--gpus 8] [--dry-run]
exec "$(dirname "$0")/run_gpt2.sh" --size 757M "$@"
