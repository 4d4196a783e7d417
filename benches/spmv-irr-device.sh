#!/usr/bin/env bash
# One call to the GPU machine for issue 20 item 4 (SpMV on irregular matrices), from the
# repository root with a selective staging in $STAGE (default .gpu/: bin/spmv-bench,
# tests/test-spmv_gpu, data/raefsky2.mtx.gz, this script). Everything goes into
# $OUT/irr-results.tgz. (The device receives the checkout the session started in, not a helper's
# worktree: a helper stages into an ignored folder of that checkout, e.g. target/<name>/, and
# sets STAGE to it.)
#
#   STAGE=.gpu bash .gpu/spmv-irr-device.sh MODE...   (several modes in one call, run in order)
#
# bench    : held-out-style instances of every irregular kind (several sizes and seeds) and two
#            regular ones, both precisions, every kernel of the crate and cuSPARSE ALG1/ALG2
#            (json lines, CALL names the call in each line)
# variants : the fused kernel's compile-time policy (SEGSPARSE_SPMV_* overrides, CFGS) A/B
#            against cuSPARSE in the same process, on VM (f64 by default)
# ncu      : Nsight Compute (NCU_RUNS "matrix|bench row|kernel regex", NCU_ENV overrides) with
#            DRAM bytes and L2 sector counts
# corpus   : Auto and cuSPARSE on the small real matrices in $STAGE/data (geo-mean, min)
# tests    : tests/spmv_gpu.rs (SEGSPARSE_REQUIRE_GPU=1), under TEST_ENV (policy overrides)
# sanitize : compute-sanitizer memcheck + racecheck on the tile-boundary, empty-row and dense-row
#            tests, under TEST_ENV
set -u
S=${STAGE:-.gpu}
export SEGSPARSE_REQUIRE_GPU=1 SEGSPARSE_DATA="$PWD/$S/data" RUST_BACKTRACE=1
res=$(mktemp -d)
trap 'tar czf "${OUT:-/tmp}/${ARCHIVE:-irr-results}.tgz" -C "$res" . 2>/dev/null' EXIT
B=$S/bin/spmv-bench
NCU=/usr/local/cuda/bin/ncu
IRR=${IRR:-"powerlaw:4000000:2.0 powerlaw:1000000:1.8 powerlaw:3000000:2.2 denserows:5000000:4:20:600000 \
denserows:2000000:6:10:1500000 emptyrows:8000000:85:16 emptyrows:12000000:95:30 rmat:21:12 rmat:20:24"}
REG=${REG:-"random:3000000:24 poisson3d:140"}
ROWS=${ROWS:-"gpu auto,gpu fused,gpu rows,gpu vector,cusparse"}
# A compact table of json lines: matrix, precision, implementation, median µs.
tab() { python3 - "$@" <<'EOF'
import json, sys, collections
rows = collections.defaultdict(dict)
for f in sys.argv[1:]:
    for line in open(f):
        try: r = json.loads(line)
        except Exception: continue
        if r.get("backend") != "gpu" and "cusparse" not in r.get("implementation", ""): continue
        rows[(r["matrix"], r["precision"])][r["implementation"]] = r["median_us"]
for (m, p), d in rows.items():
    cus = min([v for k, v in d.items() if "cusparse" in k] or [0])
    own = {k.replace("segsparse gpu ", ""): v for k, v in d.items() if "cusparse" not in k}
    best = min((v, k) for k, v in own.items() if k != "auto") if len(own) > 1 else (0, "")
    print(f"{m:32s} {p} cus {cus:8.1f} | " + " ".join(f"{k} {v:.1f} ({cus / v:.2f})" for k, v in own.items()))
EOF
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$res/device.txt"
date -u | tee -a "$res/device.txt"
for mode in "$@"; do
  t0=$(date +%s)
  case "$mode" in
  bench)
    SEGSPARSE_BENCH_GPU_ROWS="$ROWS" timeout ${BENCH_TIMEOUT:-200} $B $IRR $REG --backend gpu \
      --iters ${ITERS:-8} --format json --seed ${SEED:-7} > "$res/bench.jsonl" 2> "$res/bench.err"
    echo "bench rc=$? $(wc -l < "$res/bench.jsonl") lines"; tail -2 "$res/bench.err"
    tab "$res/bench.jsonl" ;;
  variants)
    # CFGS: space-separated configurations, each a '+'-joined list of VAR=VALUE (NONE = defaults).
    VM=${VM:-"powerlaw:4000000:2.0 denserows:5000000:4:20:600000 emptyrows:8000000:85:16"}
    for cfg in ${CFGS:-NONE SEGSPARSE_SPMV_XHINT=1 SEGSPARSE_SPMV_STRIPED=1}; do
      envs=$( [ "$cfg" = NONE ] || echo "$cfg" | tr '+' ' ' )
      env $envs SEGSPARSE_BENCH_GPU_ROWS="${VROWS:-gpu fused,cusparse}" \
        timeout ${VAR_TIMEOUT:-60} $B $VM --backend gpu --precision ${VPREC:-f64} --iters ${VITERS:-6} --format json --seed 3 \
        > "$res/var-$cfg.jsonl" 2> "$res/var-$cfg.err"
      echo "== $cfg rc=$?"; tab "$res/var-$cfg.jsonl"
    done ;;
  ncu)
    sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
    met="--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active"
    runs=${NCU_RUNS:-"powerlaw:4000000:2.0|fused|^spmv_fused_f64$ powerlaw:4000000:2.0|cusparse-alg1|csrmv emptyrows:8000000:85:16|fused|^spmv_fused_f64$ emptyrows:8000000:85:16|cusparse-alg1|csrmv"}
    for r in $runs; do
      m=${r%%|*}; rest=${r#*|}; row=${rest%%|*}; kre=${rest#*|}
      f="$res/ncu-${NCU_TAG:-}${m%%:*}-${row}.txt"
      env ${NCU_ENV:-SEGSPARSE_NONE=0} SEGSPARSE_BENCH_GPU_ROWS="$row" timeout ${NCU_TIMEOUT:-45} $NCU --clock-control none -k "regex:$kre" -c 1 $sec $met \
        $B "$m" --backend gpu --precision f64 --iters 1 > "$f" 2>&1
      echo "== ${NCU_TAG:-}$m $row"; grep -E '^  [a-zA-Z_:<>]+.*\(|Duration|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Registers Per|Achieved Occupancy|dram__bytes|lts__t_sectors_srcunit|sm__warps_active|Dynamic Shared' "$f" | sed -E 's/  +/ /g' | head -16
    done ;;
  corpus)
    # The small real matrices (L2-resident; young1c is complex, which the reader rejects).
    SEGSPARSE_BENCH_GPU_ROWS="${CORPUS_ROWS:-gpu auto,cusparse}" timeout ${CORPUS_TIMEOUT:-120} $B \
      $(ls $S/data/*.mtx.gz | grep -v young1c) --backend gpu --iters ${ITERS:-5} --format json \
      > "$res/corpus.jsonl" 2> "$res/corpus.err"
    echo "corpus rc=$? $(wc -l < "$res/corpus.jsonl") lines"; tail -2 "$res/corpus.err"
    tab "$res/corpus.jsonl" | awk '{split($0, a, "("); r = a[2] + 0; n++; s += log(r); if (r < m || m == 0) m = r} END {printf "corpus auto/cuSPARSE: n %d geo-mean %.3f min %.2f\n", n, exp(s / n), m}' ;;
  tests)
    env ${TEST_ENV:-SEGSPARSE_NONE=0} timeout ${TEST_TIMEOUT:-200} $S/tests/test-spmv_gpu ${TESTS:-} --test-threads=1 > "$res/tests.log" 2>&1
    echo "tests rc=$? $(grep -E '^test result:' "$res/tests.log" | tail -1)"
    grep -E 'panicked|FAILED|failed' "$res/tests.log" | head -20 ;;
  sanitize)
    for tool in memcheck racecheck; do
      env ${TEST_ENV:-SEGSPARSE_NONE=0} timeout ${SAN_TIMEOUT:-100} compute-sanitizer --tool $tool --error-exitcode 9 $S/tests/test-spmv_gpu \
        ${SAN_TESTS:-sizes_around empty_rows one_dense_row} --test-threads=1 > "$res/sanitize-$tool.log" 2>&1
      echo "sanitize $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test result' "$res/sanitize-$tool.log" | tr '\n' ' ')"
    done ;;
  esac
  echo "[$mode: $(( $(date +%s) - t0 )) s]"
  tar czf "${OUT:-/tmp}/${ARCHIVE:-irr-results}.tgz" -C "$res" . 2>/dev/null  # keep what is done if cut off
done
