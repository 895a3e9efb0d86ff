#!/usr/bin/env bash
# Pretraining under SLURM, one task per GPU:
#   GPUS=8 tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py args...]
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: GPUS=N $0 PARTITION JOB_NAME CONFIG [train.py args...]" >&2
  exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
shift 3
GPUS=${GPUS:-2}
GPUS_PER_NODE=${GPUS_PER_NODE:-$(( GPUS < 8 ? GPUS : 8 ))}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
if [ -x "$ROOT/.venv/bin/python" ] && [ -z "${VIRTUAL_ENV:-}" ]; then PYTHON="$ROOT/.venv/bin/python"; fi

PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" srun -p "$PARTITION" --job-name="$JOB_NAME" \
  --gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" --ntasks-per-node="$GPUS_PER_NODE" \
  --cpus-per-task="$CPUS_PER_TASK" --kill-on-bad-exit=1 $SRUN_ARGS \
  "$PYTHON" -u "$ROOT/tools/train.py" "$CONFIG" --launcher slurm "$@"
