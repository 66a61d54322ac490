#!/usr/bin/env bash
# Single-GPU planted-cause captures for issues #12 and #14 (docs/captures_2.md), one device call.
#
#   bash examples/captures/single_gpu.sh WORK_DIR "NAME NAME ..."     (default: every name below)
#
# Each capture is one process of examples/captures/capture_run.py writing WORK_DIR/<name>/rank0.*.pt.trace.json.gz
# and WORK_DIR/<name>/truth.json. Under the device tool ($OUT set) every finished capture is appended to
# $OUT/captures.tar at once (so a call cut short still returns what was done), and the log goes to $OUT/log.txt.
# CAP_EXTRA is appended to every capture_run.py call (CPU dry run:
#   CAP_EXTRA="--vocab 1000 --max-length 64 --num-workers 0 --dtype fp32 --active 2 --ref-steps 2").
# CALL_LIMIT_S (default 560): a capture is not started when fewer than its own time limit is left.
set -u
WORK=${1:-/tmp/captures}
ALL="noise_a noise_b item_loop fp32_math unfused_adamw grad_ckpt torch_save pinned small_batch pageable compile_off compile_on recompile"
WHAT=${2:-$ALL}
CALL_LIMIT_S=${CALL_LIMIT_S:-560}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$WORK"
LOG=${OUT:+$OUT/log.txt}
LOG=${LOG:-$WORK/log.txt}
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }

{
  echo "== environment $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  $PY -c "import torch, transformers, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'gpus', torch.cuda.device_count())" 2>&1
} | tee -a "$LOG"

args_for() {  # name -> capture_run.py switches and a one-line description
  case $1 in
    noise_a|noise_b|pageable|compile_off)
      WHATLINE="baseline (2-layer Qwen2.5-1.5B-shaped LoRA, bf16, packed 512, bs 8, pageable, num_workers 2); noise-only or the 'before' of a pair"
      ARGS="" ;;
    pinned) WHATLINE="baseline + pin_memory=True (one change vs pageable)"; ARGS="--pin-memory" ;;
    small_batch) WHATLINE="baseline with batch 4 instead of 8 (faster step, lower tokens/s)"; ARGS="--batch-size 4" ;;
    compile_on) WHATLINE="baseline + torch.compile(model) (one change vs compile_off)"; ARGS="--compile" ;;
    item_loop) WHATLINE="baseline + per-parameter norm logging with .item() every step (a sync storm)"; ARGS="--item-loop" ;;
    torch_save) WHATLINE="baseline + torch.save(model.state_dict()) in step 7 inside record_function('save_checkpoint')"; ARGS="--save-at-step 7" ;;
    fp32_math) WHATLINE="baseline in fp32 weights and math, no autocast, TF32 off"; ARGS="--dtype fp32 --no-tf32" ;;
    grad_ckpt) WHATLINE="LoRA with gradient checkpointing on, batch 2, 6 layers (mostly free memory)"
      ARGS="--grad-ckpt --batch-size 2 --layers 6 --active 4" ;;
    unfused_adamw) WHATLINE="full fine-tune, AdamW(foreach=False, fused=False), 12-layer Qwen2.5-0.5B shape (146 parameter tensors)"
      ARGS="--shape 0.5b --layers 12 --train full --optim-foreach false --optim-fused false --batch-size 4 --active 4" ;;
    recompile) WHATLINE="torch.compile(dynamic=False): profiled step 2 gets a new padded length (320, recompiles), step 3 a length seen before (256); unprofiled steps 4 (384, recompiles) and 5 (320)"
      ARGS="--compile --compile-dynamic-false --pad-lengths 256,256,320,256,384,320 --skip-first 1 --warmup 1 --active 2 --ref-steps 2" ;;
    recompile_4steps) WHATLINE="torch.compile(dynamic=False) with a new padded length in profiled steps 2, 3, 5 (and 6 after the window); step 4 repeats a length (12 MB gz: not a fixture)"
      ARGS="--compile --compile-dynamic-false --pad-lengths 256,256,320,384,320,448,512,384 --skip-first 1 --warmup 1 --active 4 --ref-steps 2" ;;
    *) return 1 ;;
  esac
}
limit_for() { case $1 in recompile|recompile_4steps) echo 300 ;; compile_on) echo 180 ;; unfused_adamw|grad_ckpt) echo 120 ;; *) echo 90 ;; esac; }

for name in $WHAT; do
  args_for "$name" || { echo "== unknown capture $name" | tee -a "$LOG"; continue; }
  limit=$(limit_for "$name")
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  if [ "$left" -lt "$limit" ] && [ "$left" -lt 150 ]; then
    echo "== $name skipped: $left s left" | tee -a "$LOG"; continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name ($(elapsed) s, limit $limit s): $ARGS" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  # shellcheck disable=SC2086
  timeout "$limit" $PY "$HERE/capture_run.py" --out "$WORK" --name "$name" --what "$WHATLINE" $ARGS ${CAP_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' >>"$LOG"
  grep "^TRUTH $name" "$LOG" | tail -n 1
  if [ -n "${OUT:-}" ] && [ -f "$WORK/$name/truth.json" ]; then
    tar -C "$WORK" -rf "$OUT/captures.tar" "$name"
  fi
done
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)"
