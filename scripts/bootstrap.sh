#!/usr/bin/env bash
# Install everything fabnet and its test suite need on a fresh Debian/Ubuntu machine (run as root):
# the host tools the local lab drives, and a virtualenv in .venv with fabnet installed editable.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "bootstrap: run as root (the local lab creates namespaces, bridges and containers)" >&2
  exit 1
fi

need_apt=0
# promtool (Debian's prometheus package) checks the --prom textfiles in the unit tests; scontrol
# (slurm-client) is the oracle of the Slurm hostlist tests (`scontrol show hostnames`); prometheus
# scrapes `watch --prom-port` and chromium (driven by chromedriver) opens `report --html` in the e2e tests.
for tool in systemd-nspawn debootstrap ssh ssh-keygen ip sysctl dpkg-deb dpkg-scanpackages cc ping promtool scontrol \
    prometheus chromium chromedriver; do
  command -v "$tool" >/dev/null 2>&1 || need_apt=1
done
# The lab's emulated tools have a C fast path, linked statically (libc6-dev has libc.a).
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || need_apt=1
# Debian splits venv/ensurepip into python3-venv.
[ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null && need_apt=1
if [ "$need_apt" = 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    systemd-container debootstrap openssh-client iproute2 procps dpkg-dev python3-venv ca-certificates \
    gcc libc6-dev iputils-ping prometheus slurm-client chromium chromium-driver >/dev/null
fi

# The host python may be a per-user build that lab nodes cannot see; the venv only runs on the host,
# so any python3 >= 3.11 works. Prefer the distribution's.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# compat: a plain path entry; the default import-hook finder costs every fabnet start ~8 ms.
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' --config-settings editable_mode=compat
# Bytecode up front, as a wheel install would have it: where PYTHONDONTWRITEBYTECODE is set, every
# fabnet start would otherwise compile its own modules again (about 60 ms).
.venv/bin/python -m compileall -q provisioner >/dev/null
