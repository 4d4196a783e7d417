# Sourced by benches/<op>/device.sh. Those scripts run on the GPU machine from the repository root
# of a clone, with the folder that `scripts/gpu-stage --bench` builds carried as .gpu/:
#   bash benches/<op>/device.sh [MODE...]
# Every command's output goes to one log under a temporary folder; on exit the logs are packed
# into ONE archive, $OUT/<op>.tgz, and a one-line summary per step is printed as it ends.
set -uo pipefail
G=${GPU_DIR:-.gpu}
[ -d "$G" ] || { echo "no $G/: run scripts/gpu-stage --bench on the development machine and carry .gpu" >&2; exit 2; }
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$G/data" RUST_BACKTRACE=1
B=$G/bin T=$G/tests
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/${ARCHIVE}.tgz" -C "$res" . 2>/dev/null; rm -rf "$res"' EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$res/device.txt"
git rev-parse --short HEAD 2>/dev/null >> "$res/device.txt"
fail=0
# step NAME SECONDS CMD...: runs CMD under a timeout into $res/NAME.log, prints its status and
# its result lines.
step() {
  local name=$1 t=$2; shift 2
  local s; s=$(date +%s)
  timeout "$t" "$@" > "$res/$name.log" 2>&1; local rc=$?
  echo "$name: rc=$rc $(( $(date +%s) - s ))s $(grep -E '^test result:' "$res/$name.log" | tail -1)"
  [ $rc = 0 ] || { fail=1; grep -E 'panicked|FAILED|error' "$res/$name.log" | head -10; }
  return 0
}
# json NAME SECONDS CMD...: as step, keeping the JSON lines of stdout in $res/NAME.jsonl.
json() {
  local name=$1; step "$@"
  grep -E '^\{' "$res/$name.log" > "$res/$name.jsonl"; echo "  $(wc -l < "$res/$name.jsonl") rows in $name.jsonl"
}
# Modes given on the command line, or every mode of the script.
want() { [ -z "${MODES:-}" ] || [[ " $MODES " == *" $1 "* ]]; }
