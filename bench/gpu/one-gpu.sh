#!/bin/bash
# One GPU machine: fabnet's smoke rank (torch.distributed, NCCL backend, world size 1), two ranks on the one
# GPU (NCCL refuses them: a real failure log for `fabnet explain`), and nccl-tests' all_reduce_perf -g 1.
# From the repository root: NCCL_TESTS_SRC=DIR OUT=DIR bash bench/gpu/one-gpu.sh (see bench/README.md).
set -u
O=${OUT:-/tmp/fabnet-gpu}; mkdir -p "$O"
SRC=${NCCL_TESTS_SRC:-nccl-tests}  # a checkout of NVIDIA/nccl-tests: such machines may have no network
PY=$(command -v python3)
echo "== machine"; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
nvidia-smi topo -m > "$O/topo.txt" 2>&1
"$PY" -c "import torch;print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), torch.cuda.get_device_name())"
. bench/gpu/nccl-tests-build.sh
nccl_home "$PY"
echo "nccl dir $NCCLDIR"; ls "$NCCLDIR/lib" | head
SIZES=$("$PY" -c "print(','.join(str(1<<k) for k in range(20,31)))")
echo "== fabnet smoke rank, world 1, nccl"
start=$(date +%s.%N)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET timeout 150 "$PY" provisioner/smoke/node_script.py --rank 0 --world 1 \
  --master 127.0.0.1 --port 29555 --backend nccl --sizes "$SIZES" --iters 20 --warmup 5 --timeout 60 --deadline 140 \
  --events "$O/events.jsonl" > "$O/node-nccl.log" 2>&1
echo "rc=$? seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"; tail -3 "$O/events.jsonl"
echo "== two ranks on one GPU (expected to fail: one GPU per rank)"
for r in 0 1; do
  NCCL_DEBUG=WARN timeout 60 "$PY" provisioner/smoke/node_script.py --rank $r --world 2 --local-rank 0 \
    --master 127.0.0.1 --port 29556 --backend nccl --sizes 1048576 --iters 2 --warmup 1 --timeout 30 --deadline 50 \
    --events "$O/dup-events.jsonl" > "$O/dup-rank$r.log" 2>&1 &
done
wait; tail -n 5 "$O/dup-rank0.log" "$O/dup-rank1.log"; cat "$O/dup-events.jsonl" | tail -4
echo "== nccl-tests"
build_nccl_tests "$SRC" /tmp/nt "$O/build.log"; tail -3 "$O/build.log"
timeout 120 /tmp/nt/build/all_reduce_perf -b 1M -e 1G -f 2 -g 1 -n 20 -w 5 \
  > "$O/all_reduce_perf.txt" 2>&1; echo "arp rc=$?"; tail -6 "$O/all_reduce_perf.txt"
echo "== done"
