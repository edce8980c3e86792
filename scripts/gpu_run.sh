#!/usr/bin/env bash
# One prepared run on a lent GPU (issue 11): calibrate the device, validate full-size models against it,
# and time one real model op by op.  What it makes goes to $OUT (default ./gpu-out), seven files: info.txt
# (nvidia-smi, versions), calibration.yaml (hardware/calibrations/ once committed), validation.md and
# validation.json (docs/validation-<gpu>.md), validate.log, roofline.json (llama-3.1-8b --measure) and
# run.log.  Each stage has its own time limit, so one slow stage cannot cost the others; validate.py
# writes its JSON after every case, so a stage cut short keeps what it measured (re-render the page
# with `scripts/validate.py --from-json`).
# Usage: bash scripts/gpu_run.sh   (DEVICE=cpu and VALIDATE_ARGS="--size shrunk --limit 1" try it on a CPU;
# wheels in .whl/ are installed into /tmp/site first, for a machine that has no package index.)
set -u
OUT=${OUT:-gpu-out}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version \
    --format=csv 2>&1
  python3 - 2>&1 <<'PY'
import platform, torch, transformers, pydantic
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "transformers", transformers.__version__, "pydantic", pydantic.__version__)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(p.name, p.total_memory, "bytes;", p.multi_processor_count, "SMs; L2", p.L2_cache_size)
    print("mem_get_info (free, total):", torch.cuda.mem_get_info())
PY
} > "$OUT/info.txt"
cat "$OUT/info.txt"
cal="$OUT/calibration.yaml"
echo "== calibrate $(date +%T)"
timeout "${CAL_S:-170}" python3 -m archcalc calibrate --device "$DEVICE" --out "$cal" > "$OUT/run.log" 2>&1 \
  || { echo "full calibration failed or timed out: quick grid"; tail -5 "$OUT/run.log";
       timeout 90 python3 -m archcalc calibrate --device "$DEVICE" --quick --out "$cal" >> "$OUT/run.log" 2>&1; }
tail -40 "$OUT/run.log"
echo "== validate $(date +%T)"
# shellcheck disable=SC2086
timeout "${VALIDATE_S:-270}" python3 scripts/validate.py --device "$DEVICE" --calibration "$cal" --runs 1 \
  --json "$OUT/validation.json" --out "$OUT/validation.md" ${VALIDATE_ARGS:-} > "$OUT/validate.log" 2>&1
echo "validate exit $?"; grep -E "^(Traceback|[A-Za-z]*Error:)" "$OUT/validate.log" | sort | uniq -c | head
echo "== roofline --measure $(date +%T)"
[ "${ROOFLINE_S:-40}" = 0 ] || timeout "${ROOFLINE_S:-40}" python3 -m archcalc roofline "${ROOFLINE_MODEL:-llama-3.1-8b}" --gpu "$cal" --measure \
  --device "$DEVICE" --prompt 2048 --batch 1 --json > "$OUT/roofline.json" 2>> "$OUT/run.log"
echo "roofline exit $?"; tail -3 "$OUT/run.log"
echo "== done $(date +%T)"; ls -la "$OUT"
