#!/usr/bin/env bash
# Every GPU check and measurement of the suite on one CUDA machine: install carried wheels, check
# imports and the card, run the CUDA tests, kill and resume a real NCCL run, and time the paper's
# setting; a table of the outcomes is printed last.
#
#   usage: tools/gpu_proof.sh [OUTPUT_DIR]      (default results/gpu_proof/)
#
#   STEPS="env tests" bash tools/gpu_proof.sh OUTPUT_DIR   # versions + card, the CUDA tests
#
# All four steps together finish within 8 minutes on one H100/H200: each has a time limit
# (LIMIT_TESTS, LIMIT_KILL, LIMIT_SPEED seconds: 150, 210, 240), past which it is stopped and
# marked failed, so the table is always printed. The speed step times the paper's setting
# (ResNet-18, 224 px, batch 128) end to end on one epoch of 10,000 generated images for the
# device views (replayed from a CUDA graph, and plain calls; with the step graph too) and PIL
# in the workers, each beside its bare step and the whole step replayed from one CUDA graph
# (benchmark/engine/step_graph.py), with its per-iteration breakdown and a torch.profiler table
# of one iteration (in speed.log); and the views alone (SPEED_ARGS replaces its arguments).
#
# The machine's own PyTorch is used. If it lacks mmengine, lightly, faiss-cpu or kornia, put their
# wheels (and those of any of their dependencies it lacks) in .whl/ (ignored by git), e.g. with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl mmengine lightly ...
# on a machine with network access (give the GPU machine's Python version); they are installed
# --no-deps into a scratch folder put first on PYTHONPATH, leaving the machine's packages alone.
#
# Outputs in OUTPUT_DIR: env.log, tests.log, kill_resume.json and .log, speed.log and
# <device>.json / .md (commit those two to results/speed/). Scratch folders (installed wheels, the
# kill-and-resume run, generated images) come from mktemp -d (under TMPDIR) and are removed at the
# end. Knobs: STEPS (default "env tests kill speed"), SPEED_ARGS (replaces the speed step's
# choice of parts and configurations), KILL_CONFIG (the kill step's config, default
# configs/mixco_r18_tiny_fast.py) and KILL_ARGS (appended to kill_resume.py's arguments), WHEELS
# (default .whl), PYTHON (default python3), SITE (install the wheels
# here and keep them), DATA_DIR (keep the speed step's generated images here, reused by the next
# invocation). Any step may fail without stopping the others; the exit code is the number of
# failed steps (2 for bad arguments or steps, 99 if the wheels cannot be installed).
set -uo pipefail
USAGE='usage: tools/gpu_proof.sh [OUTPUT_DIR]  (default results/gpu_proof/; knobs in the header)'
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $# in
  0) dest=$ROOT/results/gpu_proof ;;
  1) case $1 in
       -h|--help) echo "$USAGE"; exit 0 ;;
       ''|-*) echo "error: OUTPUT_DIR '$1': not a folder name; $USAGE" >&2; exit 2 ;;
       *) dest=$1 ;;
     esac ;;
  *) echo "error: $# arguments given, at most one (OUTPUT_DIR) expected; $USAGE" >&2; exit 2 ;;
esac
STEPS=${STEPS:-env tests kill speed}
for s in $STEPS; do  # all names checked before anything runs
  case $s in env|tests|kill|speed) ;; *) echo "error: unknown step '$s' (env, tests, kill, speed)" >&2; exit 2 ;; esac
done
mkdir -p -- "$dest" 2>/dev/null && dest=$(cd -- "$dest" && pwd) || {
  echo "error: OUTPUT_DIR '$dest': cannot create or enter the folder; $USAGE" >&2; exit 2; }
cd "$ROOT"
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
scratch=$(mktemp -d -t gpu-proof.XXXXXX) || { echo "error: mktemp -d failed (TMPDIR)" >&2; exit 2; }
trap 'rm -rf "$scratch"' EXIT
declare -A STATUS

if compgen -G "$WHEELS/*.whl" > /dev/null; then  # the machine's own torch stays
  SITE=${SITE:-$scratch/site}
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl || { echo "error: installing $WHEELS/*.whl failed" >&2; exit 99; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME LIMIT COMMAND...: run it for LIMIT seconds at most (output to
  # OUTPUT_DIR/NAME.log too), record pass/FAIL
  local name=$1 limit=$2; shift 2
  echo "=== $name (at most $limit s): $*"
  local start=$SECONDS
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$dest/$name.log"
  local rc=${PIPESTATUS[0]}
  local why=''; [ "$rc" = 124 ] && why=", stopped at its limit"
  STATUS[$name]="$([ "$rc" = 0 ] && echo pass || echo "FAIL (rc $rc$why)") in $((SECONDS - start)) s"
}

for s in $STEPS; do
  case $s in
    env)
      step env 60 "$PYTHON" -c "
import importlib.util, sys, torch, torchvision, mmengine, lightly, faiss
import lightly.loss, lightly.models.modules, benchmark.components, methods, pytest
kornia = importlib.util.find_spec('kornia') and __import__('kornia').__version__  # speed's views part
print('python', sys.version.split()[0], '| torch', torch.__version__, '| torchvision',
      torchvision.__version__, '| mmengine', mmengine.__version__, '| lightly', lightly.__version__,
      '| faiss', faiss.__version__, '(GPUs:', faiss.get_num_gpus(), ') | kornia', kornia)
print('cuda', torch.version.cuda, '| cudnn', torch.backends.cudnn.version(), '| nccl',
      torch.cuda.nccl.version() if torch.cuda.is_available() else None)
assert torch.cuda.is_available(), 'no CUDA device'
p = torch.cuda.get_device_properties(0)
print('device', p.name, '|', p.multi_processor_count, 'SMs |', round(p.total_memory / 2**30, 1), 'GiB')
"
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
        --format=csv >> "$dest/env.log" 2>&1 || true
      ;;
    tests)  # the CUDA tests, then the modules the GPU path runs through (4 workers, one GPU)
      step tests "${LIMIT_TESTS:-150}" "$PYTHON" -m pytest -q -ra -p no:cacheprovider -p no:randomly \
        -n 4 -m "cuda or not slow" \
        tests/methods tests/data/test_gpu_views.py tests/data/test_view_graph.py \
        tests/data/test_view_prefetch.py tests/engine/test_amp_cpu.py \
        tests/engine/test_fast_switches.py tests/engine/test_step_graph_hook.py \
        tests/evaluation/test_knn.py \
        tests/evaluation/test_knn_backends.py
      ;;
    kill)  # a real dist_train.sh run on NCCL: 2 epochs of 5,120 images at the paper's total
      # batch 128 on one GPU (40 iterations each), killed at iteration 50, resumed; the two
      # uninterrupted runs (reference, noise floor) train beside it; KILL_ARGS override
      kill_work=$(mktemp -d "$scratch/kill.XXXXXX")
      # shellcheck disable=SC2086
      step kill_resume "${LIMIT_KILL:-210}" "$PYTHON" tools/kill_resume.py \
        "${KILL_CONFIG:-configs/mixco_r18_tiny_fast.py}" --nproc 1 \
        --epochs 2 --kill-at 50 --iter-interval 20 --fake-images 5120 --timeout 120 --concurrent \
        --cfg-options train_dataloader.batch_size=128 train_dataloader.num_workers=6 \
        --work-dir "$kill_work" --out "$dest/kill_resume.json" ${KILL_ARGS:-}
      for f in "$kill_work"/*.log; do  # the runs' own logs: their ends, kept in OUTPUT_DIR
        [ -f "$f" ] && { echo "--- tail of $(basename "$f")"; tail -n 25 "$f"; } >> "$dest/kill_resume.log"
      done
      rm -rf "$kill_work"  # its fake images; kill_resume.py removed the checkpoints
      ;;
    speed)  # the paper's setting end to end: device views (graphed, plain) and PIL, bf16 + cl
      # Loader workers: all cores but two (the PIL path at 224 px needs them; the config's 4 are
      # per process of a 2-GPU run).
      workers=$(( $(nproc) > 6 ? $(nproc) - 2 : 4 ))
      # shellcheck disable=SC2086
      step speed "${LIMIT_SPEED:-240}" "$PYTHON" tools/benchmark_speed.py --paper \
        --data-dir "${DATA_DIR:-$scratch/data}" --num-workers "$workers" --out-dir "$dest" \
        ${SPEED_ARGS:---only pipeline views --images 10000 --profile --configs gpu-bf16-cl gpue-bf16-cl gpu-bf16-cl-graph pil-bf16-cl}
      ;;
  esac
done

echo
echo "gpu_proof: outputs in $dest"
failed=0
for s in "${!STATUS[@]}"; do
  printf '  %-12s %s\n' "$s" "${STATUS[$s]}"
  [[ ${STATUS[$s]} == pass* ]] || failed=$((failed + 1))
done
if [ -n "${STATUS[kill_resume]:-}" ]; then grep -E '^(gloo|nccl|FAILED|kill-resume)' "$dest/kill_resume.log"; fi
if [ -n "${STATUS[speed]:-}" ]; then
  grep -E '^(paper_setting|mixco_moco_time|compile_speedup|pipeline_eff)|^\| (gpu|pil)' "$dest/speed.log"
  grep -i -m 3 'recompil' "$dest/speed.log" || true  # dynamo's limit: compiled code falls back
fi
exit "$failed"
