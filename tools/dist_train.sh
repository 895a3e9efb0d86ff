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
for name in NUM_PROCS NNODES; do
  if ! [[ "${!name}" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: $name must be a positive integer, got '${!name}'" >&2
    exit 2
  fi
done

# The config is checked once, in one process, before any is started: a bad key or value is one
# line and exit code 2 (torchrun would wrap the processes' errors in its own report).
WORLD_SIZE=$((NNODES * NUM_PROCS)) PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" "$ROOT/tools/train.py" "$CONFIG" --check-only "$@" || exit $?
if [ -z "${PORT:-}" ] && [ "$NNODES" = 1 ]; then  # one machine: any free port
  PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}

# Pre-emption: SIGTERM / SIGUSR1 sent to this script go to the training processes, which
# finish their step, save a checkpoint and exit; this script then exits 143 (requeue me).
export PREEMPT_MARKER
PREEMPT_MARKER=$(mktemp -u "${TMPDIR:-/tmp}/mixco-preempted.XXXXXX")
forward() { pkill "-$1" -P "$CHILD" 2>/dev/null || true; }
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m torch.distributed.run \
  --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
  --nproc_per_node="$NUM_PROCS" --master_port="$PORT" \
  "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "$@" &
CHILD=$!
trap 'forward TERM' TERM
trap 'forward USR1' USR1
trap 'forward INT' INT
set +e
while kill -0 "$CHILD" 2>/dev/null; do
  wait "$CHILD"  # returns early (128 + signal) when a trapped signal arrives: wait again
done
wait "$CHILD"  # the child's own exit status (bash keeps it after the child is reaped)
RC=$?
if [ -e "$PREEMPT_MARKER" ]; then
  rm -f "$PREEMPT_MARKER"
  exit 143
fi
exit "$RC"
