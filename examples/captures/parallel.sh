#!/usr/bin/env bash
# Two-GPU parallelism captures for issue #33, one device call on 2 GPUs.
#
#   bash examples/captures/parallel.sh WORK_DIR "JOB JOB ..."     (default: every job below, most important first)
#
# Each job is one `torchrun --standalone --nproc_per_node $NPROC examples/captures/parallel_run.py` writing
# WORK_DIR/<job>/rank<R>.*.pt.trace.json.gz (one per rank, with distributedInfo) and WORK_DIR/<job>/truth.json:
# the planted loop, its fix and the loop with the communication removed, timed before any profiler ran in the
# process, then the planted loop captured (parallel_run.py's docstring says what each job plants). Under the device
# tool every finished job is appended to $OUT/captures<N>.tar at once (examples/captures/common.sh); the log goes to
# $OUT/log.txt. A job starts only while JOB_MIN_S seconds of CALL_LIMIT_S are left, and runs at most JOB_LIMIT_S.
# PAR_EXTRA is appended to every call (CPU dry run with gloo:
# PAR_EXTRA="--tiny --layers 4 --seq 32 --rounds 1 --block 2 --skip-first 2 --active 3 --time-after 1 --dtype fp32").
# NVLink multicast stays off (the lending machine's rule): NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1 are exported for every job.
set -u
WORK=${1:-/tmp/captures_parallel}
ALL="ddp_per_tensor pipeline tensor_parallel fsdp ddp_accum_no_nosync expert_all_to_all rank0_eval pipeline_unbalanced"
WHAT=${2:-$ALL}
NPROC=${NPROC:-2}
CALL_LIMIT_S=${CALL_LIMIT_S:-520}
JOB_LIMIT_S=${JOB_LIMIT_S:-120}
JOB_MIN_S=${JOB_MIN_S:-45}
HERE=$(cd "$(dirname "$0")" && pwd)
TORCHRUN=${TORCHRUN:-torchrun}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$HERE/../..${PYTHONPATH:+:$PYTHONPATH}"
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
topology_and_versions() {
  nvidia-smi topo -m 2>&1 | head -n 6
  python3 -c "import torch, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None, 'gpus', torch.cuda.device_count())" 2>&1
}
log_environment topology_and_versions

for name in $WHAT; do
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  [ "$left" -lt "$JOB_MIN_S" ] && { echo "== $name skipped: $left s left" | tee -a "$LOG"; continue; }
  limit=$JOB_LIMIT_S
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name ($(elapsed) s, limit $limit s): torchrun --nproc_per_node $NPROC parallel_run.py --job $name ${PAR_EXTRA:-}" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  t0=$(elapsed)
  # shellcheck disable=SC2086
  timeout --kill-after=10 "$limit" $TORCHRUN --standalone --nproc_per_node "$NPROC" "$HERE/parallel_run.py" \
    --out "$WORK" --job "$name" ${PAR_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' -e 'FutureWarning' -e 'all_to_all_single(' >>"$LOG"
  rc=${PIPESTATUS[0]}
  echo "== $name rc $rc in $(( $(elapsed) - t0 )) s" | tee -a "$LOG"
  grep "^TRUTH $name" "$LOG" | tail -n 1 | cut -c1-400
  pack "$name"
done
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)" | tee -a "$LOG"
