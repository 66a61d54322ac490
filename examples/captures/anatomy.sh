#!/usr/bin/env bash
# Anatomy captures for #37: eight planted causes, each beside its fixed twin, one device call on one GPU.
#
#   bash examples/captures/anatomy.sh WORK_DIR ["NAME NAME ..."]
#
# NAME: a scenario of examples/captures/anatomy_run.py (run with its twin: NAME, then NAME_fixed) or one capture
# (NAME or NAME_fixed). Default: the eight scenarios in order of importance, the compile ones last. Each capture is one
# process writing WORK_DIR/<name>/rank0.*.pt.trace.json.gz and WORK_DIR/<name>/truth.json; under the device tool ($OUT
# set) every finished capture is appended to $OUT/captures<N>.tar at once (a new N past 11 MB), the log goes to
# $OUT/log.txt, with one TRUTH line a capture and the pairs' measured savings at the end.
# The GPU is the caller's (CUDA_VISIBLE_DEVICES); CPUS (default: the half of the cores that goes with that GPU's parity,
# none under 4 cores) pins every process with taskset. CALL_LIMIT_S (default 480): a pair is not started when less than
# both its estimates is left, and no process runs past the limit. ANA_EXTRA is appended to every call (CPU dry run:
#   ANA_EXTRA="--tiny --pristine-blocks 3 --block 2 --skip-first 3 --active 4 --time-after 2 --warmup-steps 1
#   --compile-backend aot_eager").
set -u
WORK=${1:-/tmp/anatomy}
ORDER="attn_math lora_small_batch moe_uneven big_vocab_loss fp32_part autocast_casts decode compile_breaks"
WHAT=${2:-$ORDER}
CALL_LIMIT_S=${CALL_LIMIT_S:-480}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$HERE/../..${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${CPUS+x}" ]; then
  n=$(nproc)
  gpu=${CUDA_VISIBLE_DEVICES:-0}
  gpu=${gpu%%,*}
  CPUS=""
  if [ "$n" -ge 4 ]; then
    half=$((n / 2))
    case $gpu in *[13579]) CPUS="$half-$((n - 1))" ;; *) CPUS="0-$((half - 1))" ;; esac
  fi
fi
PIN=""
[ -n "$CPUS" ] && command -v taskset >/dev/null && PIN="taskset -c $CPUS"
# shellcheck source=examples/captures/common.sh
. "$HERE/common.sh"
versions() {
  echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-} CPUS=$CPUS nproc=$(nproc)"
  lscpu 2>&1 | grep -E '^(Model name|CPU\(s\)|NUMA node)'
  $PY -c "import torch, transformers, platform, importlib.util as u; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', u.find_spec('peft') is not None, 'gpus', torch.cuda.device_count())" 2>&1
}
log_environment versions

# seconds a capture is expected to take on an H200 (process start, imports, build, steps, trace) and its hard limit
estimate() { case $1 in compile_breaks) echo 75 ;; compile_breaks_fixed) echo 55 ;; decode_fixed) echo 60 ;; autocast_casts*) echo 25 ;; *) echo 20 ;; esac; }
limit_for() { case $1 in compile_breaks*) echo 170 ;; decode_fixed) echo 150 ;; *) echo 75 ;; esac; }

run_one() {  # capture name, extra switches
  local name=$1 scen=${1%_fixed} fixed="" left limit
  shift
  [ "$name" != "$scen" ] && fixed="--fixed"
  case " $ORDER " in *" $scen "*) ;; *) echo "== unknown capture $name" | tee -a "$LOG"; return 1 ;; esac
  left=$(( CALL_LIMIT_S - $(elapsed) ))
  limit=$(limit_for "$name")
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -lt "$(estimate "$name")" ]; then echo "== $name skipped: $left s left" | tee -a "$LOG"; return 1; fi
  echo "== $name ($(elapsed) s, limit $limit s)" | tee -a "$LOG"
  rm -rf "${WORK:?}/$name"
  # shellcheck disable=SC2086
  timeout "$limit" $PIN $PY "$HERE/anatomy_run.py" --out "$WORK" --scenario "$scen" $fixed "$@" ${ANA_EXTRA:-} 2>&1 \
    | grep -v -e '^USDT' -e 'Memory block of unknown size' >>"$LOG"
  grep "^TRUTH $name:" "$LOG" | tail -n 1
  [ -f "$WORK/$name/truth.json" ] || { echo "== $name: no truth.json (see the log)" | tee -a "$LOG"; return 1; }
  pack "$name"
}

for item in $WHAT; do
  case " $ORDER " in
    *" $item "*)  # a scenario: the planted capture, then its twin, only when both fit
      need=$(( $(estimate "$item") + $(estimate "${item}_fixed") ))
      left=$(( CALL_LIMIT_S - $(elapsed) ))
      if [ "$left" -lt "$need" ]; then echo "== $item and its twin skipped: $left s left, $need s needed" | tee -a "$LOG"; continue; fi
      run_one "$item" || continue
      if ! run_one "${item}_fixed" && [ "$item" = decode ]; then  # CUDA graphs failed: the batch-16 twin instead
        run_one decode_fixed --decode-fix batch
      fi ;;
    *) run_one "$item" ;;
  esac
done

summary() {  # the pairs' measured savings, from the truth files
  $PY - "$WORK" <<'EOF'
import json, os, sys
work = sys.argv[1]
for name in sorted(os.listdir(work)):
    path, twin = os.path.join(work, name, "truth.json"), os.path.join(work, f"{name}_fixed", "truth.json")
    if name.endswith("_fixed") or not (os.path.isfile(path) and os.path.isfile(twin)):
        continue
    a, b = (json.load(open(p)) for p in (path, twin))
    key = "median_per_token_us" if b["compare"] == "per token" else "median_step_ms"
    pa, pb = a["pristine"][key], b["pristine"][key]
    print(f"PAIR {name}: {key} {pa} -> {pb}, saving {1 - pb / pa:+.3f} of the planted; "
          f"profiled window {a['profiled']['window_median_ms']} / {b['profiled']['window_median_ms']} ms")
EOF
}
summary 2>&1 | tee -a "$LOG"
[ -n "${OUT:-}" ] && ls -l "$OUT"
du -sh "$WORK"/* 2>/dev/null
echo "== done ($(elapsed) s)" | tee -a "$LOG"
