#!/usr/bin/env bash
# Single-GPU planted-cause captures for issues #12 and #14 (docs/captures_2.md), #23-#25 (docs/captures_3.md) and #24's
# trust captures with the helper's steps after the window (docs/captures_4.md), one device call.
#
#   bash examples/captures/single_gpu.sh WORK_DIR "NAME NAME ..."     (default: every name below; or batch3, trust, trust2)
#
# Each capture is one process of examples/captures/capture_run.py writing WORK_DIR/<name>/rank0.*.pt.trace.json.gz
# and WORK_DIR/<name>/truth.json. Under the device tool ($OUT set) every finished capture is appended to
# $OUT/captures<N>.tar at once (a new N past 11 MB) (so a call cut short still returns what was done), and the log goes to $OUT/log.txt.
# CAP_EXTRA is appended to every capture_run.py call (CPU dry run:
#   CAP_EXTRA="--vocab 1000 --max-length 64 --num-workers 0 --dtype fp32 --active 2 --ref-steps 2").
# CALL_LIMIT_S (default 560): a capture is not started when fewer than its own time limit is left.
set -u
WORK=${1:-/tmp/captures}
ALL="noise_a noise_b item_loop fp32_math unfused_adamw grad_ckpt torch_save pinned small_batch pageable compile_off compile_on recompile"
BATCH3="blame_release_memory blame_no_cache_alloc blame_host_python blame_host_pause blame_masked_select blame_module_hooks blame_release_memory_stack trust_host_default trust_host_min trust_host_full trust_gpu_default trust_gpu_min trust_gpu_full trust_reduce_overhead"
# batch 4 (#24, docs/captures_4.md): the six trust_* captures again, the helper timing 3 steps after the window
# ("trust"; "trust2": each twice, the second named <name>_r2, for the process-to-process spread)
TRUST="trust_host_default trust_host_min trust_host_full trust_gpu_default trust_gpu_min trust_gpu_full"
WHAT=${2:-$ALL}
[ "$WHAT" = batch3 ] && WHAT=$BATCH3
[ "$WHAT" = trust ] && WHAT=$TRUST
[ "$WHAT" = trust2 ] && WHAT="$TRUST $(for n in $TRUST; do printf '%s_r2 ' "$n"; done)"
CALL_LIMIT_S=${CALL_LIMIT_S:-560}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
versions() { $PY -c "import torch, transformers, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'gpus', torch.cuda.device_count())" 2>&1; }
log_environment versions

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
    # --- batch 3 (issues #23, #24; docs/captures_3.md) ---
    blame_release_memory) WHATLINE="baseline + gc.collect() and torch.cuda.empty_cache() inside record_function('release_memory') after every step"
      ARGS="--release-memory" ;;
    blame_release_memory_stack) WHATLINE="blame_release_memory captured with with_stack=True (Python frames name capture_run.py's lines)"
      ARGS="--release-memory --with-stack --active 4" ;;
    blame_no_cache_alloc) WHATLINE="baseline with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every allocation a cudaMalloc, every free a cudaFree), nothing annotated; without-cause times from another process without it"
      ARGS="--without-cause-json $WORK/blame_no_cache_alloc.ref.json"; ENVS="PYTORCH_NO_CUDA_MEMORY_CACHING=1" ;;
    blame_host_python) WHATLINE="baseline + build_masks(): a pure-Python loop over the batch's tokens inside the step, not annotated; captured with_stack=True"
      ARGS="--host-python --with-stack --active 4" ;;
    blame_host_pause) WHATLINE="baseline + log_metrics(): a JSON line written and fsync'ed then time.sleep(0.1) after every step, nothing recorded around it"
      ARGS="--host-pause-ms 100" ;;
    blame_masked_select) WHATLINE="LoRA on right-padded batches (8 x 512, 256-512 real tokens a row): the loss on logits[labels != -100] (a nonzero sync, a new shape every step); without: cross_entropy(ignore_index=-100)"
      ARGS="--pad-lengths 512 --masked-loss" ;;
    blame_module_hooks) WHATLINE="baseline + a forward hook on every module computing activation_stats (mean, std, abs-max of the output, kept on the GPU)"
      ARGS="--module-hooks" ;;
    trust_host_full|trust_host_default|trust_host_min)
      WHATLINE="host-bound: LoRA baseline at batch 2 (1024 tokens a step), profiled with ${1#trust_host_} options"
      ARGS="--batch-size 2 --skip-first 5 $(opts_for "$1")" ;;
    trust_gpu_full|trust_gpu_default|trust_gpu_min)
      WHATLINE="GPU-bound: 4 layers, full fine-tune in bf16, batch 16 x 1024 tokens, profiled with ${1#trust_gpu_} options"
      ARGS="--layers 4 --train full --batch-size 16 --max-length 1024 --skip-first 5 $(opts_for "$1")" ;;
    trust_reduce_overhead) WHATLINE="forward-only (no_grad, eval) 2-layer model, batch 8 x 256, torch.compile(mode='reduce-overhead'): CUDA graph replays; without cause: the same forward eager"
      ARGS="--infer --compile-mode reduce-overhead --pad-lengths 256 --skip-first 5" ;;
    *) return 1 ;;
  esac
}
opts_for() { case $1 in *_full) echo "--with-stack --active 4" ;; *_default) echo "" ;; *_min) echo "--no-record-shapes --no-profile-memory" ;; esac; }
limit_for() { case $1 in recompile|recompile_4steps) echo 300 ;; compile_on|trust_reduce_overhead) echo 180 ;; unfused_adamw|grad_ckpt) echo 120 ;; *) echo 90 ;; esac; }

for name in $WHAT; do
  ENVS=""
  base=${name%_r[0-9]}  # <name>_r2: the same capture again, in another process
  args_for "$base" || { echo "== unknown capture $name" | tee -a "$LOG"; continue; }
  limit=$(limit_for "$base")
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  if [ "$left" -lt "$limit" ] && [ "$left" -lt 150 ]; then
    echo "== $name skipped: $left s left" | tee -a "$LOG"; continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name ($(elapsed) s, limit $limit s): $ARGS" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  if [ "$name" = blame_no_cache_alloc ]; then  # the same job without the setting, no profiler: the without-cause times
    # shellcheck disable=SC2086
    timeout 60 $PY "$HERE/capture_run.py" --out "$WORK" --name "$name" --ref-only-json "$WORK/$name.ref.json" ${CAP_EXTRA:-} 2>&1 \
      | grep -v -e '^USDT' -e 'Memory block of unknown size' >>"$LOG"
  fi
  # shellcheck disable=SC2086
  env $ENVS timeout "$limit" $PY "$HERE/capture_run.py" --out "$WORK" --name "$name" --what "$WHATLINE" $ARGS ${CAP_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' >>"$LOG"
  grep "^TRUTH $name" "$LOG" | tail -n 1
  pack "$name"
done
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)"
