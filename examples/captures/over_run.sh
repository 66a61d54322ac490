#!/usr/bin/env bash
# #34 (docs/capturing.md, "Over the run"): one run of RUN_STEPS steps captured with windows every EVERY steps and
# triggered windows, three planted changes, and the same run with no profiler in a process of its own (the wall-time
# reference), in the order ORDER (default: profiled, then none: the capture is the run's point, the reference can be rerun alone)
# while time allows. The first process calibrates the batch
# (over_run.py --batch 0 --target-step-ms TARGET_MS, default 70) and the others run that batch (BATCH set: all of them).
#
#   bash examples/captures/over_run.sh WORK_DIR
#
# Each process is examples/captures/over_run.py (truth.json; the profiled one also its windows). Under the device tool
# ($OUT set) the log goes to $OUT/log.txt and the captures to $OUT/over_run.tar, split into parts of 15 MiB
# (over_run.tar.part-aa, -ab...; `cat over_run.tar.part-* | tar -x`): the first profiled run whole, the others' truth only.
# OVR_EXTRA is appended to every call (CPU dry run: OVR_EXTRA="--tiny --steps 60 --every 10 --seq-change 20
# --thrash 35 --slow 47 --slow-steps 4 --slow-ms 60 --length 64 --batch 4"). CPUS (default 2-9) pins each process;
# CALL_LIMIT_S (default 470): a process starts only when the time left exceeds the longest one so far
# (LIMIT_S, default 240, before the first has run), and is stopped after LIMIT_S x 1.5 or at the call's limit.
set -u
WORK=${1:-/tmp/over_run}
ORDER=${ORDER:-profiled none}
BATCH=${BATCH:-0}
TARGET_MS=${TARGET_MS:-70}
CPUS=${CPUS:-2-9}
CALL_LIMIT_S=${CALL_LIMIT_S:-470}
LIMIT_S=${LIMIT_S:-240}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
host_and_versions() {
  lscpu 2>&1 | grep -E '^(Model name|CPU\(s\)|NUMA)'
  $PY -c "import torch, transformers, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" 2>&1
}
log_environment host_and_versions
# the windows' summary process reads traces with msgspec: a wheel carried in build/wheels when this Python lacks it
if ! $PY -c "import msgspec" 2>/dev/null; then
  for whl in build/wheels/msgspec-*.whl; do
    [ -f "$whl" ] && $PY -m pip install -q --no-index --no-deps "$whl" 2>&1 | tail -n 2 | tee -a "$LOG"
  done
  $PY -c "import msgspec; print('msgspec', msgspec.__version__)" 2>&1 | tee -a "$LOG"
fi
longest=0
n_none=0
n_prof=0
for mode in $ORDER; do
  if [ "$mode" = none ]; then n_none=$((n_none + 1)); name="none_r$n_none"; else n_prof=$((n_prof + 1)); name="profiled_r$n_prof"; fi
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  need=$(( longest > 0 ? longest : LIMIT_S ))  # the same job: no longer than the longest so far
  cap=$(( left - 3 < LIMIT_S * 3 / 2 ? left - 3 : LIMIT_S * 3 / 2 ))
  if [ "$left" -lt "$need" ]; then echo "== $name skipped: $left s left, $need s needed" | tee -a "$LOG"; continue; fi
  echo "== $name ($(elapsed) s)" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout "$cap" $PY "$HERE/over_run.py" --out "$WORK" --name "$name" --mode "$mode" --cpus "$CPUS" \
    --batch "$BATCH" --target-step-ms "$TARGET_MS" ${OVR_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' -e 'acc_events' -e '_warn_once' >>"$LOG"
  if [ "$BATCH" = 0 ]; then  # the batch the first process chose, for all the others
    BATCH=$(grep "^TRUTH $name" "$LOG" | tail -n 1 | sed -n 's/.* batch=\([0-9]*\).*/\1/p')
    BATCH=${BATCH:-0}
  fi
  took=$(( $(date +%s) - t0 ))
  [ "$took" -gt "$longest" ] && longest=$took
  grep "^TRUTH $name" "$LOG" | tail -n 1
done
if [ -n "${OUT:-}" ]; then
  # the first profiled run whole (its windows and truth), the other runs' truth.json only
  members=""
  [ -d "$WORK/profiled_r1" ] && members="profiled_r1"
  for d in "$WORK"/none_r* "$WORK"/profiled_r[2-9]; do
    [ -f "$d/truth.json" ] && members="$members $(basename "$d")/truth.json"
  done
  # shellcheck disable=SC2086
  [ -n "$members" ] && tar -C "$WORK" -cf - $members | split -b 15m - "$OUT/over_run.tar.part-"
  ls -l "$OUT"
fi
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)"
