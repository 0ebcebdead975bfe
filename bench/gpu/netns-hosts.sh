#!/bin/bash
# One GPU machine, no network: `fabnet smoke --runner nccl-tests` with fabnet's own mpirun line, across two
# hosts that are network namespaces of this machine, and the same binary run by hand as the oracle.
#
# Each host is an OpenSSH server in a network namespace of its own (its `eth1`, 10.77.0.N/24, a veth into a
# bridge in a third namespace), with a hostname (UTS namespace) and a /tmp (mount namespace) of its own. fabnet
# runs in a fourth namespace on the same bridge (10.77.0.100). Unlike two-hosts.sh (two servers on loopback
# addresses of one network stack, where Open MPI's TCP transport between two daemons hung), Open MPI sees two
# hosts, and mpirun starts the second rank over SSH as on a cluster. NCCL joins the ranks over sockets on eth1.
# Only addresses inside these namespaces are used. From the repository root, on the GPU machine, as root:
#   KIT=.gpukit OUT=DIR NCCL_TESTS_SRC=DIR bash bench/gpu/netns-hosts.sh        (see bench/README.md)
# Without a GPU the lab's gloo emulation of all_reduce_perf stands in (a dry run of the plumbing).
set -u
K=$(readlink -f "${KIT:-.gpukit}"); O=${OUT:-/tmp/fabnet-gpu}; mkdir -p "$O"
W=${WORK:-/opt/fabnet-netns}
PY=$(command -v "${PYTHON:-python3}"); REPO=$PWD
SIZES=${SIZES:-1M:512M}; ITERS=${ITERS:-20}; N=2; P=fnnt
rm -rf "$W"; mkdir -p "$W"; cp -a "$K/bin" "$K/libexec" "$K/lib" "$W/"
nvidia-smi -L 2>&1
if ! "$PY" -c "import paramiko, fabric, pydantic" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/site" "$K"/whl/*.whl || exit 1
fi
export PYTHONPATH="$REPO:$W/site"
for t in ip ping ssh; do command -v "$t" >/dev/null || ln -sf "$W/bin/$t" "/usr/local/bin/$t"; done
. bench/gpu/nccl-tests-smoke.sh
nt_prepare
[ -n "${NT_SKIP:-}" ] && exit 1
[ -z "${MASTER_ADDR:-}" ] || export MASTER_ADDR=10.77.0.1 GLOO_SOCKET_IFNAME=eth1  # the dry run's emulation
. bench/gpu/sshd.sh
sshd_keys
# mpirun starts its remote daemon with ssh: the same key and known hosts, from Open MPI's own settings file.
printf 'Host *\n  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n' \
  "$W/id" "$W/known_hosts" > "$W/ssh_config"
conf="$(dirname "$(dirname "$(command -v mpirun)")")/etc/prte-mca-params.conf"
grep -v '^plm_ssh_args' "$conf" > "$conf.new" 2>/dev/null; echo "plm_ssh_args = -F $W/ssh_config" >> "$conf.new"
mv "$conf.new" "$conf"
keep=$(env | grep -E '^(PATH|LD_LIBRARY_PATH|CUDA_[A-Z_]*|NVIDIA_[A-Z_]*|MASTER_ADDR|GLOO_SOCKET_IFNAME)=' |
  grep -v '[" ]' | tr '\n' ' ')

echo "== network namespaces: a bridge, two hosts, the controller"
cleanup() { kill "${servers[@]}" 2>/dev/null; for ns in "$P-h1" "$P-h2" "$P-ctl" "$P-sw"; do ip netns del "$ns" 2>/dev/null; done; }
servers=(); trap cleanup EXIT
cleanup
ip netns add "$P-sw"; ip -n "$P-sw" link add br0 type bridge; ip -n "$P-sw" link set br0 up
attach() {  # namespace, interface name inside, address
  ip netns add "$1"; ip link add "$P-v$4" type veth peer name "$2" netns "$1"
  ip link set "$P-v$4" netns "$P-sw"; ip -n "$P-sw" link set "$P-v$4" master br0 up
  ip -n "$1" addr add "$3/24" dev "$2"; ip -n "$1" link set "$2" up; ip -n "$1" link set lo up
}
attach "$P-ctl" eth0 10.77.0.100 0
for i in $(seq 1 $N); do
  attach "$P-h$i" eth1 "10.77.0.$i" "$i"
  SSHD_UNSHARE=-u SSHD_SH="hostname node$i;" sshd_start "$i" "10.77.0.$i" 22 "10.77.0.$i" "$keep" \
    ip netns exec "$P-h$i"
done
sleep 1; cat "$W"/sshd*.log
hosts=(); for i in $(seq 1 $N); do hosts+=("ansible_host: 10.77.0.$i, data_ip: 10.77.0.$i"); done
sshd_inventory eth1 "${hosts[@]}"
cat > "$W/playbook.yml" <<'EOF'
- name: NCCL over the hosts' eth1
  hosts: gpu
  resources:
    - file:
        path: /etc/nccl.conf
        content: |
          NCCL_SOCKET_IFNAME=eth1
          NCCL_DEBUG=WARN
EOF
ctl() { ip netns exec "$P-ctl" "$@"; }

for runner in nccl-tests torch; do
  echo "== fabnet smoke --runner $runner (fabnet's own launch line), sizes $SIZES, $ITERS iterations"
  start=$(date +%s.%N)
  ctl "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --runner "$runner" --launcher mpirun --sizes "$SIZES" \
    --iters "$ITERS" --timeout 300 --json > "$O/netns-$runner.json" 2> "$O/netns-$runner-stderr.txt"
  echo "rc=$? seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"
  ctl "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --runner "$runner" --launcher mpirun --sizes "$SIZES" \
    --iters "$ITERS" --timeout 300 > "$O/netns-$runner-console.txt" 2>&1; echo "console rc=$?"
  tail -n 22 "$O/netns-$runner-console.txt"
done

echo "== the same binary by hand: mpirun on node1, the second rank over ssh"
read -r lo hi < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1]))['settings']['sizes']; print(min(s), max(s))" \
  "$O/netns-nccl-tests.json" 2>/dev/null || echo "1048576 536870912")
ctl ssh -F "$W/ssh_config" 10.77.0.1 "cd /tmp && NCCL_SOCKET_IFNAME=eth1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
  timeout 300 mpirun --allow-run-as-root -np 2 -H 10.77.0.1:1,10.77.0.2:1 -x NCCL_SOCKET_IFNAME -x NCCL_DEBUG \
  -x NCCL_DEBUG_SUBSYS all_reduce_perf -b $lo -e $hi -f 2 -g 1 -n $ITERS" > "$O/netns-hand.txt" 2>&1
echo "hand rc=$?"; grep -m 4 -E "nRanks [0-9]+ nNodes|via NET|Avg bus|Rank  *[01] " "$O/netns-hand.txt"
"$PY" -m provisioner parse nccl_tests "$O/netns-hand.txt" > "$O/netns-hand-parsed.json"; echo "parse rc=$?"
"$PY" - "$O"/netns-nccl-tests.json "$O"/netns-torch.json "$O/netns-hand-parsed.json" <<'EOF'
import json, sys
for name in sys.argv[1:3]:
    try:
        d = json.load(open(name))
    except ValueError as exc:
        print(name, "no JSON:", exc)
        continue
    print(name.rsplit("/", 1)[-1], {k: d.get(k) for k in ("verdict", "reason", "avg_busbw", "ranks", "exit_code")})
    print("  launch:", (d.get("launch") or {}).get("command"), "notes:", d.get("notes"))
    print("  checks:", [(c["check"], c["status"], c.get("message")) for c in d.get("checks") or []])
    print("  busbw by size:", [(r["size"], r["busbw"]) for r in d.get("results") or []])
try:
    hand = json.load(open(sys.argv[3]))
    print("hand-run:", {k: hand.get(k) for k in ("avg_busbw", "verdict", "complete", "nccl_library_version",
                                                  "separate_runs", "single_rank_runs")},
          [(r.get("size"), r.get("oop_busbw")) for r in hand.get("rows") or []])
except ValueError as exc:
    print("no parse of the hand-run:", exc)
EOF
echo "== done"
