# lab: --layout hostnet --rails 4
# railsweep run (issue 6) from a hostNetwork pod (podA: the guest's own namespace, rails rdma0..)
# to podB (net1..): every rail, and all at once.

. "$RAILBENCH_SUITE_DIR/sweep.sh"
# Only this file's tests run in this layout (sweep's own check of rdmabw's flags, which no
# layout changes, runs in the pods layout).
unset -f test_sweep_every_rail test_sweep_parallel test_sweep_rail_down test_sweep_server_pod_killed \
  test_sweep_ctrl_c_and_resume test_sweep_kubernetes_runner test_sweep_daemon_serves_only_its_run \
  test_sweep_passes_rdmabws_test_flags

test_hostnet_sweep_every_rail() {
  sweep seq --window 2 --mode hostnetwork
  [ "$rc" -eq 0 ] || { cat "$T_OUT/seq.err"; fail "railsweep exit $rc"; }
  expect_rows "$T_OUT/seq.csv" 4
  expect_traffic "$T_OUT/seq.csv" 0 1 2 3
  for i in 0 1 2 3; do
    grep -q "rdma$i rxe_a$i .*net$((i + 1)) rxe_b$i" "$T_OUT/seq.out" || fail "rail $i: not rdma$i/rxe_a$i -> net$((i + 1))/rxe_b$i"
  done
}

test_hostnet_sweep_parallel() {
  sweep par --window 3 --parallel --mode hostnetwork
  [ "$rc" -eq 0 ] || { cat "$T_OUT/par.err"; fail "railsweep exit $rc"; }
  expect_rows "$T_OUT/par.csv" 4
  expect_traffic "$T_OUT/par.csv" 0 1 2 3
}
