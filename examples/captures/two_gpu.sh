#!/usr/bin/env bash
# Two-GPU planted-cause captures for issue #11 (docs/captures_2.md), one device call on 2 GPUs.
#
#   bash examples/captures/two_gpu.sh WORK_DIR "NAME NAME ..."     (default: every name below)
#
# Each capture is one `torchrun --standalone --nproc_per_node $NPROC examples/captures/capture_run.py` job writing
# WORK_DIR/<name>/rank<R>.*.pt.trace.json.gz (one per rank, with distributedInfo) and WORK_DIR/<name>/truth.json
# (every rank's numbers, gathered on rank 0). Under the device tool every finished job is appended to
# $OUT/captures<N>.tar at once (examples/captures/common.sh); the log goes to $OUT/log.txt. CAP_EXTRA is appended to every call (CPU dry run with
# gloo: CAP_EXTRA="--vocab 1000 --max-length 64 --num-workers 0 --dtype fp32 --active 2 --ref-steps 2").
# NVLink multicast stays off (the lending machine's rule): NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1 are exported for every job.
set -u
WORK=${1:-/tmp/captures2}
ALL="ddp_straggler ddp_slow_transport fsdp ddp_fast_transport ddp_fast_transport_b ddp_balanced"
WHAT=${2:-$ALL}
[ "$WHAT" = batch3 ] && WHAT="ddp_intermittent_straggler ddp_intermittent_noise"
NPROC=${NPROC:-2}
CALL_LIMIT_S=${CALL_LIMIT_S:-560}
HERE=$(cd "$(dirname "$0")" && pwd)
TORCHRUN=${TORCHRUN:-torchrun}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=4
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
topology_and_versions() {
  nvidia-smi topo -m 2>&1 | head -n 6
  python3 -c "import torch, transformers, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None, 'transformers', transformers.__version__, 'gpus', torch.cuda.device_count())" 2>&1
}
log_environment topology_and_versions

for name in $WHAT; do
  ENVS=""
  case $name in
    ddp_straggler)
      WHATLINE="DDP, LoRA baseline model; rank 1 gets 2x the tokens per step (packed rows of 512 vs 256 tokens, batch 8 each): rank 1 is the straggler, rank 0 waits in the all-reduce"
      ARGS="--ddp --rank-max-length 256,512 --active 5" ;;
    ddp_slow_transport)
      WHATLINE="DDP training the decoder layers (93.6 M parameters, 187 MB of bf16 gradients a step), NCCL over sockets on loopback (P2P, SHM and IB off): a slow, exposed all-reduce"
      ENVS="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
      ARGS="--ddp --train layers --active 5" ;;
    ddp_fast_transport)
      WHATLINE="the same job as ddp_slow_transport with NCCL's default transport (the 'after' of the slow-transport pair)"
      ARGS="--ddp --train layers --active 5" ;;
    ddp_fast_transport_b)
      WHATLINE="ddp_fast_transport again in another process (a noise-only twin: job compare/check calibration)"
      ARGS="--ddp --train layers --active 5" ;;
    ddp_balanced)
      WHATLINE="ddp_straggler's job with its tokens balanced: both ranks pack 384-token rows (3072 tokens each, the same 6144 a job step as ddp_straggler's 2048 + 4096)"
      ARGS="--ddp --rank-max-length 384,384 --active 5" ;;
    fsdp)
      WHATLINE="FSDP2 (fully_shard per decoder layer + root) training the decoder layers, equal tokens per rank"
      ARGS="--fsdp --train layers --active 5" ;;
    ddp_intermittent_straggler)
      WHATLINE="DDP, LoRA baseline; rank 1 spends 400 ms in tokenise_batch() (pure Python) in recorded steps 5 and 8 only (and reference steps at the same offsets): an intermittent straggler, rank 0 waits in the all-reduce"
      ARGS="--ddp --active 6 --delay-ms 0,400 --delay-steps 5,8" ;;
    ddp_intermittent_noise)
      WHATLINE="ddp_intermittent_straggler's job with nothing planted (the noise-only twin)"
      ARGS="--ddp --active 6" ;;
    *) echo "== unknown capture $name" | tee -a "$LOG"; continue ;;
  esac
  limit=180
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  [ "$left" -lt 60 ] && { echo "== $name skipped: $left s left" | tee -a "$LOG"; continue; }
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name ($(elapsed) s, limit $limit s): $ENVS torchrun --nproc_per_node $NPROC capture_run.py $ARGS" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  # shellcheck disable=SC2086
  env $ENVS timeout "$limit" $TORCHRUN --standalone --nproc_per_node "$NPROC" "$HERE/capture_run.py" \
    --out "$WORK" --name "$name" --what "$WHATLINE" $ARGS ${CAP_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' >>"$LOG"
  grep "^TRUTH $name" "$LOG" | tail -n 1
  pack "$name"
done
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)"
