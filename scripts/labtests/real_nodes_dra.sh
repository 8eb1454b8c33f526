# lab: --real-nodes --rails 2 --dra
# lab-tier: soak
# (Not in the default run: its guests import the images themselves under containerd v2 and run
# DRANET, about 160 s to Ready, and its compare of every mode takes about 6 minutes; --soak runs it.)
# Real nodes with DRANET (issue 36, item 3, mode dra): node-a and node-b as in suite real_nodes,
# with their SR-IOV VFs, but with containerd v2.4.2 (NRI on) in place of Debian's 1.6, and DRANET
# v1.4.0 (unmodified, sigs.k8s.io/dranet) on each node: it publishes the node's NICs as
# ResourceSlices of driver dra.net, the real scheduler allocates a pod's ResourceClaim from them,
# and DRANET's NRI hooks give the pod the allocated rails. scripts/lab.d/node says how each node
# runs them, and what stands in for what rxe cannot do: rxe's device goes when DRANET moves its
# netdev into the pod (a RoCE NIC's stays), so the node's rail-follow makes it again where the
# netdev went. On these nodes one railsweep compare runs all four modes.
# shellcheck shell=bash

# A pod's first start on an emulated node takes a while; the compare (about 350 s) may run again.
TEST_TIMEOUT=${TEST_TIMEOUT:-1080}
RN_IMAGE=${LAB_IMAGE#docker.io/}
# The claims here want the rails alone: DRANET publishes every NIC of the node, and the VFs carry
# RDMA too (rxevfI), so a claim that asked for every NIC with rdma true would take them as well.
RAILS_ONLY='device.attributes["dra.net"].rdma == true && device.attributes["dra.net"].ifName.startsWith("rdma")'

# slices_json: every ResourceSlice of driver dra.net, as the API gives them.
slices_json() { kube GET /apis/resource.k8s.io/v1/resourceslices; }

# rn_wait_slices SECONDS: wait until both nodes publish a dra.net slice whose rail NICs are
# marked rdma (DRANET's first scan ends after the kubelet registered it).
rn_wait_slices() {
  local end=$((SECONDS + $1))
  until slices_json | python3 -c 'import json, sys
rails = int(sys.argv[1])
have = {}
for s in json.load(sys.stdin)["items"]:
    if s["spec"]["driver"] != "dra.net": continue
    for d in s["spec"].get("devices", []):
        a = d.get("attributes", {})
        if a.get("dra.net/rdma", {}).get("bool") and a.get("dra.net/ifName", {}).get("string", "").startswith("rdma"):
            have.setdefault(s["spec"]["nodeName"], set()).add(a["dra.net/ifName"]["string"])
sys.exit(0 if all(len(have.get(n, ())) == rails for n in ("node-a", "node-b")) else 1)' "$LAB_RAILS"; do
    [ $SECONDS -lt $end ] || fail "not both nodes publish $LAB_RAILS rdma rails after $1 s (DRANET's logs: $LAB_NODE_DIRS/NAME/dranet.log)"
    sleep 1
  done
}

# `kubectl get nodes -o wide`'s columns: both Ready, kubelet v1.37.2, containerd v2.4.2 (its CRI
# reports the version without the v).
test_nodes_ready_with_containerd_v2() {
  kube GET /api/v1/nodes >"$T_OUT/nodes.json"
  python3 - "$T_OUT/nodes.json" <<'EOF' || fail "the nodes are not as expected (above)"
import json, sys
items = {n["metadata"]["name"]: n for n in json.load(open(sys.argv[1]))["items"]}
for name, n in sorted(items.items()):
    i = n["status"]["nodeInfo"]
    print(name, i["kubeletVersion"], i["containerRuntimeVersion"], i["kernelVersion"])
assert sorted(items) == ["node-a", "node-b"], sorted(items)
for name, n in items.items():
    i = n["status"]["nodeInfo"]
    assert [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"] == ["True"], name + " not Ready"
    assert i["kubeletVersion"] == "v1.37.2", (name, i["kubeletVersion"])
    assert i["containerRuntimeVersion"] == "containerd://2.4.2", (name, i["containerRuntimeVersion"])
EOF
}

# DRANET's inventory on each node: its ResourceSlice (driver dra.net, pool = the node) lists the
# rail NICs rdma0 and rdma1 by interface, PCI address (virtio-net NICs of the guest) and rdma: true,
# which rdmamap finds for an rxe device through its GID table's netdevs; the control NIC eth0 is
# there too, rdma: false; and each rail's igb PF pfI (sriov: true, one VF, rdma: false) and its VF
# vfI (isSriovVf: true, rdma: true for its rxevfI), as DRANET reads them from sysfs.
test_dranet_publishes_rails_as_resourceslices() {
  rn_wait_slices 240
  slices_json >"$T_OUT/slices.json"
  python3 - "$T_OUT/slices.json" "$LAB_RAILS" <<'EOF2' || fail "the ResourceSlices are not as expected (above)"
import json, sys
rails = int(sys.argv[2])
seen = {}
for s in json.load(open(sys.argv[1]))["items"]:
    sp = s["spec"]
    if sp["driver"] != "dra.net": continue
    assert sp["pool"]["name"] == sp["nodeName"], (sp["pool"], sp["nodeName"])
    for d in sp.get("devices", []):
        # DRANET writes qualified names (dra.net/ifName); the standard ones keep their domain.
        a = {k.removeprefix("dra.net/"): list(v.values())[0] for k, v in d.get("attributes", {}).items()}
        print(sp["nodeName"], d["name"], {k: a.get(k) for k in ("ifName", "rdma", "pciAddress", "virtual", "resource.kubernetes.io/pcieRoot")})
        seen.setdefault(sp["nodeName"], {})[a.get("ifName")] = a
for node in ("node-a", "node-b"):
    nics = seen.get(node, {})
    for i in range(rails):
        a = nics.get("rdma%d" % i)
        assert a, (node, "no device with ifName rdma%d" % i, sorted(nics, key=str))
        assert a.get("rdma") is True and a.get("virtual") is False and a.get("pciAddress"), (node, i, a)
    assert nics.get("eth0", {}).get("rdma") is False, (node, "eth0", nics.get("eth0"))
    for i in range(rails):
        pf, vf = nics.get("pf%d" % i, {}), nics.get("vf%d" % i, {})
        print(node, "pf%d" % i, {k: pf.get(k) for k in ("pciDevice", "sriov", "sriovVfs", "rdma")},
              "vf%d" % i, {k: vf.get(k) for k in ("pciDevice", "isSriovVf", "rdma")})
        assert (pf.get("sriov"), pf.get("sriovVfs"), pf.get("rdma")) == (True, 1, False), (node, "pf%d" % i, pf)
        assert (vf.get("isSriovVf"), vf.get("rdma"), vf.get("pciDevice")) == (True, True, "82576 Virtual Function"), (node, "vf%d" % i, vf)
EOF2
}

# rn_dra_pod NAME NODE: a pod as railsweep's --mode dra makes one (a ResourceClaimTemplate asking
# DeviceClass dranet for every device matching RAILS_ONLY; not privileged, every capability
# dropped but IPC_LOCK), on NODE, printing what it was given and then sleeping.
rn_dra_pod() {
  kube POST /apis/resource.k8s.io/v1/namespaces/lab/resourceclaimtemplates "$(python3 -c 'import json, sys
print(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": sys.argv[1]},
  "spec": {"spec": {"devices": {"requests": [{"name": "rails", "exactly": {"deviceClassName": "dranet",
    "selectors": [{"cel": {"expression": sys.argv[2]}}], "allocationMode": "All"}}]}}}}))' "$1" "$RAILS_ONLY")" >/dev/null
  rn_pod_json "$1" "$2" | { read -r body; kube POST /api/v1/namespaces/lab/pods "$body" >/dev/null; }
}
rn_pod_json() {
  python3 - "$1" "$2" "$RN_IMAGE" "$LAB_RAILS" <<'EOF2'
import json, sys
name, node, image = sys.argv[1:4]
# Until rail-follow made the rxe devices again in this namespace (at most 60 s), then what it has.
show = ("for t in $(seq 120); do [ $(rdma link show | grep -c 'netdev rdma') -ge %d ] && break; sleep 0.5; done; echo \"rxe after $t\"; "
        "ip -br addr; ls -l /dev/infiniband; rdma link; grep CapEff /proc/self/status; echo '=== rails json'; rdmabw rails --json; "
        "echo '=== probe json'; rdmabw probe --json; echo '=== end'; sleep infinity") % int(sys.argv[4])
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
  "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
           "automountServiceAccountToken": False, "resourceClaims": [{"name": "rails", "resourceClaimTemplateName": name}],
           "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", show],
                           "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}},
                           "resources": {"claims": [{"name": "rails"}]}}]}}))
EOF2
}

# The real scheduler allocates the claim from node-a's slice (both rails), and DRANET's NRI hooks
# give the pod what it was allocated: the rail netdevs moved into the pod's network namespace with
# the node's addresses (DRANET writes them in the claim's status.devices[].networkData), and the
# uverbs files of the rails' RDMA devices (shared RDMA netns mode: DRANET adds the character
# devices it found at prepare time to the container, with their device cgroup rule; rdma_cm too
# where the node has it, which these nodes do not load), without privileged. With rail-follow's
# rxe in the pod, rdmabw opens both uverbs files and finds both rails.
test_claim_allocated_and_rails_given_to_pod() {
  local t0
  rn_wait_slices 240
  t0=$(now)
  rn_dra_pod rn-dra-a node-a
  rn_wait_running rn-dra-a 240
  echo "rn-dra-a Running $(elapsed "$t0") s after it was created"
  for _ in $(seq 60); do rn_log rn-dra-a | grep -q '^=== end$' && break; sleep 1; done
  rn_log rn-dra-a | tee "$T_OUT/rn-dra-a.log"
  kube GET /api/v1/namespaces/lab/pods/rn-dra-a >"$T_OUT/rn-dra-a.pod.json"
  kube GET /apis/resource.k8s.io/v1/namespaces/lab/resourceclaims >"$T_OUT/claims.json"
  python3 - "$T_OUT/rn-dra-a.pod.json" "$T_OUT/claims.json" "$T_OUT/rn-dra-a.log" "$LAB_RAILS" <<'EOF2' || fail "the claim or the pod is not as expected (above)"
import json, re, sys
pod, claims, log, rails = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["items"], open(sys.argv[3]).read(), int(sys.argv[4])
names = {s["name"]: s.get("resourceClaimName") for s in pod["status"].get("resourceClaimStatuses", [])}
claim = [c for c in claims if c["metadata"]["name"] == names.get("rails")]
assert claim, ("no ResourceClaim for the pod", names)
st = claim[0]["status"]
res = st["allocation"]["devices"]["results"]
print("allocated:", [(r["driver"], r["pool"], r["device"]) for r in res])
assert len(res) == rails and all(r["driver"] == "dra.net" and r["pool"] == "node-a" for r in res), res
for d in st.get("devices", []):
    print("status.devices:", d["device"], d.get("networkData"), [c["type"] + "=" + c["status"] for c in d.get("conditions", [])])
nd = {d["device"]: d.get("networkData", {}) for d in st.get("devices", [])}
for i in range(rails):
    m = re.search(r"^rdma%d\s+UP\s+(10\.224\.%d\.1)/24" % (i, i), log, re.M)
    assert m, "no rdma%d with 10.224.%d.1/24 in the pod" % (i, i)
    assert any(v.get("interfaceName") == "rdma%d" % i and "10.224.%d.1/24" % i in v.get("ips", []) for v in nd.values()), ("networkData lacks rdma%d" % i, nd)
assert all(re.search(r"^crw.* 231, *%d .* uverbs%d$" % (192 + i, i), log, re.M) for i in range(rails)), "the pod has not the rails' uverbs files"
c = pod["spec"]["containers"][0]
assert not (c.get("securityContext") or {}).get("privileged"), "the pod is privileged"
EOF2
  rn_log_part rn-dra-a "rails json" >"$T_OUT/rn-dra-a.rails.json"
  "$LABCHECK" rails "$T_OUT/rn-dra-a.rails.json" --count "$LAB_RAILS" --iface 'rdma{r}' --usable || fail "the pod's rails are not as expected (above)"
  rn_log_part rn-dra-a "probe json" >"$T_OUT/rn-dra-a.probe.json"
  "$LABCHECK" probe "$T_OUT/rn-dra-a.probe.json" --all uverbs-open=PASS || fail "the pod's probe is not as expected (above)"
  rn_delete rn-dra-a
}

# rn_claim_pod NAME NODE CEL COUNT: a pod on NODE whose claim asks DeviceClass dranet for COUNT
# devices matching CEL; it sleeps.
rn_claim_pod() {
  kube POST /apis/resource.k8s.io/v1/namespaces/lab/resourceclaimtemplates "$(python3 -c 'import json, sys
print(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": sys.argv[1]},
  "spec": {"spec": {"devices": {"requests": [{"name": "rails", "exactly": {"deviceClassName": "dranet",
    "selectors": [{"cel": {"expression": sys.argv[2]}}], "allocationMode": "ExactCount", "count": int(sys.argv[3])}}]}}}}))' "$1" "$3" "$4")" >/dev/null
  kube POST /api/v1/namespaces/lab/pods "$(python3 -c 'import json, sys
name, node, image = sys.argv[1:4]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
  "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
           "automountServiceAccountToken": False, "resourceClaims": [{"name": "rails", "resourceClaimTemplateName": name}],
           "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "infinity"],
                           "resources": {"claims": [{"name": "rails"}]}}]}}))' "$1" "$2" "$RN_IMAGE")" >/dev/null
}

# Issue 54, item 3 on the real DRANET nodes: the DeviceTaintRule railsweep writes for one bad rail
# (railsweep's name, labels and taint, as `fleet --apply-verdicts taints` writes it on the API
# server in orchestrator/tests/fleet_verdicts.rs) on node-b's rdma1: the real scheduler keeps a pod
# that asks for both of node-b's rails from starting while both are free, with its own reason, and
# then starts one that asks for rdma0 alone. Then the rule goes, and the rails come home.
test_device_taint_rule_keeps_one_rail_from_claims() {
  local dev rule=railbench-node-b-rail1
  rn_wait_slices 240
  dev=$(slices_json | python3 -c 'import json, sys
for s in json.load(sys.stdin)["items"]:
    if s["spec"]["driver"] == "dra.net" and s["spec"]["nodeName"] == "node-b":
        for d in s["spec"].get("devices", []):
            if d.get("attributes", {}).get("dra.net/ifName", {}).get("string") == "rdma1": print(d["name"])')
  [ -n "$dev" ] || fail "node-b publishes no dra.net device for rdma1"
  echo "node-b's rdma1 is device $dev of pool node-b"
  kube POST /apis/resource.k8s.io/v1/devicetaintrules "$(python3 -c 'import json, sys
print(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
  "metadata": {"name": sys.argv[1], "labels": {"app.kubernetes.io/managed-by": "railsweep", "railbench.io/node": "node-b", "railbench.io/rail": "1"}},
  "spec": {"deviceSelector": {"driver": "dra.net", "pool": "node-b", "device": sys.argv[2]},
           "taint": {"key": "railbench.io/bad-rail", "value": "degraded", "effect": "NoSchedule"}}}))' "$rule" "$dev")" >/dev/null \
    || fail "the API server refused the DeviceTaintRule"
  trap "kube DELETE /apis/resource.k8s.io/v1/devicetaintrules/$rule >/dev/null 2>&1 || true; rn_delete rn-taint-both; rn_delete rn-taint-rdma0" EXIT
  # The pod that asks for both rails first, alone (both are free: only the taint is in its way),
  # until the scheduler has said why it cannot place it; then the one that asks for rdma0.
  rn_claim_pod rn-taint-both node-b "$RAILS_ONLY" "$LAB_RAILS"
  local end=$((SECONDS + 120))
  until kube GET /api/v1/namespaces/lab/pods/rn-taint-both | python3 -c 'import json, sys
c = {c["type"]: c for c in json.load(sys.stdin)["status"].get("conditions", [])}.get("PodScheduled", {})
sys.exit(0 if c.get("reason") == "Unschedulable" else 1)'; do
    [ $SECONDS -lt $end ] || fail "rn-taint-both was not found unschedulable within 120 s"
    sleep 1
  done
  kube GET /api/v1/namespaces/lab/pods/rn-taint-both >"$T_OUT/both.json"
  rn_claim_pod rn-taint-rdma0 node-b 'device.attributes["dra.net"].ifName == "rdma0"' 1
  rn_wait_running rn-taint-rdma0 240
  kube GET /api/v1/namespaces/lab/pods/rn-taint-rdma0 >"$T_OUT/rdma0.json"
  kube GET /apis/resource.k8s.io/v1/namespaces/lab/resourceclaims >"$T_OUT/claims.json"
  python3 - "$T_OUT/both.json" "$T_OUT/rdma0.json" "$T_OUT/claims.json" "$dev" <<'EOF2' || fail "the taint did not keep exactly the tainted rail from the claims (above)"
import json, sys
both, one, claims, dev = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))["items"], sys.argv[4]
cond = {c["type"]: c for c in both["status"].get("conditions", [])}.get("PodScheduled", {})
print("rn-taint-both:", both["status"].get("phase"), cond.get("status"), cond.get("reason"), cond.get("message"))
assert both["status"].get("phase") == "Pending" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable", cond
alloc = {}
for c in claims:
    a = (c.get("status") or {}).get("allocation")
    alloc[c["metadata"]["name"]] = [(r["pool"], r["device"]) for r in a["devices"]["results"]] if a else None
print("claims:", alloc)
mine = [v for k, v in alloc.items() if k.startswith("rn-taint-rdma0")]
assert mine and mine[0] and all(p == "node-b" and d != dev for p, d in mine[0]), mine
assert not any(v for k, v in alloc.items() if k.startswith("rn-taint-both")), alloc
EOF2
  kube DELETE "/apis/resource.k8s.io/v1/devicetaintrules/$rule" >/dev/null || fail "deleting the rule"
  rn_delete rn-taint-both; rn_delete rn-taint-rdma0
  trap - EXIT
  rn_before_retry
}

# rn_wait_rails_home SECONDS: every rail back on both nodes, up, with its rxe ACTIVE (rail-follow
# makes it once a claim's pod gave the rail back): what a sweep's hostnetwork pods need. Once,
# the compare's hostnetwork pods started while the claim test's rails were still on their way
# back, and both rails failed: "port 1 of rxe0 is DOWN".
rn_wait_rails_home() {
  local n end=$((SECONDS + $1)) check
  # One look per command: a node runs each for 60 s at most. rdma(8) ends each line with a space.
  check="ok=1; for i in \$(seq 0 $((LAB_RAILS - 1))); do rdma link show | grep -Eq \"state ACTIVE .* netdev rdma\$i *\$\" || ok=0; done
    [ \$ok = 1 ] || { rdma link show; ip -o link show; exit 1; }"
  for n in node-a node-b; do
    until rn_node_sh "$n" "$check" >"$T_OUT/rails-home-$n.txt"; do
      [ $SECONDS -lt $end ] || { cat "$T_OUT/rails-home-$n.txt"; fail "$n: not every rail back, up, with an ACTIVE rxe after $1 s (above; rail-follow: $LAB_NODE_DIRS/$n/rail-follow.log)"; }
      sleep 2
    done
  done
}

# Once a claim's rails are back on their node (rail-follow's rxe, DRANET's next scan), before
# rn_railsweep_multus runs railsweep again.
rn_before_retry() { rn_wait_rails_home 120; rn_wait_slices 120; }

# Every mode railsweep has for these nodes, in one compare across them, on the same two nodes and
# rails, rdmabw injected (--inject, through exec's stdin) into every pod:
# - hostnetwork: privileged pods on the node's network: the node's rdmaI and rxeI;
# - ipvlan: Multus's IPvlan child netI+1 on rdmaI, the uverbs files from the device plugin, not
#   privileged; rxe receives nothing on an IPvlan child (suite real_nodes says why), so each
#   rail fails with 0 iterations, and the compare exits 1 for that alone;
# - sriov: rail I's SR-IOV VF vfI (igbvf, VF 0 of the node's igb pfI) moved into the pod by
#   host-device as netI+1, with rxevfI made again on it (rxe-vf);
# - dra: the real scheduler allocating each pod's claim from DRANET's slice (the rails selected by
#   name: --device-selector), DRANET's NRI hooks moving rdmaI into the pod, rxeI made again
#   there by rail-follow.
# A rail's rxe comes back in the dra pod 0.2-5 s after DRANET moved its netdev, and railsweep reads
# a pod's rails again for up to 8 s while a rail has its address but no GID (settle_rails).
test_railsweep_compare_every_mode_across_nodes() {
  local last=$((LAB_RAILS - 1))
  rn_wait_rails_home 120
  rn_wait_slices 240
  rn_wait_resource node-a "smarter-devices/infiniband_uverbs$((LAB_RAILS + last))" 120
  rn_wait_resource node-b "smarter-devices/infiniband_uverbs$((LAB_RAILS + last))" 120
  rn_railsweep_multus cmp compare --modes hostnetwork,ipvlan,sriov,dra --nodes node-a,node-b --window 2 --tclass 41 --pod-timeout 240 \
    --networks "ipvlan:rdma-ipvlan-{0..$last}" --rdma-resource "ipvlan:smarter-devices/infiniband_uverbs{0..$last}=1" \
    --networks "sriov:sriov-rail-{0..$last}" --rdma-resource "sriov:smarter-devices/infiniband_uverbs{$LAB_RAILS..$((LAB_RAILS + last))}=1" \
    --device-selector "$RAILS_ONLY" --inject --image "$LAB_IMAGE" --image-pull-policy Never --show-commands --retries 1
  # Exit 1: the ipvlan rails failed; 2 would be a mode whose pods did not start, or a usage error.
  [ "$rc" -eq 1 ] || fail "railsweep exit $rc, not 1 (only the ipvlan rails fail, see above)"
  # The ipvlan rails are tried again too, failing again with 0 iterations.
  rn_compare_expect cmp 4 "$RXE_FLAKE|\\(0 iterations\\)"
  local cols=network_mode,rail,client_interface,client_rdma_device,server_interface,server_rdma_device,status,bw_avg_gbps,error
  "$LABCHECK" rows "$T_OUT/cmp.csv" --modes hostnetwork,ipvlan,sriov,dra --rails "0-$last" --nodes node-a,node-b \
    --ends 'hostnetwork:rdma{r},rxe{r}' --ends 'ipvlan:net{r+1},rxe{r}' --ends 'sriov:net{r+1},rxevf{r}' --ends 'dra:rdma{r},rxe{r}' \
    --print "$cols" || fail "the rows are not as expected (above)"
  "$LABCHECK" rows "$T_OUT/cmp.csv" --where network_mode=ipvlan --status failed --like 'error=*(0 iterations)*' || fail "an ipvlan rail did not fail with 0 iterations"
  "$LABCHECK" rows "$T_OUT/cmp.csv" --except network_mode=ipvlan --ok || fail "a rail of hostnetwork, sriov or dra is not ok"
  for _ in $(seq 60); do pods_in lab | grep -q '^railsweep-' || return 0; sleep 1; done
  fail "railsweep's pods still there 60 s after it ended: $(pods_in lab | tr '\n' ' ')"
}
