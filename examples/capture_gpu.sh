#!/usr/bin/env bash
# Make every capture of docs/captures.md in one go on a GPU machine, in order of importance.
#
#   bash examples/capture_gpu.sh [WORK_DIR] [WHAT]
#
# WHAT: "all" (default), "small" (fixtures + demos + JAX), "bench" (the big benchmark trace only), or a
# space-separated list of capture names (gpu_seed gpu_fixed gpu_dataloader_slow gpu_item_sync seed fixed
# ref_seed ref_fixed jax bench; item_b16 nolog_b16 only when named). Traces land in WORK_DIR mirroring the repo (tests/data/..., demo_logs/..., bench/traces/...);
# when $OUT is set (the device tool), they are also packed into $OUT as flat files:
#   fixtures.tar (tests/data/gpu_* + the JAX XPlane), demo_seed.tar, demo_fixed.tar,
#   bench.pt.trace.json.gz, summary.jsonl, log.txt.
# A step-time table is printed last. LORA_EXTRA_ARGS is appended to every lora_finetune.py call
# (for a CPU dry run: LORA_EXTRA_ARGS="--dtype fp32 --max-length 32").
set -u
WORK=${1:-/tmp/llmdiag_captures}
WHAT=${2:-all}
[ "$WHAT" = all ] && WHAT="gpu_seed gpu_fixed gpu_dataloader_slow gpu_item_sync seed fixed ref_seed ref_fixed jax bench"
[ "$WHAT" = small ] && WHAT="gpu_seed gpu_fixed gpu_dataloader_slow gpu_item_sync seed fixed jax"
BENCH_DEADLINE_S=${BENCH_DEADLINE_S:-330}   # start the bench capture only if this much time has not passed
CALL_LIMIT_S=${CALL_LIMIT_S:-570}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TOKENIZERS_PARALLELISM=false
mkdir -p "$WORK"
SUMMARY=$WORK/summary.jsonl
LOG=${OUT:+$OUT/log.txt}
LOG=${LOG:-$WORK/log.txt}
: >"$SUMMARY"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
want() { case " $WHAT " in *" $1 "*) return 0 ;; esac; return 1; }

{
echo "== environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
$PY - <<'EOF' 2>&1
import importlib, platform
out = [f"python {platform.python_version()}"]
for m in ("torch", "transformers", "jax", "jaxlib", "numpy"):
    try:
        out.append(f"{m} {importlib.import_module(m).__version__}")
    except Exception as e:  # noqa: BLE001
        out.append(f"{m} missing ({type(e).__name__})")
import torch
out.append(f"cuda {torch.version.cuda} device {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
print("; ".join(out))
EOF
} 2>&1 | tee -a "$LOG"

lora() {  # name timeout_s out_dir run args...
  local name=$1 limit=$2 out=$3 run=$4; shift 4
  want "$name" || return 0
  echo "== $name ($(elapsed) s): lora_finetune.py --out $out --run $run $*" | tee -a "$LOG"
  rm -rf "${out:?}/$run"
  timeout "$limit" $PY "$HERE/lora_finetune.py" --out "$out" --run "$run" "$@" ${LORA_EXTRA_ARGS:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' | tee -a "$LOG" | tee "$WORK/$name.out" | grep -v '^SUMMARY' | tail -n 14
  grep '^SUMMARY ' "$WORK/$name.out" | sed "s/^SUMMARY /{\"capture\": \"$name\", \"s\": /; s/\$/}/" >>"$SUMMARY"
}

T=$WORK/tests/data
D=$WORK/demo_logs
# (c) small fixtures: 2 layers, record_shapes (and memory) on
lora gpu_seed 120 "$T" gpu_seed --layers 2 --profile-from-step0 --active-steps 4
lora gpu_fixed 120 "$T" gpu_fixed --layers 2 --pin-memory --packing --batch-size 8 --num-workers 2
lora gpu_dataloader_slow 120 "$T" gpu_dataloader_slow --layers 2 --slow-collate-ms 150 --pin-memory --packing
# gpu_item_sync = gpu_fixed + --log-item, so the two differ only by the host syncs
lora gpu_item_sync 120 "$T" gpu_item_sync --layers 2 --log-item --pin-memory --packing --batch-size 8 --num-workers 2
# (a) and (b): the full 28-layer model
lora seed 180 "$D" seed_lora_qwen1.5b --profile-from-step0 --active-steps 4
lora fixed 180 "$D" fixed_lora_qwen1.5b --pin-memory --packing --batch-size 8 --num-workers 2

# unprofiled references (step times without profiler overhead; no trace kept)
lora ref_seed 150 "$WORK/ref" seed --no-profile --steps 12
lora ref_fixed 150 "$WORK/ref" fixed --no-profile --steps 12 --pin-memory --packing --batch-size 8 --num-workers 2
# explorations (only when named): the sync cost at a larger batch
lora item_b16 120 "$WORK/explore" item_b16 --layers 2 --log-item --pin-memory --packing --batch-size 16 --num-workers 2
lora nolog_b16 120 "$WORK/explore" nolog_b16 --layers 2 --pin-memory --packing --batch-size 16 --num-workers 2

# (e) JAX on the GPU -> XPlane
if want jax; then
  echo "== jax ($(elapsed) s)" | tee -a "$LOG"
  rm -rf "$T/xplane_jax_gpu" "$D/jax_gpu_xplane"
  timeout 150 $PY "$HERE/jax_train_xplane.py" --logdir "$T/xplane_jax_gpu" ${JAX_EXTRA_ARGS:-} 2>&1 | tee -a "$LOG" | tee "$WORK/jax.out" | tail -n 5
  grep '^SUMMARY ' "$WORK/jax.out" | sed 's/^SUMMARY /{"capture": "jax", "s": /; s/$/}/' >>"$SUMMARY"
  mkdir -p "$D/jax_gpu_xplane" && cp -r "$T/xplane_jax_gpu/plugins" "$D/jax_gpu_xplane/" 2>/dev/null
fi

pack() {  # tarname paths...
  local tarname=$1; shift
  [ -n "${OUT:-}" ] || return 0
  local have=()
  for p in "$@"; do [ -e "$WORK/$p" ] && have+=("$p"); done
  [ ${#have[@]} -gt 0 ] && tar -C "$WORK" -cf "$OUT/$tarname" "${have[@]}" && ls -l "$OUT/$tarname" | tee -a "$LOG"
}
pack fixtures.tar tests/data/gpu_seed tests/data/gpu_fixed tests/data/gpu_dataloader_slow tests/data/gpu_item_sync \
  tests/data/xplane_jax_gpu demo_logs/jax_gpu_xplane
pack demo_seed.tar demo_logs/seed_lora_qwen1.5b
pack demo_fixed.tar demo_logs/fixed_lora_qwen1.5b
pack explore.tar explore

# (d) the benchmark trace: full model, 6 active steps, shapes + memory + stacks; fall back if > 16 MiB gz
if want bench; then
  if [ "$(elapsed)" -gt "$BENCH_DEADLINE_S" ]; then
    echo "== bench skipped: $(elapsed) s used, deadline $BENCH_DEADLINE_S s" | tee -a "$LOG"
  else
    for variant in "6 --with-stack" "4 --with-stack" "6 --no-with-stack"; do
      set -- $variant; n=$1; shift
      left=$(( CALL_LIMIT_S - $(elapsed) ))
      [ "$left" -lt 60 ] && { echo "== bench: only $left s left, stop" | tee -a "$LOG"; break; }
      lora bench "$left" "$WORK/bench" traces --active-steps "$n" --steps $((n + 4)) "$@"
      f=$(ls "$WORK"/bench/traces/rank0.*.pt.trace.json.gz 2>/dev/null | head -n 1)
      [ -n "$f" ] || continue
      size=$(stat -c %s "$f")
      echo "== bench variant '$variant': $size bytes gz" | tee -a "$LOG"
      if [ "$size" -le $((16 * 1024 * 1024 - 65536)) ]; then
        mkdir -p "$WORK/bench/final" && cp "$f" "$WORK/bench/final/lora_qwen1.5b_6steps.pt.trace.json.gz"
        [ -n "${OUT:-}" ] && cp "$f" "$OUT/bench.pt.trace.json.gz"
        break
      fi
    done
  fi
fi
[ -n "${OUT:-}" ] && cp "$SUMMARY" "$OUT/summary.jsonl"

echo "== summary ($(elapsed) s)"
$PY - "$SUMMARY" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'capture':22s} {'steps':>5s} {'active':>12s} {'host ms per step (active marked *)':60s} {'MiB gz':>7s}")
for r in rows:
    s = r["s"]
    if r["capture"] == "jax":
        print(f"{'jax':22s} {len(s['host_ms']):5d} {'all':>12s} {' '.join(f'{v:.1f}' for v in s['host_ms'])[:60]:60s} "
              f"{sum(s['files'].values()) / 2**20:7.2f}  {s['device']} jax {s['jax']}")
        continue
    act = set(s["active_steps"])
    ms = " ".join(f"{v:.0f}{'*' if i in act else ''}" for i, v in enumerate(s["host_ms"]))
    gz = sum(s["trace_bytes"]) / 2**20
    sel = sorted(act) or list(range(min(3, s["steps"] - 1), s["steps"]))  # unprofiled: steps 3..
    med = statistics.median([s["gpu_ms"][i] for i in sel]) if s["gpu_ms"][0] is not None else float("nan")
    print(f"{r['capture']:22s} {s['steps']:5d} {str(sorted(act)):>12s} {ms[:60]:60s} {gz:7.2f}  med gpu {med:.1f} ms  "
          f"tok/step {statistics.mean(s['tokens_real']):.0f}/{statistics.mean(s['tokens_slots']):.0f}")
EOF
