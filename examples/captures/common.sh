# Sourced by the capture drivers (single_gpu.sh, two_gpu.sh, overhead.sh) once WORK is set: the log, the clock, the
# environment header and the packing of each finished capture into $OUT under the device tool.
#   log_environment FN   writes the header to the log, FN (the caller's function) adding its own lines
#   pack NAME            appends WORK/NAME to $OUT/captures<N>.tar once its truth.json exists (a new N past 11 MB, or
#                        when NAME would take the tar past 15 MB: each tar stays under the device tool's 16 MiB a file)
mkdir -p "$WORK"
LOG=${OUT:+$OUT/log.txt}
LOG=${LOG:-$WORK/log.txt}
START=$(date +%s)
TARN=1
elapsed() { echo $(( $(date +%s) - START )); }
log_environment() {
  {
    echo "== environment $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1
    "$1"
  } | tee -a "$LOG"
}
pack() {
  if [ -n "${OUT:-}" ] && [ -f "$WORK/$1/truth.json" ]; then
    if [ -f "$OUT/captures$TARN.tar" ] && [ $(( $(stat -c %s "$OUT/captures$TARN.tar") + $(du -sb "$WORK/$1" | cut -f1) )) -gt 15000000 ]; then
      TARN=$((TARN + 1))  # this capture would take the tar past the 16 MiB a file: it starts the next one
    fi
    tar -C "$WORK" -rf "$OUT/captures$TARN.tar" "$1"
    if [ "$(stat -c %s "$OUT/captures$TARN.tar")" -gt 11000000 ]; then TARN=$((TARN + 1)); fi
  fi
}
