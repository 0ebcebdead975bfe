#!/bin/sh
# Benchmark `fabnet audit` against Ansible and pyinfra on a lab of virtual nodes (run as root).
# Options: --nodes N (16), --repeat N (5), --warmup N (1), --tools fabnet,ansible,pyinfra,
# --workloads site,mtu, --skip-install, --lab NAME, --output FILE. See bench/README.md.
# bench/run.sh --fleet [--nodes 64] [--rtt 20] ...: the fleet-scale run (fleet_bench.py).
# bench/run.sh --watch [--nodes 64] [--rtt 20] ...: a watch cycle against a cold audit (watch_bench.py).
# The Python harness removes the lab when it ends, fails or is interrupted.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python="$here/../.venv/bin/python"
if [ ! -x "$python" ]; then
    echo "error: $python not found: install fabnet into .venv first" >&2
    exit 1
fi
# fabnet as installed from a wheel: bytecode compiled (PYTHONDONTWRITEBYTECODE would otherwise make
# every timed start compile the package again).
"$python" -m compileall -q "$here/../provisioner" >/dev/null
if [ "${1:-}" = "--fleet" ]; then
    shift
    exec "$python" "$here/fleet_bench.py" "$@"
fi
if [ "${1:-}" = "--watch" ]; then
    shift
    exec "$python" "$here/watch_bench.py" "$@"
fi
exec "$python" "$here/audit_bench.py" "$@"
