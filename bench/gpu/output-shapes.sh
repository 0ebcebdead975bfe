#!/bin/bash
# One GPU machine: the output shapes of nccl-tests' options (per-iteration timing -I, CPU time -C, timestamps
# -S, memory report -M, run cycles -N, a minimum bandwidth that fails, NCCL's INFO lines between rows) in
# text and in its JSON report, and NCCL 2.28's INFO log of every subsystem, to check fabnet's parsers on
# each. From the repository root, on the GPU machine:
#   NCCL_TESTS_SRC=DIR OUT=DIR bash bench/gpu/output-shapes.sh      (see bench/README.md)
# Everything lands in $OUT/output-shapes.tgz.
set -u
O=${OUT:-/tmp/fabnet-gpu}; L=/tmp/fabnet-shapes; rm -rf "$L"; mkdir -p "$O" "$L"
SRC=${NCCL_TESTS_SRC:-nccl-tests}
PY=$(command -v python3)
SIZES=$("$PY" -c "print(','.join(str(1<<k) for k in range(20,25)))")
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL timeout 90 "$PY" provisioner/smoke/node_script.py --rank 0 --world 1 \
  --master 127.0.0.1 --port 29801 --backend nccl --sizes "$SIZES" --iters 5 --warmup 1 --timeout 30 \
  --deadline 80 --events "$L/all.events.jsonl" > "$L/nccl-debug-all-subsystems.log" 2>&1 &
. bench/gpu/nccl-tests-build.sh
nccl_home "$PY"
build_nccl_tests "$SRC" /tmp/nt "$L/build.log"
ARP=/tmp/nt/build/all_reduce_perf
run() {  # run NAME ENV... -- ARGS...: text in NAME.txt, the JSON report in NAME.json
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 60 $ARP "$@" -J "$L/$name.json" > "$L/$name.txt" 2>&1; echo "$name rc=$?"
}
run per-iter      X=1 -- -b 1M -e 16M -f 4 -g 1 -n 20 -w 2 -I 1 -K 2
run cputime       X=1 -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2 -C 1
run timestamps    X=1 -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2 -S 1
run memory        X=1 -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2 -M 1
run cycles        X=1 -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2 -N 2
run min-bw        NCCL_TESTS_MIN_BW=100 -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2
run info-lines    NCCL_DEBUG=INFO -- -b 1M -e 4M -f 2 -g 1 -n 10 -w 2
run ops-types     X=1 -- -b 1M -e 1M -g 1 -n 5 -w 1 -o all -d all
wait; tail -n 2 "$L/all.events.jsonl"
"$PY" bench/gpu/redact_env.py "$L"/*.json
for f in "$L"/*.txt; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
tar -C /tmp -czf "$O/output-shapes.tgz" fabnet-shapes
echo "== done"
