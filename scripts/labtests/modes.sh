# lab: --layout pods --rails 2
# railsweep run --mode --nodes (issue 7) over real rxe: kube-testserver's simulated cluster has
# two nodes that are the lab's pods (node-a runs its pods' commands in podA, node-b in podB), so
# railsweep creates its sriov pod pair through the API (create, watch, exec, delete over real
# HTTP and WebSocket), sweeps both rails with rdmabw injected through exec, and deletes the
# pods; then a pod that cannot be scheduled is explained and nothing is left behind. Each lab
# pod has its own RDMA devices, as an SR-IOV VF gives a pod its own; the pod spec itself
# (annotations, resources) changes nothing in the lab. Bandwidths only have to be above zero.
MARGIN=${MARGIN:-60}
TEST_TIMEOUT=${TEST_TIMEOUT:-400}
TESTSERVER=${TESTSERVER:-$LAB_REPO/target/release/examples/kube-testserver}

# cluster ARGS...: start kube-testserver with nodes node-a (podA) and node-b (podB), each with
# 4 VFs per rail; sets $api and writes $T_OUT/kubeconfig.
cluster() {
  local caps=cap=nvidia.com/sriov_rdma_rail0=4,cap=nvidia.com/sriov_rdma_rail1=4
  "$TESTSERVER" --namespace lab --kubeconfig-out "$T_OUT/kubeconfig" \
    --node "node-a,netns=podA,ip=$(ctl_ip podA),$caps" --node "node-b,netns=podB,ip=$(ctl_ip podB),$caps" "$@" \
    >"$T_OUT/apiserver.out" 2>"$T_OUT/apiserver.err" &
  api=$!
  for _ in $(seq 1 100); do grep -q listening "$T_OUT/apiserver.out" && break; sleep 0.1; done
  grep -q listening "$T_OUT/apiserver.out" || fail "kube-testserver did not start: $(cat "$T_OUT/apiserver.err")"
}

# modes NAME ARGS...: railsweep run --mode sriov --nodes node-a,node-b; sets $rc.
modes() {
  local name=$1; shift
  rc=0
  KUBECONFIG=$T_OUT/kubeconfig "$RAILSWEEP" run --mode sriov --nodes node-a,node-b \
    --networks 'sriov-rdma-rail-{0..1}' --rdma-resource 'nvidia.com/sriov_rdma_rail{0..1}=1' \
    --image lab/any-image-with-libibverbs:1 --inject --inject-binary "$RDMABW" \
    --tclass 41 --quiet -D 2 --margin "$MARGIN" -o "$T_OUT/$name.csv" "$@" \
    >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  cat "$T_OUT/$name.out" "$T_OUT/$name.err"
}

test_modes_created_pods_sweep_real_rails() {
  cluster
  modes sriov
  kill "$api"
  [ "$rc" -eq 0 ] || fail "railsweep run --mode sriov --nodes: exit $rc"
  python3 - "$T_OUT/sriov.csv" <<'PY' || fail "rows are not those of the created pods"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["rail"] for r in rows] == ["0", "1"], rows
for r in rows:
    assert r["status"] == "ok" and float(r["bw_avg_gbps"]) > 0, r
    assert r["network_mode"] == "sriov", r
    assert r["client_pod"].endswith("-sriov-client") and r["client_node"] == "node-a", r
    assert r["server_pod"].endswith("-sriov-server") and r["server_node"] == "node-b", r
PY
  grep -q 'pods ready' "$T_OUT/sriov.err" || fail "no readiness line"
  grep -q 'deleted pods railsweep-.*-sriov-client, railsweep-.*-sriov-server' "$T_OUT/sriov.err" || fail "pods not deleted"
  ! pgrep -f railsweep-rdmabw >/dev/null || { pgrep -af railsweep-rdmabw; fail "injected rdmabw processes left behind"; }
}

test_modes_unschedulable_is_explained() {
  cluster
  modes nofit --rdma-resource 'nvidia.com/sriov_rdma_rail{0..1}=8'
  kill "$api"
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q 'Insufficient nvidia.com/sriov_rdma_rail' "$T_OUT/nofit.err" || fail "no scheduler words"
  grep -q 'what to do: .*not enough free nvidia.com/sriov_rdma_rail' "$T_OUT/nofit.err" || fail "no advice"
  [ ! -e "$T_OUT/nofit.csv" ] || fail "a sweep ran"
}
