# lab: --layout hostnet --rails 4
# `rdmabw rails` and `rdmabw probe` (issue 4) in the lab's hostnet layout: podA is the guest's
# initial namespace with rails rdma0.. and rxe_a0.. (as a hostNetwork pod sees the node's rails),
# podB a pod with its own net1.. and rxe_b0...

TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# shellcheck source=scripts/labtests/rails.bash
. "$RAILBENCH_SUITE_DIR/rails.bash"

# podA's rails are rdma0.. (rail N = rdmaN), podB's net1.. (rail N = net<N+1>): same rail numbers.
test_rails_hostnet_device_address_gid() {
  check_rails_of podA software
  check_rails_of podB software
}

# The probe in the node's namespace says so (bridges of the node), and passes.
test_probe_in_the_nodes_namespace() {
  probe_expect podA "rails uverbs-files uverbs-open memlock memory-registration rdma-netns-mode rail-gids host-network" \
    "cluster-dns dev-shm gpu-isolation"
  json_get "$T_OUT/probe-podA.json" '[.checks[] | select(.name == "host-network") | .detail][0]' | tee "$T_OUT/hn.txt"
  grep -q "node's own network namespace" "$T_OUT/hn.txt" || fail "podA is not seen as the node's namespace"
}

# rdmabw client --netdev rdma1 from the node's namespace uses the rails row of rdma1; the server
# in podB uses the row of net2.
test_client_netdev_uses_the_rails_row() {
  local srv port=18720
  srv=$(ctl_ip podB)
  in_pod podA "$RDMABW" rails --json >"$T_OUT/railsA.json" || fail "rails in podA"
  in_pod podB "$RDMABW" rails --json >"$T_OUT/railsB.json" || fail "rails in podB"
  in_pod podB timeout 200 "$RDMABW" server --json --netdev net2 -n 200 -p "$port" >"$T_OUT/server.json" 2>"$T_OUT/server.err" &
  wait_port podB "$port"
  in_pod podA timeout 200 "$RDMABW" client --json --netdev rdma1 -n 200 -p "$port" "$srv" \
    >"$T_OUT/client.json" 2>"$T_OUT/client.err" || { cat "$T_OUT/client.err"; fail "client failed"; }
  wait $! || { cat "$T_OUT/server.err"; fail "server failed"; }
  same_as_rails "$T_OUT/client.json" "$T_OUT/railsA.json" rdma1 client
  same_as_rails "$T_OUT/server.json" "$T_OUT/railsB.json" net2 server
}
