# lab: --layout pods --rails 4
# GPUDirect flags where there is no GPU and no CUDA driver (the lab): every GPU path fails
# with its clear error, exit 2, and the binary still runs; rxe refuses dma-buf memory.

# expect_exit2 NAME CMD...: run CMD, require exit status 2, keep its stdout and stderr in
# $T_OUT/NAME.out and NAME.err.
expect_exit2() {
  local name=$1 rc=0; shift
  "$@" >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  cat "$T_OUT/$name.out" "$T_OUT/$name.err"
  [ "$rc" -eq 2 ] || fail "$name: exit status $rc, expected 2"
}

# --use_cuda 0 on a client and --use_cuda auto on a server: no CUDA driver library, exit 2,
# before any connection; the same binary without --use_cuda works.
test_use_cuda_without_cuda_driver() {
  ulimit -l unlimited
  ! ldconfig -p | grep -q 'libcuda\.so' || fail "this lab has a libcuda: the test assumes none"
  expect_exit2 client in_pod podA timeout 20 "$RDMABW" client --netdev net1 --use_cuda 0 -n 10 \
    --connect-timeout 2 "$(topo podB 0 ipv4)"
  grep -q '^rdmabw: error: --use_cuda 0: no CUDA driver library: libcuda.so' "$T_OUT/client.err" \
    || fail "client: not the no-CUDA-driver error"
  grep -q 'Run without --use_cuda to test with host memory' "$T_OUT/client.err" || fail "client: no hint"
  expect_exit2 server in_pod podB timeout 20 "$RDMABW" server --netdev net1 --use_cuda auto -n 10
  grep -q '^rdmabw: error: --use_cuda auto: no CUDA driver library' "$T_OUT/server.err" \
    || fail "server: not the no-CUDA-driver error"
  expect_exit2 busid in_pod podA timeout 20 "$RDMABW" client --netdev net1 --cuda-bus-id 0000:0f:00.0 "$(topo podB 0 ipv4)"
  grep -q 'no CUDA driver library' "$T_OUT/busid.err" || fail "--cuda-bus-id: not the no-CUDA-driver error"
  # The binary still runs: a host-memory test on the same rail.
  in_pod podB timeout 30 "$RDMABW" server --netdev net1 -n 50 >"$T_OUT/host-server.txt" 2>&1 &
  wait_port podB 18515
  in_pod podA timeout 30 "$RDMABW" client --netdev net1 -n 50 --json "$(topo podB 0 ipv4)" >"$T_OUT/host.json" \
    2>"$T_OUT/host.err" || { cat "$T_OUT/host.err"; fail "the host-memory test failed"; }
  wait
  grep -q '"memory":"host"' "$T_OUT/host.json" || fail "the report does not say memory host"
  ! grep -q '"gpu"' "$T_OUT/host.json" || fail "a host-memory report names a GPU"
}

# rdmabw gpus and its self-test without a CUDA driver: exit 2, the first step says why.
test_gpus_without_cuda_driver() {
  expect_exit2 gpus "$RDMABW" gpus
  grep -q 'no CUDA driver library' "$T_OUT/gpus.err" || fail "gpus: not the no-CUDA-driver error"
  expect_exit2 selftest "$RDMABW" gpus --selftest
  grep -q '^\[FAILED\] load .*no CUDA driver library' "$T_OUT/selftest.out" || fail "selftest: no failed load step"
  expect_exit2 json "$RDMABW" gpus --json
  grep -q '"cuda_error": "no CUDA driver library' "$T_OUT/json.out" || fail "gpus --json: no cuda_error"
}

# A real dma-buf (the kernel's udmabuf device over a sealed memfd) registered on rxe: refused,
# with the error that says what can. strace shows what the kernel answered: UDMABUF_CREATE gives
# a dma-buf fd, and no verbs ioctl follows for the registration: libibverbs' rxe provider has no
# reg_dmabuf_mr and answers EOPNOTSUPP itself (on 7.2 the kernel's rxe has no dma-buf op either).
test_dmabuf_registration_refused_on_rxe() {
  ulimit -l unlimited
  local dev; dev=$(topo podA 0 rdma_dev)
  ls -l /dev/udmabuf || fail "no /dev/udmabuf in this guest: the check would use a plain memfd"
  if command -v strace >/dev/null; then
    local rc=0
    in_pod podA strace -f --seccomp-bpf -o "$T_OUT/strace.txt" -e trace=memfd_create,fcntl,ioctl \
      "$RDMABW" gpus --dmabuf-check -d "$dev" >"$T_OUT/check.out" 2>"$T_OUT/check.err" || rc=$?
    cat "$T_OUT/check.out" "$T_OUT/check.err"
    echo "--- strace (udmabuf and verbs calls):"
    grep -E 'memfd_create|F_ADD_SEALS|UDMABUF|RDMA_VERBS_IOCTL' "$T_OUT/strace.txt" | tail -6 || true
    [ "$rc" -eq 2 ] || fail "--dmabuf-check: exit status $rc, expected 2"
  else
    expect_exit2 check in_pod podA "$RDMABW" gpus --dmabuf-check -d "$dev"
  fi
  grep -q "registering 2097152 bytes of a dma-buf from /dev/udmabuf over a sealed memfd" "$T_OUT/check.out" \
    || fail "the check did not use a udmabuf dma-buf"
  grep -q "device $dev cannot register dma-buf memory (rxe has no dma-buf support); what can: an mlx5 NIC with a recent driver on the dma-buf path (kernel >= 5.12 and a GPU driver with dma-buf support), or the peermem path (--cuda-mem peermem) with nvidia_peermem loaded" \
    "$T_OUT/check.err" || fail "not the rxe dma-buf error"
  in_pod podA "$RDMABW" gpus --dmabuf-check -d "$dev" --json >"$T_OUT/check.json" 2>/dev/null || true
  grep -q '"registered": false' "$T_OUT/check.json" || fail "--json: not registered false"
}

# railsweep run --gpu auto: the server daemon and every client get --use_cuda auto; without a
# CUDA driver the daemon refuses to start, and railsweep stops at once with its reason, exit 2.
test_railsweep_gpu_auto_without_cuda_driver() {
  ulimit -l unlimited
  expect_exit2 sweep timeout 60 "$RAILSWEEP" run --runner local --server-pod podB --client-pod podA \
    --gpu auto --window 1 --output-file "$T_OUT/gpu.csv"
  grep -q 'no CUDA driver library' "$T_OUT/sweep.err" || fail "railsweep does not pass on the daemon's reason"
  grep -q -- '--use_cuda auto' "$T_OUT/sweep.err" || fail "the message does not name --use_cuda auto"
}
