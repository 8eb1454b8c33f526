# lab: --layout pods --rails 2 --k8s-node node-a,netns=podA,pod-ip=10.99.0.1,cap=nvidia.com/sriov_rdma_rail0=4,cap=nvidia.com/sriov_rdma_rail1=4,dra=2,dra-ifname=net,dra-first=1,dra-netns=podA,dra-rxe,pod-network=scripts/labtests/cni/pod-network-a.json --k8s-node node-b,netns=podB,pod-ip=10.99.0.2,cap=nvidia.com/sriov_rdma_rail0=4,cap=nvidia.com/sriov_rdma_rail1=4,dra=2,dra-ifname=net,dra-first=1,dra-netns=podB,dra-rxe,pod-network=scripts/labtests/cni/pod-network-b.json
# lab-tier: soak
# (The soak tier only: the default run's real_nodes suite sweeps hostnetwork, sriov and ipvlan
# through the real kubelet, containerd, Multus and device plugin, real_nodes_dra DRANET, and the
# cluster tests run each mode's pods, a pair the scheduler cannot place and --client-pod on the
# host; this imitation's sweeps cost 290 s of the default run's 30 minutes.)
# railsweep run --mode --nodes over real rxe, through a real Kubernetes control plane:
# scripts/lab starts kube-apiserver, etcd, kube-scheduler and kube-controller-manager on the
# host, and the guest runs the node agents of node-a (its pods run in podA) and node-b (podB),
# each with 4 VFs per rail as capacity. railsweep creates its pod pair through the API server
# (admission, the scheduler's placement, the agent's exec over SPDY/WebSocket), sweeps both
# rails with rdmabw injected through exec, and deletes the pods; a pod that cannot be
# scheduled is explained in the scheduler's words; compare runs hostnetwork and sriov into one
# CSV, markdown and SVG. Each lab pod has its own RDMA devices, as an SR-IOV VF gives a pod its
# own; the pod spec itself (annotations, resources) changes nothing in the lab, and every pod
# of a node runs in that node's namespace. Each node also publishes its two rails as DRANET
# does (a ResourceSlice of driver dra.net): a pod with a claim gets a namespace of its own, with
# eth0 on the lab's control bridge (the bridge CNI plugin, host-local addresses) and exactly the
# rails the scheduler allocated, moved out of podA/podB with their addresses and their rxe
# devices, and given back when the pod goes. Bandwidths only have to be above zero.
MARGIN=${MARGIN:-60}
TEST_TIMEOUT=${TEST_TIMEOUT:-500}
SRIOV=(--networks 'sriov:sriov-rdma-rail-{0..1}' --rdma-resource 'sriov:nvidia.com/sriov_rdma_rail{0..1}=1')

# railsweep_k8s NAME ARGS...: railsweep ARGS over the cluster's nodes node-a (client) and node-b
# (server), rdmabw injected; stdout in $T_OUT/NAME.out, stderr in $T_OUT/NAME.err; sets $rc.
railsweep_k8s() {
  local name=$1; shift
  rc=0
  "$RAILSWEEP" "$@" --nodes node-a,node-b --image lab/any-image-with-libibverbs:1 --inject --inject-binary "$RDMABW" \
    --tclass 41 --quiet --window 2 --deadline-slack "$MARGIN" --output-file "$T_OUT/$name.csv" >"$T_OUT/$name.out" 2>"$T_OUT/$name.err" || rc=$?
  cat "$T_OUT/$name.out" "$T_OUT/$name.err"
}

# no_pods_left: the namespace lab has no pod, and no injected rdmabw runs.
no_pods_left() {
  local left
  left=$(pods_in lab)
  [ -z "$left" ] || fail "pods left in namespace lab: $left"
  ! pgrep -f railsweep-rdmabw >/dev/null || { pgrep -af railsweep-rdmabw; fail "injected rdmabw processes left behind"; }
}

# created_rows CSV MODE: both rails measured, ok, through the pods railsweep created for MODE,
# the client on node-a and the server on node-b, over podA's rails (or the same rails moved).
created_rows() {
  "$LABCHECK" rows "$1" --rails 0,1 --ok --is network_mode="$2" --like client_pod="*-$2-client" --like server_pod="*-$2-server" \
    --nodes node-a,node-b --where client_interface=net1,net2 --count 2 --like client_rdma_device='rxe_a*' \
    || fail "rows are not those of the $2 pods"
}

test_modes_created_pods_sweep_real_rails() {
  kube GET /version | grep -q '"gitVersion": *"v1\.' || fail "no real API server version"
  railsweep_k8s sriov run --mode sriov "${SRIOV[@]}"
  [ "$rc" -eq 0 ] || fail "railsweep run --mode sriov --nodes: exit $rc"
  created_rows "$T_OUT/sriov.csv" sriov
  grep -q 'pods ready [0-9.]* s after their creation: ' "$T_OUT/sriov.err" || fail "no readiness line"
  grep -q 'deleted pods railsweep-.*-sriov-client, railsweep-.*-sriov-server' "$T_OUT/sriov.err" || fail "pods not deleted"
  no_pods_left
}

test_modes_unschedulable_is_explained() {
  railsweep_k8s nofit run --mode sriov --networks 'sriov-rdma-rail-{0..1}' --rdma-resource 'nvidia.com/sriov_rdma_rail{0..1}=8'
  [ "$rc" -eq 2 ] || fail "expected exit 2, got $rc"
  grep -q 'Insufficient nvidia.com/sriov_rdma_rail' "$T_OUT/nofit.err" || fail "no scheduler words"
  grep -q 'what to do: .*not enough free nvidia.com/sriov_rdma_rail' "$T_OUT/nofit.err" || fail "no advice"
  [ ! -e "$T_OUT/nofit.csv" ] || fail "a sweep ran"
  no_pods_left
}

# dra_class: DRANET's DeviceClass, as its quick start makes it.
dra_class() {
  kube GET /apis/resource.k8s.io/v1/deviceclasses/dranet >/dev/null 2>&1 && return
  kube POST /apis/resource.k8s.io/v1/deviceclasses '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass",
    "metadata":{"name":"dranet"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \"dra.net\""}}]}}' >/dev/null
}

# rails_home NS LETTER: both rails are back in namespace NS with their addresses and rxe devices.
rails_home() {
  local i
  for i in 0 1; do
    ip -n "$1" -o -4 addr show dev "net$((i + 1))" | grep -q "10.224.$i." || fail "net$((i + 1)) not back in $1 with its address"
    ip netns exec "$1" rdma link show | grep -q "rxe_$2$i/1 .*netdev net$((i + 1))" || fail "rxe_$2$i not back in $1"
  done
}

test_modes_dra_sweeps_the_allocated_rails() {
  dra_class
  railsweep_k8s dra run --mode dra
  [ "$rc" -eq 0 ] || fail "railsweep run --mode dra --nodes: exit $rc"
  created_rows "$T_OUT/dra.csv" dra
  # The scheduler's allocation, as railsweep read it from each pod's claim.
  [ "$(grep -c 'was allocated 2 rail(s)' "$T_OUT/dra.err")" -eq 2 ] || fail "no allocation of 2 rails per pod"
  grep -q 'rails net1 (net1)' "$T_OUT/dra.err" && grep -q 'rails net2 (net2)' "$T_OUT/dra.err" || fail "allocated NICs not named"
  # The pods ran in namespaces of their own, on the control bridge, not in podA/podB.
  grep -q 'deleted pods railsweep-.*-dra-client, railsweep-.*-dra-server' "$T_OUT/dra.err" || fail "pods not deleted"
  no_pods_left
  rails_home podA a
  rails_home podB b
}

test_modes_compare_hostnetwork_sriov_dra() {
  dra_class
  railsweep_k8s cmp compare --modes hostnetwork,sriov,dra "${SRIOV[@]}" --metrics "$T_OUT/cmp.prom"
  [ "$rc" -eq 0 ] || fail "railsweep compare: exit $rc"
  # One OpenMetrics file for the three modes: a railbench_rail_ok sample per mode and rail.
  [ "$(grep -c '^railbench_rail_ok{.*} 1.0$' "$T_OUT/cmp.prom")" -eq 6 ] || fail "not 6 ok samples in --metrics"
  "$LABCHECK" rows "$T_OUT/cmp.csv" --modes hostnetwork,sriov,dra --rails 0,1 --ok --nodes node-a,node-b \
    || fail "the file does not hold the three modes"
  grep -q '| rail | hostnetwork | sriov | dra |' "$T_OUT/cmp.md" || fail "no comparison table of three modes in cmp.md"
  head -c 100 "$T_OUT/cmp.svg" | grep -q '<svg\|<?xml' || fail "no SVG chart"
  [ "$(grep -c 'deleted pods' "$T_OUT/cmp.err")" -eq 3 ] || fail "each mode's pods not deleted"
  no_pods_left
  rails_home podA a
}

# The Kubernetes runner with pods that exist already (--client-pod/--server-pod): two pods the
# scheduler places by node selector, swept with rdmabw injected; the rows name the pods, the
# nodes and the kubeconfig's cluster, and the namespace comes from the kubeconfig's context.
test_modes_existing_pods_kubernetes_runner() {
  local p
  for p in a b; do
    kube POST /api/v1/namespaces/lab/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"lab-'$p'"},
      "spec":{"nodeSelector":{"kubernetes.io/hostname":"node-'$p'"},"containers":[{"name":"main","image":"lab/rdma:1","command":["sleep","infinity"]}]}}' >/dev/null
  done
  for _ in $(seq 1 120); do
    [ "$(kube GET /api/v1/namespaces/lab/pods | grep -c '"phase": *"Running"')" -eq 2 ] && break
    sleep 0.5
  done
  rc=0
  "$RAILSWEEP" run --client-pod lab-a --server-pod lab-b --inject --inject-binary "$RDMABW" --tclass 41 --quiet --window 2 \
    --deadline-slack "$MARGIN" --mode sriov --output-file "$T_OUT/kube.csv" >"$T_OUT/kube.out" 2>"$T_OUT/kube.err" || rc=$?
  cat "$T_OUT/kube.out" "$T_OUT/kube.err"
  for p in a b; do kube DELETE "/api/v1/namespaces/lab/pods/lab-$p?gracePeriodSeconds=0" >/dev/null; done
  [ "$rc" -eq 0 ] || fail "railsweep through the API server: exit $rc"
  "$LABCHECK" rows "$T_OUT/kube.csv" --rails 0,1 --ok --is client_pod=lab-a --nodes node-a,node-b --is cluster=testcluster \
    || fail "rows do not name the pods, nodes and cluster"
  grep -q 'namespace lab' "$T_OUT/kube.err" || fail "namespace not taken from the kubeconfig context"
  ! pgrep -f railsweep-rdmabw >/dev/null || { pgrep -af railsweep-rdmabw; fail "injected rdmabw processes left behind"; }
}
