#!/usr/bin/env bash
# Everything issue 12 measures on a GPU, in as few device calls as possible: install the carried
# wheels, check imports and the card, run the CUDA tests, kill and resume a real NCCL run, and
# time the paper's setting; a table of the outcomes is printed last.
#
#   here, once:  bash ../shared/gpu/fetch_wheels.sh         (-> .whl/, ignored by git)
#   there:       STEPS="env tests kill" bash tools/gpu_proof.sh     (about 4 minutes)
#                STEPS="env speed" bash tools/gpu_proof.sh          (about 8 minutes)
#   (the device tool: run(command=..., carry=[".whl"]); each call must end within 10 minutes)
#
# Outputs go to $OUT (the device tool's folder; default results/gpu_proof/): env.log, tests.log,
# kill_resume.json and .log, speed.log and <device>.json / .md (commit those two to
# results/speed/). Knobs: STEPS (default "env tests kill speed"), SPEED_ARGS and KILL_ARGS
# (appended to the tools' arguments), WHEELS (default .whl), PYTHON (default python3).
# Any step may fail without stopping the others; the exit code is the number of failed steps.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/results/gpu_proof}
mkdir -p "$OUT"
STEPS=${STEPS:-env tests kill speed}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
declare -A STATUS
for s in $STEPS; do  # all names checked before anything runs
  case $s in env|tests|kill|speed) ;; *) echo "error: unknown step '$s' (env, tests, kill, speed)" >&2; exit 2 ;; esac
done

if compgen -G "$WHEELS/*.whl" > /dev/null; then  # the machine's own torch stays
  SITE=${SITE:-/tmp/gpu-proof-site}
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl || { echo "error: installing $WHEELS/*.whl failed" >&2; exit 99; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME COMMAND...: run it (output to $OUT/NAME.log too), record pass/FAIL
  local name=$1; shift
  echo "=== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  STATUS[$name]="$([ "$rc" = 0 ] && echo pass || echo "FAIL (rc $rc)") in $((SECONDS - start)) s"
}

for s in $STEPS; do
  case $s in
    env)
      step env "$PYTHON" -c "
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
        --format=csv >> "$OUT/env.log" 2>&1 || true
      ;;
    tests)  # the CUDA tests, then the modules the GPU path runs through
      step tests "$PYTHON" -m pytest -q -ra -p no:cacheprovider -m "cuda or not slow" \
        tests/methods tests/data/test_gpu_views.py tests/engine/test_amp_cpu.py \
        tests/engine/test_fast_switches.py tests/evaluation/test_knn.py \
        tests/evaluation/test_knn_backends.py
      ;;
    kill)  # a real dist_train.sh run on NCCL: 2 epochs of 20,000 images at the paper's total
      # batch 128 on one GPU (156 iterations each); KILL_ARGS' options override these
      # shellcheck disable=SC2086
      kill_work=$(mktemp -d /tmp/gpu-proof-kill.XXXXXX)
      step kill_resume "$PYTHON" tools/kill_resume.py configs/mixco_r18_tiny_fast.py --nproc 1 \
        --epochs 2 --kill-at 250 --iter-interval 100 --fake-images 20000 \
        --cfg-options train_dataloader.batch_size=128 \
        --work-dir "$kill_work" --out "$OUT/kill_resume.json" ${KILL_ARGS:-}
      for f in "$kill_work"/*.log; do  # the runs' own logs: their ends, in the one file that returns
        [ -f "$f" ] && { echo "--- tail of $(basename "$f")"; tail -n 25 "$f"; } >> "$OUT/kill_resume.log"
      done
      rm -rf "$kill_work"  # its fake images; kill_resume.py removed the checkpoints
      ;;
    speed)  # the paper's setting, PIL and device views, fp32 and bf16 + channels_last, compile
      # shellcheck disable=SC2086
      # Loader workers: all cores but two (the PIL path at 224 px needs them; the config's 4 are
      # per process of a 2-GPU run).
      workers=$(( $(nproc) > 6 ? $(nproc) - 2 : 4 ))
      step speed "$PYTHON" tools/benchmark_speed.py --paper --data-dir /tmp/gpu-proof-data \
        --num-workers "$workers" --out-dir "$OUT" ${SPEED_ARGS:-}
      ;;
  esac
done

echo
echo "gpu_proof: outputs in $OUT"
failed=0
for s in "${!STATUS[@]}"; do
  printf '  %-12s %s\n' "$s" "${STATUS[$s]}"
  [[ ${STATUS[$s]} == pass* ]] || failed=$((failed + 1))
done
if [ -n "${STATUS[kill_resume]:-}" ]; then grep -E '^(gloo|nccl|FAILED|kill-resume)' "$OUT/kill_resume.log"; fi
if [ -n "${STATUS[speed]:-}" ]; then
  grep -E '^(paper_setting|mixco_moco_time|compile_speedup|pipeline_eff)' "$OUT/speed.log"
  grep -i -m 3 'recompil' "$OUT/speed.log" || true  # dynamo's limit: compiled code falls back
fi
exit "$failed"
