#!/bin/bash
# One GPU machine: real NCCL and torch.distributed failure logs, made on purpose, for `fabnet explain`.
# Each case runs fabnet's smoke rank (or a torchrun job, or nccl-tests) with one fault in its
# environment and keeps what it printed. From the repository root, on the GPU machine:
#   NCCL_TESTS_SRC=DIR OUT=DIR bash bench/gpu/failures.sh      (see bench/README.md)
# Everything lands in $OUT/failures.tgz (one file: such machines hand back few).
set -u
O=${OUT:-/tmp/fabnet-gpu}; L=/tmp/fabnet-failures; rm -rf "$L"; mkdir -p "$O" "$L"
SRC=${NCCL_TESTS_SRC:-nccl-tests}
PY=$(command -v python3)
RANK=provisioner/smoke/node_script.py
"$PY" -c "import torch;print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" | tee "$L/versions.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$L/versions.txt"

# rank NAME PORT WORLD RANK MASTER [ENV=VALUE ...]: one smoke rank in the background, its log in $L/NAME.log
rank() {
  local name=$1 port=$2 world=$3 r=$4 master=$5; shift 5
  env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET,BOOTSTRAP "$@" timeout 90 "$PY" "$RANK" --rank "$r" \
    --world "$world" --master "$master" --port "$port" --backend nccl --sizes 1048576 --iters 2 --warmup 1 \
    --timeout 20 --deadline 60 --events "$L/$name.events.jsonl" > "$L/$name.log" 2>&1 &
}
echo "== smoke ranks, one fault each"
rank no-socket-iface     29601 1 0 127.0.0.1 NCCL_SOCKET_IFNAME=nosuch0
rank socket-iface-excl   29602 1 0 127.0.0.1 NCCL_SOCKET_IFNAME=^lo,eth,en,ib,bond,docker,veth,ens
rank net-ib-forced       29603 1 0 127.0.0.1 NCCL_NET=IB
rank net-plugin-missing  29604 1 0 127.0.0.1 NCCL_NET_PLUGIN=nosuch
rank ib-hca-missing      29605 1 0 127.0.0.1 NCCL_IB_HCA==mlx5_7:1
rank socket-family-v6    29606 1 0 127.0.0.1 NCCL_SOCKET_FAMILY=AF_INET6 NCCL_SOCKET_IFNAME=eth
rank topo-file-missing   29607 1 0 127.0.0.1 NCCL_TOPO_FILE=/nonexistent/topo.xml
printf '<system version="1">\n  <cpu numaid="0" affinity="ffff" arch="x86_64"\n' > "$L/bad-topo.xml"
rank topo-file-invalid   29608 1 0 127.0.0.1 NCCL_TOPO_FILE="$L/bad-topo.xml"
rank no-gpu-visible      29609 1 0 127.0.0.1 CUDA_VISIBLE_DEVICES=
rank bad-algo-proto      29610 1 0 127.0.0.1 NCCL_ALGO=bogus NCCL_PROTO=bogus
rank oob-iface-missing   29611 1 0 127.0.0.1 NCCL_OOB_NET_ENABLE=1 NCCL_OOB_NET_IFNAME=nosuch0
rank master-unresolvable 29612 2 1 nosuch.invalid
rank master-refused      29613 2 1 127.0.0.1
rank rank-missing        29614 2 0 127.0.0.1
rank port-taken-a        29615 1 0 127.0.0.1 FABNET_CASE=first
sleep 8; rank port-taken-b 29615 1 0 127.0.0.1 FABNET_CASE=second
wait
for f in "$L"/*.events.jsonl; do echo "-- $(basename "$f")"; grep -h '"error"\|"done"' "$f" | cut -c1-240; done

echo "== torchrun, one fault"
cat > "$L/job.py" <<'EOF'
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("sum", x[0].item())
dist.destroy_process_group()
EOF
NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=nosuch0 timeout 90 torchrun --nnodes 1 --nproc-per-node 1 \
  --master-port 29620 "$L/job.py" > "$L/torchrun-no-socket-iface.log" 2>&1; echo "torchrun rc=$?"
NCCL_DEBUG=WARN timeout 90 torchrun --nnodes 1 --nproc-per-node 2 --master-port 29621 "$L/job.py" \
  > "$L/torchrun-two-ranks-one-gpu.log" 2>&1; echo "torchrun dup rc=$?"

echo "== nccl-tests"
. bench/gpu/nccl-tests-build.sh
nccl_home "$PY"
build_nccl_tests "$SRC" /tmp/nt "$L/build.log"
ARP=/tmp/nt/build/all_reduce_perf
timeout 60 $ARP -b 8 -e 64M -f 4 -g 1 -n 5 -w 2 -J "$L/arp.json" > "$L/arp-json.txt" 2>&1; echo "json rc=$?"
NCCL_SOCKET_IFNAME=nosuch0 timeout 60 $ARP -b 1M -e 1M -g 1 > "$L/arp-no-socket-iface.txt" 2>&1; echo "rc=$?"
timeout 60 $ARP -b 1M -e 1M -g 2 > "$L/arp-two-gpus-asked.txt" 2>&1; echo "rc=$?"
NCCL_NET=IB timeout 60 $ARP -b 1M -e 1M -g 1 > "$L/arp-net-ib-forced.txt" 2>&1; echo "rc=$?"
timeout 60 $ARP -b 1M -e 1M -g 1 -d bogus > "$L/arp-bad-type.txt" 2>&1; echo "rc=$?"
tail -n 4 "$L"/arp-*.txt
tar -C /tmp -czf "$O/failures.tgz" fabnet-failures
echo "== done"
