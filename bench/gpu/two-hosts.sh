#!/bin/bash
# One GPU machine, no network: `fabnet smoke` from end to end, over SSH, with NCCL between two ranks, and
# the same all-reduce run by hand with torch.distributed as the oracle for its figures.
#
# The two "hosts" are two OpenSSH servers on this machine (127.0.0.1:2211 and 127.0.0.2:2222), each in a
# mount namespace of its own so that each has its own /tmp (a smoke run's folder is named by the run, the
# same on every host). NCCL refuses two ranks on one GPU of one host ("Duplicate GPU detected"); each
# server gives its sessions its own NCCL_HOSTID, so NCCL takes them for two nodes and connects them with
# its network transport (sockets over the loopback interface) instead. The figures are those of that
# path on one machine, not of a fabric: what this run proves is the path (inventory, pre-flight, launch,
# NCCL communicator and sweep, pairs, verdict), and that fabnet's busbw agrees with the hand-run's.
#
# Needs the kit of bench/gpu/kit.sh (an SSH server, ip, ping and fabnet's wheels; the GPU image may lack
# them). From the repository root, on the GPU machine, as root:
#   KIT=.gpukit OUT=DIR bash bench/gpu/two-hosts.sh            (see bench/README.md; about 2 minutes)
# PYTHON (default: python3) must have torch; SIZES (default 1M:512M) and ITERS (20) set the sweep; HOSTS (2)
# servers, one rank each (three or more: the per-host comparison and its pairs run too).
# FAULTS=1 then runs two failures through the same path: both ranks given one NCCL_HOSTID (NCCL refuses
# them as one GPU twice), and node2's rank killed with SIGKILL, then stopped with SIGSTOP (a rank that hangs),
# KILL_AFTER (9) seconds after it started.
set -u
K=$(readlink -f "${KIT:-.gpukit}"); O=${OUT:-/tmp/fabnet-gpu}; mkdir -p "$O"
W=${WORK:-/opt/fabnet-two}  # not under /tmp: each server mounts a /tmp of its own over it
PY=$(command -v "${PYTHON:-python3}"); REPO=$PWD
SIZES=${SIZES:-1M:512M}; ITERS=${ITERS:-20}; N=${HOSTS:-2}  # hosts (and ranks), 2 to 9
rm -rf "$W"; mkdir -p "$W"; cp -a "$K/bin" "$K/libexec" "$K/lib" "$W/"
echo "== machine"
nvidia-smi -L 2>&1; "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None)" 2>&1 | grep -v Warning

# The controller's side: fabnet from this checkout, its dependencies from the kit where python lacks them.
if ! "$PY" -c "import paramiko, fabric, pydantic" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$K"/whl/*.whl || exit 1
fi
export PYTHONPATH="$REPO:$W/site"
# What the pre-flight runs on a node, where this machine lacks it.
for t in ip ping; do command -v "$t" >/dev/null || ln -sf "$W/bin/$t" "/usr/local/bin/$t"; done

# NCCL_TESTS_SRC (a checkout of NVIDIA/nccl-tests): the nccl-tests runner too, after the torch runs.
[ -n "${NCCL_TESTS_SRC:-}" ] && { . bench/gpu/nccl-tests-smoke.sh; nt_prepare; }

echo "== two SSH servers"
. bench/gpu/sshd.sh
sshd_keys
# A session gets sshd's own environment, not this one: give it what torch needs to find the GPU's driver.
keep=$(env | grep -E '^(PATH|LD_LIBRARY_PATH|CUDA_[A-Z_]*|NVIDIA_[A-Z_]*|MASTER_ADDR|MASTER_PORT|GLOO_SOCKET_IFNAME)=' | grep -v '[" ]' | tr '\n' ' ')
servers=(); trap 'kill "${servers[@]}" 2>/dev/null' EXIT
for i in $(seq 1 "$N"); do
  sshd_start "$i" "127.0.0.$i" "22$i$i" "[127.0.0.$i]:22$i$i" "$keep NCCL_HOSTID=fabnet-two-node$i"
done
sleep 1; cat "$W"/sshd*.log

hosts=(); for i in $(seq 1 "$N"); do hosts+=("ansible_host: 127.0.0.$i, ansible_port: 22$i$i, data_ip: 127.0.0.$i"); done
sshd_inventory lo "${hosts[@]}"
cat > "$W/playbook.yml" <<'EOF'
- name: NCCL over the loopback interface
  hosts: gpu
  resources:
    - file:
        path: /etc/nccl.conf
        content: |
          NCCL_SOCKET_IFNAME=lo
          NCCL_DEBUG=WARN
EOF

echo "== fabnet smoke (sizes $SIZES, $ITERS iterations)"
start=$(date +%s.%N)
"$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --sizes "$SIZES" --iters "$ITERS" \
  --timeout 300 --json --junit "$O/smoke-junit.xml" > "$O/smoke.json" 2> "$O/smoke-stderr.txt"
echo "rc=$? seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"
"$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --sizes "$SIZES" --iters "$ITERS" \
  --timeout 300 > "$O/smoke-console.txt" 2>&1; echo "console rc=$?"; tail -n 30 "$O/smoke-console.txt"

echo "== the same by hand: torch.distributed, $N processes, the same sizes"
byte_sizes=$("$PY" - "$SIZES" <<'EOF'
import sys
lo, hi = (int(float(p[:-1]) * (1 << {"K": 10, "M": 20, "G": 30}[p[-1]])) for p in sys.argv[1].split(":")[:2])
sizes = []
while lo <= hi:
    sizes.append(lo); lo *= 2
print(",".join(map(str, sizes)))
EOF
)
cat > "$W/hand.py" <<'EOF'
import datetime, os, sys, time, warnings
warnings.filterwarnings("ignore")
import torch, torch.distributed as dist
rank, world, port, sizes, iters = int(sys.argv[1]), int(sys.argv[5]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
backend = "nccl" if torch.cuda.is_available() else "gloo"
device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
if backend == "nccl":
    torch.cuda.set_device(0)
dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))
for size in map(int, sizes.split(",")):
    t = torch.ones(size // 4, device=device)
    for _ in range(3):
        dist.all_reduce(t)
    if backend == "nccl":
        torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    if backend == "nccl":
        torch.cuda.synchronize()
    print(size, (time.perf_counter() - start) / iters, flush=True)
dist.destroy_process_group()
EOF
hand=()
for r in $(seq 0 $((N - 1))); do
  env NCCL_HOSTID="fabnet-two-hand$r" NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,NET \
    timeout 300 "$PY" "$W/hand.py" "$r" 29650 "$byte_sizes" "$ITERS" "$N" > "$O/hand-rank$r.txt" 2>&1 &
  hand+=($!)
done
wait "${hand[@]}"  # not the servers, which run until this script ends
grep -h -m 4 -E "via NET|NET/Socket : Using|Duplicate GPU|nRanks [0-9]+ nNodes" "$O"/hand-rank*.txt
"$PY" - "$O/smoke.json" "$O"/hand-rank*.txt <<'EOF'
import json, statistics, sys
times = {}
n = len(sys.argv) - 2
for name in sys.argv[2:]:
    for line in open(name):
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            times[int(parts[0])] = max(times.get(int(parts[0]), 0.0), float(parts[1]))
# nccl-tests' definition: busbw = size / time * 2(n-1)/n
hand = {size: size / seconds / 1e9 * 2 * (n - 1) / n for size, seconds in sorted(times.items())}
print("hand-run busbw GB/s by size:", {k: round(v, 3) for k, v in hand.items()})
if hand:
    print(f"hand-run average busbw: {statistics.mean(hand.values()):.3f} GB/s")
try:
    smoke = json.load(open(sys.argv[1]))
except ValueError as exc:
    sys.exit(f"no smoke JSON: {exc}")
print("fabnet smoke:", {k: smoke.get(k) for k in ("verdict", "reason", "avg_busbw", "ranks", "exit_code")})
print("fabnet pairs:", smoke.get("pair_figures"), [(c["check"], c["status"], c["message"]) for c in smoke["checks"]])
for row in smoke.get("results") or []:
    print("  fabnet", {k: row.get(k) for k in ("size", "time_us", "algbw", "busbw", "wrong") if k in row})
EOF
if [ -n "${FAULTS:-}" ]; then
  echo "== fault: both ranks with one NCCL_HOSTID (the playbook's environment wins over the server's)"
  sed 's/NCCL_DEBUG=WARN/NCCL_DEBUG=WARN\n          NCCL_HOSTID=fabnet-two-same/' "$W/playbook.yml" > "$W/same-host.yml"
  "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/same-host.yml" --sizes 1M:4M --iters 5 --timeout 120 \
    --json > "$O/fault-same-host.json" 2> "$O/fault-same-host-stderr.txt"; echo "rc=$?"
  "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/same-host.yml" --sizes 1M:4M --iters 5 --timeout 120 \
    > "$O/fault-same-host-console.txt" 2>&1; echo "console rc=$?"; tail -n 25 "$O/fault-same-host-console.txt"
  echo "== fault: node2's rank killed with SIGKILL during the sweep"
  for run in json console; do
    # The rank itself (python .../node.py), not the shell that waits for it.
    ( for _ in $(seq 150); do
        p=$(pgrep -f '^[^ ]*python[^ ]* [^ ]*/node\.py --rank 1 ' | head -n 1); [ -n "$p" ] && break; sleep 0.2
      done
      sleep "${KILL_AFTER:-9}"; echo "killing rank 1 (pid ${p:-none}) at $(date +%T)"; [ -n "$p" ] && kill -9 "$p" ) &
    killer=$!
    start=$(date +%s)
    if [ $run = json ]; then
      "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --sizes "$SIZES" --iters "$ITERS" \
        --timeout 90 --json > "$O/fault-killed.json" 2> "$O/fault-killed-stderr.txt"
    else
      "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --sizes "$SIZES" --iters "$ITERS" \
        --timeout 90 > "$O/fault-killed-console.txt" 2>&1
    fi
    echo "$run rc=$? seconds=$(( $(date +%s) - start ))"; wait "$killer"
  done
  tail -n 30 "$O/fault-killed-console.txt"
  echo "== fault: node2's rank stopped (SIGSTOP) during the sweep: a rank that hangs"
  ( for _ in $(seq 150); do
      p=$(pgrep -f '^[^ ]*python[^ ]* [^ ]*/node\.py --rank 1 ' | head -n 1); [ -n "$p" ] && break; sleep 0.2
    done
    sleep "${KILL_AFTER:-9}"; echo "stopping rank 1 (pid ${p:-none}) at $(date +%T)"; [ -n "$p" ] && kill -STOP "$p" ) &
  stopper=$!
  start=$(date +%s)
  "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --sizes "$SIZES" --iters "$ITERS" \
    --timeout 60 --json > "$O/fault-stopped.json" 2> "$O/fault-stopped-stderr.txt"
  echo "rc=$? seconds=$(( $(date +%s) - start ))"; wait "$stopper"
  "$PY" - "$O"/fault-*.json <<'EOF'
import json, sys
for name in sys.argv[1:]:
    d = json.load(open(name))
    print(name.rsplit("/", 1)[-1], {k: d.get(k) for k in ("verdict", "exit_code", "reason")})
    for p in d.get("progress") or []:
        print("   ", {k: p.get(k) for k in ("rank", "host", "stage", "sizes_done", "exit", "state_at_kill",
                                            "wchan_at_kill")}, (p.get("error") or "")[:160])
EOF
fi
[ -n "${NCCL_TESTS_SRC:-}" ] && nt_run
echo "== done"
