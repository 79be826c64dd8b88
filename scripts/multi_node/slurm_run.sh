#!/usr/bin/env bash
# scripts/multi_node/slurm_run.sh: the body of run_gpt2_fs.sbatch and run_gpt2_tcp.sbatch.
#
#   bash scripts/multi_node/slurm_run.sh fs|tcp [--fs-dir DIR | --server-ip IP] [--dry-run] \
#       --size 124M --arm prism [other scripts/run_gpt2.sh options]
#
# Inside a Slurm allocation: checks the inputs once, then repeats
#     srun bash scripts/run_gpt2.sh ... --launcher slurm-task
# until DONE_<last step> exists. Each task runs one rank of train_gpt2cu with
# -pn $SLURM_NTASKS -pr $SLURM_PROCID -pg $SLURM_NTASKS_PER_NODE and the NCCL rendezvous (doc/formats.md
# "Multi-GPU"): fs, through ncclUniqueId.<job>.sync in a directory every node sees (named after the job, so
# jobs sharing the directory never meet; rank 0 removes it once all ranks are connected, and an
# attempt that crashed during the rendezvous leaves it, so it is removed before each launch), or
# tcp, to rank 0's address on port 12345.
# srun restarts all ranks together, which a per-rank resume loop could not. A launch that adds no
# checkpoint counts as a failure; --max-restarts (default 20) of them in a row stop the job.
# --dry-run (outside Slurm too: 2 nodes x 8 tasks unless SLURM_NTASKS / SLURM_NTASKS_PER_NODE
# say otherwise) prints the srun line and every rank's trainer command.
set -euo pipefail
[ -f scripts/lib.sh ] || { echo "error: $(pwd): not the repository root (submit the .sbatch from the checkout's root)" >&2; exit 1; }
. scripts/lib.sh
[ -f scripts/run_gpt2.sh ] || die "$(pwd): not the repository root (submit the .sbatch from the checkout's root)"
MODE=${1:-}
case "$MODE" in fs|tcp) shift ;; *) die "rendezvous '$MODE': expected fs or tcp as the first argument" ;; esac
DRY=0; FS_DIR=""; SERVER_IP=""; MAX_RESTARTS=20; ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --fs-dir|--server-ip|--max-restarts)
      need_value "$1" $#
      case "$1" in --fs-dir) FS_DIR=$2 ;; --server-ip) SERVER_IP=$2 ;; *) MAX_RESTARTS=$2 ;; esac
      shift 2 ;;
    --launcher|--rendezvous|--gpus|--hosts) die "$1: set by the Slurm launcher" ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
is_uint --max-restarts "$MAX_RESTARTS"

if [ -z "${SLURM_JOB_ID:-}" ]; then
  [ "$DRY" = 1 ] || die "not inside a Slurm job: submit with sbatch (or use --dry-run)"
  export SLURM_NTASKS=${SLURM_NTASKS:-16} SLURM_NTASKS_PER_NODE=${SLURM_NTASKS_PER_NODE:-8}
fi
[ -n "${SLURM_NTASKS:-}" ] && [ -n "${SLURM_NTASKS_PER_NODE:-}" ] ||
  die "SLURM_NTASKS / SLURM_NTASKS_PER_NODE unset: request --ntasks-per-node in the #SBATCH header"

if [ "$MODE" = fs ]; then
  FS_DIR=${FS_DIR:-$PWD/log/nccl_fs_${SLURM_JOB_ID:-dryrun}}
  RDV=(--rendezvous fs --fs-dir "$FS_DIR")
else
  if [ -z "$SERVER_IP" ]; then
    if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
      head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
      SERVER_IP=$(getent ahostsv4 "$head" | awk 'NR == 1 { print $1 }')
      [ -n "$SERVER_IP" ] || die "$head: cannot resolve the rank-0 node's IPv4 address (give --server-ip)"
    else
      [ "$DRY" = 1 ] || die "--server-ip: unknown rank-0 address (no scontrol / SLURM_JOB_NODELIST)"
      SERVER_IP="<rank-0 IP>"
    fi
  fi
  RDV=(--rendezvous tcp --server-ip "$SERVER_IP")
fi
export NCCL_NET_GDR_LEVEL=${NCCL_NET_GDR_LEVEL:-2} NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0} NCCL_P2P_LEVEL=${NCCL_P2P_LEVEL:-PXB}
TASK=(bash scripts/run_gpt2.sh ${ARGS[@]+"${ARGS[@]}"} --launcher slurm-task "${RDV[@]}")
SRUN=(srun --kill-on-bad-exit=1 "${TASK[@]}")
DONE_FILE=$(SLURM_PROCID=0 "${TASK[@]}" --print-done-file)

if [ "$DRY" = 1 ]; then
  echo "# Slurm, rendezvous $MODE: $SLURM_NTASKS tasks, $SLURM_NTASKS_PER_NODE per node; NCCL_NET_GDR_LEVEL=$NCCL_NET_GDR_LEVEL NCCL_IB_DISABLE=$NCCL_IB_DISABLE NCCL_P2P_LEVEL=$NCCL_P2P_LEVEL${NCCL_SOCKET_IFNAME:+ NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME}"
  echo "until [ -e $DONE_FILE ]; do ${FS_DIR:+rm -f $FS_DIR/ncclUniqueId.${SLURM_JOB_ID:-*}.sync; }${SRUN[*]}; done"
  for ((r = 0; r < SLURM_NTASKS; r++)); do
    echo "# rank $r:"
    if [ "$r" -eq 0 ]; then SLURM_PROCID=$r "${TASK[@]}" --dry-run
    else SLURM_PROCID=$r "${TASK[@]}" --dry-run 2>/dev/null; fi  # missing inputs: said for rank 0
  done
  exit 0
fi

SLURM_PROCID=0 "${TASK[@]}" --check-only
[ -z "$FS_DIR" ] || mkdir -p "$FS_DIR"
latest_done() { ls "$(dirname "$DONE_FILE")" 2>/dev/null | grep -E '^DONE_[0-9]{8}$' | sort | tail -n 1 || true; }
fails=0
while [ ! -e "$DONE_FILE" ]; do
  before=$(latest_done)
  [ -z "$FS_DIR" ] || rm -f "$FS_DIR"/ncclUniqueId."$SLURM_JOB_ID".sync  # this job's only: a shared dir may serve others
  rc=0
  "${SRUN[@]}" || rc=$?
  [ -e "$DONE_FILE" ] && break
  if [ "$(latest_done)" = "$before" ]; then fails=$((fails + 1)); else fails=0; fi
  [ "$fails" -lt "$MAX_RESTARTS" ] || die "srun exited $rc; $fails launches in a row wrote no new checkpoint"
  echo "srun exited with status $rc before $DONE_FILE; relaunching all ranks with -y 1 in 10 s"
  sleep 10
done
echo "done: $DONE_FILE"
