# Sourced by the scripts beside it on a GPU machine: the NCCL that torch ships (pip's nvidia-nccl), laid out as
# nccl-tests' build expects (include/ and lib/libnccl.so), and nccl-tests built against it.
#   nccl_home PY             sets NCCLDIR (torch's NCCL) and exports LD_LIBRARY_PATH to its lib; /tmp/nccl
#   build_nccl_tests SRC DEST LOG [MAKE ARGS...]   copies SRC to DEST and builds it for sm_90; prints its rc
nccl_home() {
  NCCLDIR=$("$1" -c "import nvidia.nccl as m; print(list(m.__path__)[0])")
  mkdir -p /tmp/nccl/include /tmp/nccl/lib
  ln -sf "$NCCLDIR"/include/* /tmp/nccl/include/; ln -sf "$NCCLDIR/lib/libnccl.so.2" /tmp/nccl/lib/libnccl.so
  export LD_LIBRARY_PATH="$NCCLDIR/lib"
}

build_nccl_tests() {
  local src=$1 dest=$2 log=$3; shift 3
  rm -rf "$dest"; cp -r "$src" "$dest"
  ( cd "$dest" && timeout 200 make -j16 CUDA_HOME=/usr/local/cuda NCCL_HOME=/tmp/nccl \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" "$@" > "$log" 2>&1 )
  echo "build of $dest rc=$?"
}
