#!/usr/bin/env bash
# #24 batch 5 (docs/captures_5.md): the profiler's own cost measured with profiled and unprofiled steps interleaved,
# each job x option set in REPS separate processes, one device call.
#
#   bash examples/captures/overhead.sh WORK_DIR "host gpu" REPS
#
# Each process is examples/captures/overhead_run.py (the helper's trace + truth.json). Under the device tool ($OUT set)
# every finished capture is appended to $OUT/captures<N>.tar (a new N past 11 MB) and the log goes to $OUT/log.txt.
# OVH_EXTRA is appended to every call (CPU dry run: OVH_EXTRA="--tiny --vocab 1000 --length 64 --dtype fp32
# --cycles 4 --block 3 --active 2 --time-after 3"); CPUS (default 2-5) pins each process; CALL_LIMIT_S (default 560):
# no process is started with less than LIMIT_S (default 100) left.
set -u
WORK=${1:-/tmp/overhead}
JOBS=${2:-host gpu}
REPS=${3:-3}
OPTSETS=${OPTSETS:-min default full}
# TEARDOWNS: values of TEARDOWN_CUPTI to run each capture under ("-": unset; "1": the name gets _td)
TEARDOWNS=${TEARDOWNS:--}
CPUS=${CPUS:-2-5}
CALL_LIMIT_S=${CALL_LIMIT_S:-560}
LIMIT_S=${LIMIT_S:-100}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
host_and_versions() {
  lscpu 2>&1 | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA|CPU max MHz)'
  $PY -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
}
log_environment host_and_versions
for job in $JOBS; do
  for rep in $(seq 1 "$REPS"); do
    for opts in $OPTSETS; do
     for td in $TEARDOWNS; do
      name="ovh_${job}_${opts}_r${rep}"
      envs=""
      [ "$td" != - ] && { name="${name}_td$td"; envs="TEARDOWN_CUPTI=$td"; }
      left=$(( CALL_LIMIT_S - $(elapsed) ))
      if [ "$left" -lt "$LIMIT_S" ]; then echo "== $name skipped: $left s left" | tee -a "$LOG"; continue; fi
      echo "== $name ($(elapsed) s)" | tee -a "$LOG"
      rm -rf "${WORK:?}/$name"
      # shellcheck disable=SC2086
      env $envs timeout "$LIMIT_S" $PY "$HERE/overhead_run.py" --out "$WORK" --name "$name" --job "$job" --opts "$opts" \
        --cpus "$CPUS" ${OVH_EXTRA:-} 2>&1 | grep -v -e '^USDT' -e 'Memory block of unknown size' -e 'Warning' >>"$LOG"
      grep "^TRUTH $name" "$LOG" | tail -n 1
      pack "$name"
     done
    done
  done
done
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null | tail -n 3
echo "== done ($(elapsed) s)"
