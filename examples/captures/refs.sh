#!/usr/bin/env bash
# Unprofiled references for the what-if pairs of docs/whatif.md whose before/after runs were never timed without the
# profiler (captures of 2026-11-22, docs/captures.md): the same lora_finetune.py switches with --no-profile, 12 steps.
#
#   bash examples/captures/refs.sh WORK_DIR        (one SUMMARY line per run -> WORK_DIR/refs.jsonl, and $OUT/ when set)
set -u
WORK=${1:-/tmp/refs}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$WORK"
OUTF=$WORK/refs.jsonl
: >"$OUTF"
ref() {  # name timeout_s args...
  local name=$1 limit=$2; shift 2
  echo "== ref $name: lora_finetune.py --no-profile --steps 12 $*"
  timeout "$limit" $PY "$HERE/lora_finetune.py" --out "$WORK/unused" --run "$name" --no-profile --steps 12 "$@" 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' >"$WORK/$name.out"
  grep '^SUMMARY ' "$WORK/$name.out" | sed "s/^SUMMARY /{\"ref\": \"$name\", \"s\": /; s/\$/}/" | tee -a "$OUTF"
  tail -n 3 "$WORK/$name.out"
}
# the 2-layer fixtures (tests/data/gpu_*), switches as in examples/capture_gpu.sh
ref gpu_seed 120 --layers 2
ref gpu_fixed 120 --layers 2 --pin-memory --packing --batch-size 8 --num-workers 2
ref gpu_dataloader_slow 120 --layers 2 --slow-collate-ms 150 --pin-memory --packing
ref gpu_item_sync 120 --layers 2 --log-item --pin-memory --packing --batch-size 8 --num-workers 2
ref gpu_compiled 150 --layers 2 --compile --pin-memory --packing --batch-size 8 --num-workers 2
# the 28-layer demo runs (demo_logs/seed_lora_qwen1.5b, demo_logs/fixed_lora_qwen1.5b)
ref seed_lora_qwen1.5b 150
ref fixed_lora_qwen1.5b 150 --pin-memory --packing --batch-size 8 --num-workers 2
[ -n "${OUT:-}" ] && cp "$OUTF" "$OUT/" && tar -C "$WORK" -cf "$OUT/refs_out.tar" $(cd "$WORK" && ls *.out)
exit 0
