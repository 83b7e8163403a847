#!/usr/bin/env bash
# GPU check of the collectors: at most 5 minutes on one node (one overall deadline).
#
#   scripts/gpu_check.sh OUTDIR        (or: OUT=OUTDIR scripts/gpu_check.sh)
#
# BUDGET_S (default 300) is the whole run's budget: each step gets at most its own limit and
# at most the time left; a step that would start with under 5 s left is skipped with a
# message, and one that the deadline cuts short is reported as such (the rest is skipped);
# a run with skipped steps ends with exit 4 (incomplete) unless the dry run failed.
#
# 1. collect layers: AlexNet and ResNet-50, fp32 and amp, on cuda:0 (CUDA-event timing);
#    AlexNet fp32 also with --profile (torch.profiler trace imported beside it). Batch sizes:
#    LAYER_BATCHES (default "alexnet:32 resnet50:32"; several per model allowed). On a fast
#    GPU, batch 32 leaves the fused pass bound by the host's kernel launches (an H200 runs
#    ResNet-50's b32 kernels in a fraction of the launch time), so the per-layer GPU times
#    sum to far less than the fused pass and the run is flagged: give such a GPU a batch
#    that keeps it busy, e.g. LAYER_BATCHES="alexnet:512 resnet50:128".
# 2. collect comm: NCCL all-reduce/broadcast sweep over all GPUs when there are 2 or more
#    (one GPU: the gloo loopback sweep, labelled as such)
# 3. collect ssgd: ResNet-50, NCCL, naive/wfbp/bucketed/ddp, when there are 2 or more GPUs
# 4. assembles OUTDIR/contribution/ (runs, layer_timings, iterations, comm,
#    contribution.yaml) and validates it with `dgtraces contribute --dry-run`
# 5. prints the figures; everything stays under OUTDIR (nothing is written to data/).
#
# Needs a CUDA build of torch==2.13.0 (CONTRIBUTING.md) and this repository's dgtraces
# (PYTHONPATH is set to the checkout). PYTHON overrides the interpreter.
set -euo pipefail

OUTDIR=${1:-${OUT:-}}
if [ -z "$OUTDIR" ]; then
  echo "usage: $0 OUTDIR   (or set OUT)" >&2
  exit 2
fi
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
LOG="$OUTDIR/gpu_check.log"
: > "$LOG"
START=$(date +%s)
BUDGET=${BUDGET_S:-300}
DEADLINE=$(( START + BUDGET ))
SKIPPED=()

say() { echo "== $*" | tee -a "$LOG"; }
left() { echo $(( DEADLINE - $(date +%s) )); }
bounded() {  # bounded SECONDS WHAT cmd...: run cmd within min(SECONDS, time left), logged
  local limit=$1 what=$2 rest rc
  shift 2
  rest=$(left)
  if [ "$rest" -lt 5 ]; then
    echo "skipped: $what (the ${BUDGET} s budget is spent)" | tee -a "$LOG"
    SKIPPED+=("$what")
    return 0
  fi
  [ "$rest" -lt "$limit" ] && limit=$rest
  echo "+ $* (limit ${limit} s)" >> "$LOG"
  set +e
  timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -eq 124 ] && [ "$(left)" -lt 5 ]; then
    echo "stopped: $what (cut short by the ${BUDGET} s deadline)" | tee -a "$LOG"
    SKIPPED+=("$what (cut short)")
    return 0
  fi
  return "$rc"
}
dg() {  # dg SECONDS args...: one dgtraces command within its limit and the deadline
  local limit=$1
  shift
  bounded "$limit" "dgtraces $*" "$PY" -m dgtraces "$@"
}

NGPU=$("$PY" - <<'EOF'
import torch
print(torch.cuda.device_count() if torch.version.cuda and torch.cuda.is_available() else 0)
EOF
)
if [ "$NGPU" -lt 1 ]; then
  echo "no CUDA device visible to torch (torch.version.cuda or the driver missing); the" \
       "collectors would refuse with NO_CUDA" | tee -a "$LOG" >&2
  exit 3
fi
"$PY" - <<'EOF' | tee -a "$LOG"
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()}, {torch.cuda.device_count()} GPU(s): "
      + ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())))
EOF

say "1. collect layers (cuda:0)"
PROFILED=""
for pair in ${LAYER_BATCHES:-alexnet:32 resnet50:32}; do
  model=${pair%%:*}
  batch=${pair#*:}
  for prec in fp32 amp; do
    extra=()
    if [ "$model" = alexnet ] && [ "$prec" = fp32 ] && [ -z "$PROFILED" ]; then
      extra=(--profile "$OUTDIR/alexnet-fp32-b$batch.kineto.json.gz")
      PROFILED=1
    fi
    dg 150 collect layers --model "$model" --batch-size "$batch" --repeats 10 --warmup 3 \
      --device cuda:0 --precision "$prec" "${extra[@]}" \
      --out "$OUTDIR/layers-$model-$prec-b$batch"
  done
done

if [ "$NGPU" -ge 2 ]; then
  say "2. collect comm (nccl, $NGPU GPUs)"
  dg 120 collect comm --backend nccl --workers "$NGPU" --sizes 4KiB..256MiB --repeats 10 \
    --warmup 3 --out "$OUTDIR/comm-nccl"
  say "3. collect ssgd (resnet50, nccl, $NGPU GPUs)"
  trace=()
  if [ -d "$OUTDIR/layers-resnet50-fp32-b32" ]; then  # the same batch as the S-SGD runs
    trace=(--trace "$OUTDIR/layers-resnet50-fp32-b32")
  fi
  dg 180 collect ssgd --model resnet50 --backend nccl --workers "$NGPU" --batch-size 32 \
    --policies naive,wfbp,bucketed,ddp --iters 10 --warmup 3 "${trace[@]}" \
    --out "$OUTDIR/ssgd-nccl"
else
  say "2. collect comm: one GPU, so no NCCL sweep; gloo loopback instead (CPU processes)"
  dg 120 collect comm --backend gloo --workers 2 --sizes 4KiB..16MiB --repeats 5 \
    --warmup 2 --out "$OUTDIR/comm-gloo"
  say "3. collect ssgd skipped: needs 2 or more GPUs"
fi

say "4. contribution folder + contribute --dry-run"
bounded 60 "contribution folder" "$PY" "$REPO/scripts/gpu_contribution.py" "$OUTDIR"
set +e
dg 120 contribute "$OUTDIR/contribution" --dry-run
DRY=$?
set -e

say "5. figures"
bounded 60 "figures" "$PY" "$REPO/scripts/gpu_contribution.py" "$OUTDIR" --figures-only
say "done in $(( $(date +%s) - START )) s; contribute --dry-run exit $DRY; outputs in $OUTDIR"
if [ "${#SKIPPED[@]}" -gt 0 ]; then
  say "INCOMPLETE: ${#SKIPPED[@]} step(s) skipped or cut short by the ${BUDGET} s budget:"
  printf '   %s\n' "${SKIPPED[@]}" | tee -a "$LOG"
  [ "$DRY" -eq 0 ] && exit 4
fi
exit "$DRY"
