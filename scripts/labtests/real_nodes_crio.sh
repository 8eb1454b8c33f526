# lab: --real-nodes --crio --rails 2
# lab-tier: soak
# (Not in the default run: its guests and parts cost minutes, and CRI-O is one mode's runtime.)
# Real nodes with CRI-O (issue 36, item 3, mode hostnetwork-crio): node-a and node-b as in suite
# real_nodes, but with CRI-O v1.34.0 (unmodified, github.com/cri-o/cri-o; Debian's conmon and
# runc) in place of containerd, railsweep's image loaded into its storage with skopeo, the
# handler runc-nohostdev as railsweep's crio_dropin writes it (allowed_annotations
# io.kubernetes.cri-o.Devices; allowed_devices the node's uverbs files and rdma_cm) and the
# RuntimeClass runc-nohostdev of deploy/examples (scheduling on nvidia.com/gpu.present=true,
# which both kubelets set as a label). No VFs: each node's uverbs files are its rails'.
# shellcheck shell=bash

# A pod's first start on an emulated node takes a while; railsweep's pods are two of them.
TEST_TIMEOUT=${TEST_TIMEOUT:-480}
RN_LAST=$((LAB_RAILS - 1))

# rn_container_dev NODE POD_UID: on NODE, the /dev and /dev/infiniband that the container of that
# pod sees (its processes but conmon, which CRI-O puts in the pod's cgroup and which sees the
# node's /dev), through /proc/PID/root.
rn_container_dev() {
  rn_node_sh "$1" "uid='$2'"'
for p in /proc/[0-9]*; do
  read -r comm 2>/dev/null <"$p/comm" || continue
  [ "$comm" != conmon ] || continue
  read -r cg 2>/dev/null <"$p/cgroup" || continue
  case "$cg" in *"pod$uid"*|*"pod${uid//-/_}"*) ;; *) continue ;; esac
  echo "pid ${p#/proc/} $comm $(tr "\0" " " <"$p/cmdline")"
  echo "dev: $(ls "$p/root/dev" | tr "\n" " ")"
  echo "infiniband: $(ls "$p/root/dev/infiniband" 2>&1 | tr "\n" " ")"
  exit 0
done
echo "no process of pod $uid on this node"; exit 1'
}

# `kubectl get nodes -o wide`'s columns: both Ready, kubelet v1.37.2, CRI-O 1.34.0, and the label
# the RuntimeClass runc-nohostdev selects.
test_nodes_ready_with_crio() {
  kube GET /api/v1/nodes >"$T_OUT/nodes.json"
  python3 - "$T_OUT/nodes.json" <<'EOF' || fail "the nodes are not as expected (above)"
import json, sys
items = {n["metadata"]["name"]: n for n in json.load(open(sys.argv[1]))["items"]}
for name, n in sorted(items.items()):
    i = n["status"]["nodeInfo"]
    print(name, i["kubeletVersion"], i["containerRuntimeVersion"], i["kernelVersion"],
          "nvidia.com/gpu.present=" + n["metadata"]["labels"].get("nvidia.com/gpu.present", "(none)"))
assert sorted(items) == ["node-a", "node-b"], sorted(items)
for name, n in items.items():
    i = n["status"]["nodeInfo"]
    assert [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"] == ["True"], name + " not Ready"
    assert i["kubeletVersion"] == "v1.37.2", (name, i["kubeletVersion"])
    assert i["containerRuntimeVersion"] == "cri-o://1.34.0", (name, i["containerRuntimeVersion"])
    assert n["metadata"]["labels"].get("nvidia.com/gpu.present") == "true", (name, n["metadata"]["labels"])
EOF
}

# railsweep's hostnetwork-crio mode across the two real nodes: its pods on the RuntimeClass
# runc-nohostdev, hostNetwork, not privileged, every capability dropped but IPC_LOCK, the
# annotation listing uverbs0..uverbs(RAILS-1) and rdma_cm; every rail from node-a to node-b over
# its host bridge. The pods are kept until their specs and the containers' /dev are checked: the
# container has the annotation's devices in /dev/infiniband and none of the node's other devices
# (a privileged container would have the node's disks, vda...).
test_railsweep_hostnetwork_crio_across_nodes() {
  local rc=0 t0 r line status bw cif sif uid node
  t0=$(now)
  "$RAILSWEEP" run --mode hostnetwork-crio --uverbs "0-$RN_LAST" --nodes node-a,node-b --window 2 --tclass 41 --pod-timeout 240 \
    --image "$LAB_IMAGE" --image-pull-policy Never --run-id crio --keep-pods --output-file "$T_OUT/sweep.csv" >"$T_OUT/sweep.out" 2>"$T_OUT/sweep.err" || rc=$?
  echo "railsweep exit $rc after $(elapsed "$t0") s"
  cat "$T_OUT/sweep.out"; tail -20 "$T_OUT/sweep.err"
  [ "$rc" -eq 0 ] || fail "railsweep exit $rc"
  rn_rails_ok_over_rdma "$T_OUT/sweep.csv"
  kube GET "/api/v1/namespaces/lab/pods?labelSelector=app.kubernetes.io/instance%3Dcrio" >"$T_OUT/pods.json"
  python3 - "$T_OUT/pods.json" "$LAB_RAILS" <<'EOF' >"$T_OUT/pods.txt" || { cat "$T_OUT/pods.txt"; fail "railsweep's pods are not as expected (above)"; }
import json, sys
pods, rails = json.load(open(sys.argv[1]))["items"], int(sys.argv[2])
assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
want = ",".join(["/dev/infiniband/uverbs%d" % i for i in range(rails)] + ["/dev/infiniband/rdma_cm"])
for p in pods:
    s, c = p["spec"], p["spec"]["containers"][0]
    sc = c.get("securityContext") or {}
    print("pod", p["metadata"]["name"], s["nodeName"], p["metadata"]["uid"], "runtimeClass", s.get("runtimeClassName"),
          "hostNetwork", s.get("hostNetwork"), "privileged", sc.get("privileged"), "capabilities", sc.get("capabilities"))
    print("annotation", p["metadata"]["annotations"].get("io.kubernetes.cri-o.Devices"))
    assert s.get("runtimeClassName") == "runc-nohostdev" and s.get("hostNetwork") is True, s
    assert not sc.get("privileged"), sc
    assert sc.get("capabilities") == {"add": ["IPC_LOCK"], "drop": ["ALL"]}, sc
    assert p["metadata"]["annotations"].get("io.kubernetes.cri-o.Devices") == want, p["metadata"]["annotations"]
EOF
  cat "$T_OUT/pods.txt"
  while read -r _ _ node uid _; do
    rn_container_dev "$node" "$uid" | tee "$T_OUT/dev-$node.txt" || fail "no container of pod $uid on $node"
    python3 - "$T_OUT/dev-$node.txt" "$LAB_RAILS" <<'EOF' || fail "the container on $node has other devices than the annotation's (above)"
import sys
lines = dict(l.split(": ", 1) for l in open(sys.argv[1]).read().splitlines() if ": " in l)
ib = sorted(lines["infiniband"].split())
want = sorted(["uverbs%d" % i for i in range(int(sys.argv[2]))] + ["rdma_cm"])
assert ib == want, ("/dev/infiniband", ib, want)
dev = lines["dev"].split()
assert not [d for d in dev if d.startswith(("vd", "sd", "nvidia", "ttyS", "mem", "kmsg"))], ("node devices in /dev", dev)
EOF
  done < <(grep '^pod ' "$T_OUT/pods.txt")
  kube DELETE "/api/v1/namespaces/lab/pods?labelSelector=app.kubernetes.io/instance%3Dcrio" >/dev/null || true
  for _ in $(seq 60); do pods_in lab | grep -q '^railsweep-' || return 0; sleep 1; done
  fail "railsweep's pods still there 60 s after they were deleted: $(pods_in lab | tr '\n' ' ')"
}

# Inside a pod of the mode (railsweep's own server pod spec, from --dry-run, its command a probe):
# /dev/infiniband holds the annotation's files, they open (the device cgroup lets them through
# without privileged), rdmabw finds both rails.
test_probe_in_hostnetwork_crio_pod() {
  local body
  for _ in $(seq 60); do pods_in lab | grep -q '^railsweep-' || break; sleep 1; done
  "$RAILSWEEP" run --mode hostnetwork-crio --uverbs "0-$RN_LAST" --nodes node-a,node-b --run-id probe --dry-run -o json \
    --image "$LAB_IMAGE" --image-pull-policy Never \
    >"$T_OUT/dry-run.json" || fail "railsweep --dry-run failed"
  body=$(python3 - "$T_OUT/dry-run.json" <<'EOF'
import json, sys
pod = [p for p in json.load(open(sys.argv[1]))["items"] if p["metadata"]["labels"]["app.kubernetes.io/component"] == "server"][0]
pod["metadata"] = {"name": "rn-crio-probe", "namespace": "lab", "annotations": pod["metadata"]["annotations"]}
pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-a"}
c = pod["spec"]["containers"][0]
c.pop("ports", None)
c["command"] = ["sh", "-c", "ls -l /dev/infiniband; ls /dev | tr '\\n' ' '; echo; grep CapEff /proc/self/status; "
                "head -c 1 /dev/infiniband/uverbs0; echo \"head exit $?\"; echo '=== probe json'; rdmabw probe --json"]
print(json.dumps(pod))
EOF
)
  echo "$body" >"$T_OUT/rn-crio-probe.json"
  kube POST /api/v1/namespaces/lab/pods "$body" >/dev/null || fail "pod rn-crio-probe could not be created"
  local end=$((SECONDS + 240)) phase=""
  while [ $SECONDS -lt $end ]; do
    phase=$(kube GET /api/v1/namespaces/lab/pods/rn-crio-probe | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"].get("phase", ""))')
    case "$phase" in Succeeded|Failed) break ;; esac
    sleep 1
  done
  kube GET "/api/v1/namespaces/lab/events?fieldSelector=involvedObject.name=rn-crio-probe" >"$T_OUT/rn-crio-probe.events.json" || true
  echo "phase $phase"
  rn_log rn-crio-probe | tee "$T_OUT/rn-crio-probe.log"
  rn_delete rn-crio-probe
  case "$phase" in Succeeded|Failed) ;; *) fail "pod rn-crio-probe is $phase after 240 s (events: $T_OUT/rn-crio-probe.events.json)" ;; esac
  sed -n '/^=== probe json$/,$p' "$T_OUT/rn-crio-probe.log" | sed '1d' >"$T_OUT/probe.json"
  python3 - "$T_OUT/probe.json" "$T_OUT/rn-crio-probe.log" "$LAB_RAILS" <<'EOF' || fail "the pod's devices are not as expected (above)"
import re, sys
log, rails = open(sys.argv[2]).read(), int(sys.argv[3])
assert all(re.search(r"^crw.* uverbs%d$" % i, log, re.M) for i in range(rails)), "no uverbs files in the pod"
assert re.search(r"^crw.* rdma_cm$", log, re.M), "no rdma_cm in the pod"
assert "Operation not permitted" not in log, "a device open was refused"
EOF
  "$LABCHECK" probe "$T_OUT/probe.json" rails=PASS uverbs-open=PASS || fail "the probe is not as expected (above)"
}
