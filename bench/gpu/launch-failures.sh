#!/bin/bash
# One GPU machine, after failures.sh: the smoke rank's own rendezvous with a rank missing (NCCL backend),
# NCCL out of GPU memory, nccl-tests under mpirun built without and with MPI, nccl-tests' JSON output (-J)
# of a good and a failed run, and torchrun's c10d rendezvous at a name that does not resolve.
# From the repository root, on the GPU machine:
#   NCCL_TESTS_SRC=DIR OUT=DIR bash bench/gpu/launch-failures.sh      (see bench/README.md)
# Everything lands in $OUT/launch-failures.tgz.
set -u
O=${OUT:-/tmp/fabnet-gpu}; L=/tmp/fabnet-launch; rm -rf "$L"; mkdir -p "$O" "$L"
SRC=${NCCL_TESTS_SRC:-nccl-tests}
PY=$(command -v python3)
RANK=provisioner/smoke/node_script.py
(mpirun --version 2>&1 | head -2; command -v mpicc) > "$L/versions.txt"

echo "== smoke rank, rank 1 of 2 never started (NCCL)"
start=$(date +%s)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP timeout 90 "$PY" "$RANK" --rank 0 --world 2 --master 127.0.0.1 \
  --port 29701 --backend nccl --sizes 1048576 --iters 2 --warmup 1 --timeout 15 --deadline 60 \
  --events "$L/rank-missing.events.jsonl" > "$L/rank-missing.log" 2>&1
echo "rc=$? seconds=$(( $(date +%s) - start ))"; tail -n 1 "$L/rank-missing.events.jsonl"

echo "== NCCL out of GPU memory (NCCL_BUFFSIZE of 512 GiB)"
NCCL_DEBUG=WARN NCCL_BUFFSIZE=549755813888 timeout 90 "$PY" "$RANK" --rank 0 --world 1 --master 127.0.0.1 \
  --port 29702 --backend nccl --sizes 1048576 --iters 2 --warmup 1 --timeout 30 --deadline 60 \
  --events "$L/oom.events.jsonl" > "$L/nccl-buffsize-oom.log" 2>&1; echo "rc=$?"; tail -n 1 "$L/oom.events.jsonl"

echo "== torchrun, c10d rendezvous at a name that does not resolve"
printf 'import torch.distributed as dist\ndist.init_process_group("gloo")\n' > "$L/job.py"
timeout 120 torchrun --nnodes 1 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint nosuch.invalid:29703 \
  --rdzv-conf join_timeout=20,read_timeout=20 "$L/job.py" > "$L/torchrun-rdzv-unresolvable.log" 2>&1
echo "rc=$?"

echo "== nccl-tests"
. bench/gpu/nccl-tests-build.sh
nccl_home "$PY"
build_nccl_tests "$SRC" /tmp/nt "$L/build.log"
MPI_HOME=$(dirname "$(dirname "$(command -v mpicc || echo /usr/bin/mpicc)")")
build_nccl_tests "$SRC" /tmp/ntmpi "$L/build-mpi.log" MPI=1 MPI_HOME="$MPI_HOME"; tail -n 3 "$L/build-mpi.log"
MPIRUN=(timeout 90 mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH)
"${MPIRUN[@]}" /tmp/nt/build/all_reduce_perf -b 1M -e 4M -f 2 -g 1 > "$L/arp-mpirun-without-mpi.txt" 2>&1
echo "mpirun non-mpi rc=$?"
"${MPIRUN[@]}" -x NCCL_DEBUG=WARN /tmp/ntmpi/build/all_reduce_perf -b 1M -e 4M -f 2 -g 1 \
  > "$L/arp-mpirun-two-ranks-one-gpu.txt" 2>&1; echo "mpirun mpi rc=$?"
timeout 60 /tmp/nt/build/all_reduce_perf -b 1M -e 16M -f 4 -g 1 -J "$L/arp-good.json" > /dev/null 2>&1
echo "json good rc=$?"
NCCL_SOCKET_IFNAME=nosuch0 timeout 60 /tmp/nt/build/all_reduce_perf -b 1M -e 1M -g 1 -J "$L/arp-failed.json" \
  > "$L/arp-failed-json.txt" 2>&1; echo "json failed rc=$?"
timeout 60 /tmp/nt/build/all_gather_perf -b 1M -e 4M -f 2 -g 1 -J "$L/agp.json" > /dev/null 2>&1
echo "json all_gather rc=$?"
"$PY" bench/gpu/redact_env.py "$L"/*.json  # the JSON holds the whole environment: names kept, values not
tail -n 6 "$L"/arp-mpirun-*.txt
tar -C /tmp -czf "$O/launch-failures.tgz" fabnet-launch
echo "== done"
