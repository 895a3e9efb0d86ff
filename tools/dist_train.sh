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

# A stop signal that comes before the training processes run is kept (STOP) and passed on to
# them once they do; one that comes before the config is checked ends this script (143; 130
# for SIGINT) without starting them.
STOP=
trap 'STOP=TERM' TERM
trap 'STOP=USR1' USR1
trap 'STOP=INT' INT

# One machine without a PORT: torchrun's standalone rendezvous, whose store binds a free port
# itself and keeps it (a port picked here and bound by torchrun later could be taken meanwhile
# by another run on the node). Several machines, or a PORT given: that address and port.
if [ -z "${PORT:-}" ] && [ "$NNODES" = 1 ]; then
  RENDEZVOUS=(--standalone)
else
  RENDEZVOUS=(--nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="${MASTER_ADDR:-127.0.0.1}"
              --master_port="${PORT:-29500}")
fi

# Pre-emption: SIGTERM / SIGUSR1 sent to this script go to the training processes, which
# finish their step, save a checkpoint and exit; this script then exits 143 (requeue me).
# A scheduler signals every process of the job at once (SLURM's pre-emption, scancel; or
# kill -- -PGID): torchrun would then stop the training processes before they save and end
# with 1, so it is started with both signals left to this script (not among its
# --signals-to-handle, given as PET_SIGNALS_TO_HANDLE, and blocked in torchrun).
# A process that has to end the job with a code of its own (143; 2 for bad input it found, 3
# for a divergence, 74 for a full disk, 75 for a busy work dir) writes it to
# TRAIN_EXIT_CODE_FILE with its error line: torchrun reports any failed job as 1. The job then
# ends with that line, last, and that code; torchrun's own lines (its report of the processes'
# ends) go to <work dir>/torchrun.log (benchmark/engine/torchrun_job.py), and a process that
# ended without a line (a signal, a traceback) is named in one line with the log.
# The training processes hold such a signal until their PreemptionHook takes it over
# (TRAIN_HOLD_SIGNALS, benchmark/engine/held_signals.py): one that reaches them while they
# import or load a checkpoint is acted on after their first step instead of killing them.
# They inherit torchrun's blocked mask, so one that comes before their interpreter has
# started stays pending until the hold is in place, which then unblocks and records it.
# This script killed (SIGKILL, which it cannot pass on): the kernel kills torchrun, whose end
# sends each training process SIGTERM (both through PR_SET_PDEATHSIG), which they take as a
# pre-emption; nothing trains on unseen, and a --resume started at once waits for them to go.
if [ -n "$STOP" ]; then
  echo "stopped by SIG$STOP before training started; nothing to save" >&2
  if [ "$STOP" = INT ]; then exit 130; else exit 143; fi
fi
export TRAIN_EXIT_CODE_FILE
TRAIN_EXIT_CODE_FILE=$(mktemp -u "${TMPDIR:-/tmp}/mixco-exit-code.XXXXXX")
# The config and the data are checked once, before any training process starts, in the
# process that then runs torchrun (tools/train.py --check-only and the data as train.py checks
# it, on one load of the config: the root, its layout, every image file, a scan cached there):
# a bad key or value, a missing or broken data folder is one line and exit code 2. The stop
# signals stay blocked while it checks (in the threads torch starts meanwhile as well): one
# that came then ends it with 143 (130 for SIGINT) and one line, before anything trains.
TRAIN_HOLD_SIGNALS=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
  PET_SIGNALS_TO_HANDLE=SIGINT,SIGHUP,SIGQUIT \
  "$PYTHON" -c 'import os, runpy, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1, signal.SIGINT})
world_size, given, train_py = sys.argv[1:4]
check, torchrun = sys.argv[4:5 + int(given)], sys.argv[5 + int(given):]
env = dict(os.environ)  # torchrun and its processes get it back as it was
del os.environ["TRAIN_HOLD_SIGNALS"]  # kept blocked here (in every thread the check starts)
del os.environ["TRAIN_EXIT_CODE_FILE"]  # the check says its own error, once
from benchmark.engine.held_signals import with_launcher
with_launcher(signal.SIGKILL)  # this script killed: torchrun goes, its processes save and exit
os.environ["WORLD_SIZE"] = world_size  # what the check divides the batch by
sys.argv[0] = train_py  # argparse names the tool in its messages
train = runpy.run_path(train_py, run_name="dist_train_check")
from benchmark.engine.torchrun_job import TorchrunJob, check_launch
code, log = check_launch(train["parse_args"]([*check, "--check-only"]))  # the data too
os.environ.clear()
os.environ.update(env)
stop = next((s.name for s in sorted(signal.sigpending())), None)
if stop:  # whatever the check found: nothing has started
    print(f"stopped by {stop} before training started; nothing to save", file=sys.stderr)
    sys.exit(130 if stop == "SIGINT" else 143)
if code:
    sys.exit(code)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # torchrun handles it
sys.argv = ["torchrun", *torchrun]
with TorchrunJob(log) as job:  # its own lines to the log; the job ends with one line
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
sys.exit(job.end())' \
  "$((NNODES * NUM_PROCS))" "$#" "$ROOT/tools/train.py" "$CONFIG" "$@" \
  "${RENDEZVOUS[@]}" --nproc_per_node="$NUM_PROCS" \
  "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "$@" &
CHILD=$!
SENT=
TOLD=
trap 'STOP=TERM SENT= TOLD=' TERM
trap 'STOP=USR1 SENT= TOLD=' USR1
trap 'STOP=INT SENT= TOLD=' INT
set +e
while kill -0 "$CHILD" 2>/dev/null; do
  # The signal reaches the checking process too: it ends before anything trains if it is
  # still checking (after that, torchrun keeps SIGTERM and SIGUSR1 blocked and never sees
  # them; SIGINT stops torchrun's processes, as it stops them when it reaches them directly).
  # Only once it has blocked them (its first line; SigBlk holds SIGTERM's bit, 0x4000): before
  # that the signal's default action would end it without its line.
  if [ -n "$STOP" ] && [ -z "$TOLD" ]; then
    MASK=$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$CHILD/status" 2>/dev/null)
    if [ -n "$MASK" ] && (( (16#$MASK & 0x4000) == 0 )); then
      sleep 0.05
      continue
    fi
    kill "-$STOP" "$CHILD" 2>/dev/null
    TOLD=1
  fi
  # A signal is passed on to torchrun's training processes once all of them have started.
  if [ -n "$STOP" ] && [ -z "$SENT" ]; then
    if [ "$(pgrep -c -P "$CHILD")" -ge "$NUM_PROCS" ]; then
      pkill "-$STOP" -P "$CHILD" 2>/dev/null
      SENT=1
    else
      sleep 0.2
      continue
    fi
  fi
  wait "$CHILD"  # returns early (128 + signal) when a trapped signal arrives: wait again
done
wait "$CHILD"  # the child's own exit status (bash keeps it after the child is reaped)
RC=$?
if [ -s "$TRAIN_EXIT_CODE_FILE" ]; then  # left only where torchrun's process itself was killed
  RC=$(head -n 1 "$TRAIN_EXIT_CODE_FILE")
  sed -n '2p' "$TRAIN_EXIT_CODE_FILE" >&2  # the error line, if any, last
fi
rm -f "$TRAIN_EXIT_CODE_FILE"
exit "$RC"
