#!/usr/bin/env bash
# On a machine with NVIDIA GPUs and torch: checks GPU slots end to end. A local cluster
# whose agent finds the GPUs itself (no --slots); `det agent list` must offer one cuda
# slot per GPU nvidia-smi lists; then one single-GPU trial per GPU plus one more, all at
# once (examples/gpu_check): each must see exactly its own GPU (CUDA_VISIBLE_DEVICES) and
# compute on it, and no two may hold one GPU at the same time (the extra one waits).
# A trial on every GPU together follows when there are several. Usage:
#   scripts/gpu-check.sh            (python3 with torch and pydet's dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD:$PWD/harness${PYTHONPATH:+:$PYTHONPATH}"
export DET_MASTER=127.0.0.1:${GPU_CHECK_PORT:-18085}
data=$(mktemp -d)
det() { "$PY" -m pydet.cli "$@"; }
trap 'det deploy local cluster-down --data-dir "$data" >/dev/null 2>&1 || true; rm -rf "$data"' EXIT

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
echo "nvidia-smi lists $gpus GPU(s)"
det deploy local cluster-up --data-dir "$data" --master-port "${DET_MASTER##*:}"
det agent list
det agent list --json | "$PY" -c '
import json, sys
agents = json.load(sys.stdin)
slots = [s for a in agents for s in (a.get("slots") or [])]
print("agent slots:", json.dumps(slots))
want = int(sys.argv[1])
cuda = [s for s in slots if s.get("type", "").lower().endswith("cuda")]
if len(cuda) != want:
    sys.exit(f"FAIL: the agent offers {len(cuda)} cuda slot(s), nvidia-smi lists {want}")
' "$gpus"

ids=()
for _ in $(seq 0 "$gpus"); do
  ids+=("$(det experiment create examples/gpu_check/gpu.yaml examples/gpu_check | awk '/Created experiment/ {print $3}')")
done
if [ "$gpus" -gt 1 ]; then
  ids+=("$(det experiment create examples/gpu_check/gpu.yaml examples/gpu_check \
    --config resources.slots_per_trial="$gpus" | awk '/Created experiment/ {print $3}')")
fi
echo "experiments: ${ids[*]}"
for id in "${ids[@]}"; do
  if ! det experiment wait "$id"; then
    det experiment logs "$id" | tail -30
    echo "FAIL: experiment $id did not complete"; exit 1
  fi
done
for id in "${ids[@]}"; do det experiment logs "$id" | grep -E "CUDA_VISIBLE_DEVICES|computed on"; done
det experiment describe --json "$(IFS=,; echo "${ids[*]}")" | "$PY" -c '
import json, sys
spans = []
for exp in json.load(sys.stdin):
    slots = exp["experiment"]["config"]["resources"]["slots_per_trial"]
    for trial in exp["trials"]:
        m = trial["latest_validation"]
        spans.append((m["started"], m["ended"], slots, exp["experiment"]["id"]))
spans.sort()
print("trials held their GPUs (start, end, slots, experiment):")
for s in spans:
    print("  %.2f %.2f %d %s" % s)
gpus = int(sys.argv[1])
for start, _, _, exp in spans:
    held = sum(n for s, e, n, _ in spans if s <= start < e)
    if held > gpus:
        sys.exit(f"FAIL: trials held {held} GPUs at once, there are {gpus} (experiment {exp})")
' "$gpus"
echo "GPU check passed: $gpus GPU(s) offered as slots, each trial saw only its own"
