#!/usr/bin/env bash
# scripts/multi_node/run_gpt2_mpi.sh: GPT-2 (uniform or Prism) on several nodes with mpirun
# (doc/formats.md "Multi-GPU", rendezvous "mpi": MPI broadcasts the NCCL id; needs an MPI build of train_gpt2cu).
#
#   scripts/multi_node/run_gpt2_mpi.sh --hosts node1:8,node2:8 --size 124M --arm prism \
#       --micro-batch 32 [--seed 42] [--dry-run] [other scripts/run_gpt2.sh options]
#
# The process count is the sum of the slots in --hosts. With 16 GPUs, llm.c's 524,288-token step
# needs B = 32 (16 x 32 x 1024); or keep B = 64 with --total-batch 1048576 (not llm.c's recipe).
# The NCCL settings of llm.c's multi-node scripts are exported here unless already set, and
# forwarded to every node (mpirun -x); set NCCL_SOCKET_IFNAME to your network interface.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOSTS=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) [ $# -ge 2 ] || { echo "error: --hosts: expected a value after the flag" >&2; exit 1; }
             HOSTS=$2; shift 2 ;;
    --gpus) echo "error: --gpus: the process count comes from --hosts (slots per host)" >&2; exit 1 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[[ "$HOSTS" =~ ^[^,:]+:[0-9]+(,[^,:]+:[0-9]+)*$ ]] ||
  { echo "error: --hosts '$HOSTS': expected host:slots[,host:slots...], e.g. node1:8,node2:8" >&2; exit 1; }
NPROC=0
IFS=, read -ra entries <<< "$HOSTS"
for e in "${entries[@]}"; do NPROC=$((NPROC + ${e##*:})); done
export NCCL_NET_GDR_LEVEL=${NCCL_NET_GDR_LEVEL:-2}
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0}
export NCCL_P2P_LEVEL=${NCCL_P2P_LEVEL:-PXB}
exec scripts/run_gpt2.sh --gpus "$NPROC" --hosts "$HOSTS" ${ARGS[@]+"${ARGS[@]}"}
