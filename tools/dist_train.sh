#!/usr/bin/env bash
# Multi-process pretraining with torchrun: NCCL on GPUs, gloo CPU processes when there is none.
#   tools/dist_train.sh CONFIG NUM_PROCS [train.py args...]
# Several machines: set NNODES, NODE_RANK, MASTER_ADDR and PORT on each.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CONFIG NUM_PROCS [train.py args...]" >&2
  exit 2
fi
CONFIG=$1
NUM_PROCS=$2
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
if [ -x "$ROOT/.venv/bin/python" ] && [ -z "${VIRTUAL_ENV:-}" ]; then PYTHON="$ROOT/.venv/bin/python"; fi
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}

PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m torch.distributed.run \
  --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
  --nproc_per_node="$NUM_PROCS" --master_port="$PORT" \
  "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "$@"
