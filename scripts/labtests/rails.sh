# lab: --layout pods --rails 4
# `rdmabw rails` and `rdmabw probe` (issue 4) in the lab's pods layout: each pod has its own rxe
# device per rail, made inside its namespace, as an SR-IOV VF gives a pod its own RDMA device.
# Rails are checked against $LAB_TOPOLOGY and lib.sh's gid_index (read from sysfs).

TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# shellcheck source=scripts/labtests/rails.bash
. "$RAILBENCH_SUITE_DIR/rails.bash"

# Every rail of podA and podB: the device, address and GID index of the topology.
test_rails_pods_device_address_gid() {
  check_rails_of podA software
  check_rails_of podB software
}

# --json gives the same rows: one usable rail per topology row, GID indexes as in the table.
test_rails_json_rows() {
  local i gi
  in_pod podA "$RDMABW" rails --json >"$T_OUT/podA.json" 2>"$T_OUT/podA.err" || { cat "$T_OUT/podA.err"; fail "rails --json failed"; }
  [ "$(json_get "$T_OUT/podA.json" '[.rails[] | select(.usable)] | length')" = "$LAB_RAILS" ] || fail "not $LAB_RAILS usable rails"
  for ((i = 0; i < LAB_RAILS; i++)); do
    gi=$(json_get "$T_OUT/podA.json" "[.rails[] | select(.rail == $i) | .gid_index][0]")
    [ "$gi" = "$(sysfs_gid_index "$(topo podA "$i" rdma_dev)" "$(topo podA "$i" ipv4)")" ] || fail "rail $i: JSON GID index $gi"
  done
  # podB's rxe devices are listed in podA's namespace too: as no rails, with the reason.
  json_get "$T_OUT/podA.json" '.not_rails[] | "\(.name): \(.reason)"'
  [ "$(json_get "$T_OUT/podA.json" '([.not_rails[].name] | sort) == ([range('"$LAB_RAILS"') | "rxe_b\(.)"] | sort)')" = true ] \
    || fail "podB's devices are not listed as not rails in podA"
}

# rdmabw client --netdev netN uses exactly the device and GID index that rails printed, and so
# does the server with --netdev, on every rail.
test_client_netdev_uses_the_rails_row() {
  local i nd port srv
  srv=$(ctl_ip podB)
  in_pod podA "$RDMABW" rails --json >"$T_OUT/railsA.json" || fail "rails in podA"
  in_pod podB "$RDMABW" rails --json >"$T_OUT/railsB.json" || fail "rails in podB"
  for ((i = 0; i < LAB_RAILS; i++)); do
    nd=$(topo podA "$i" iface); port=$((18700 + i))
    in_pod podB timeout 200 "$RDMABW" server --json --netdev "$nd" -n 200 -p "$port" \
      >"$T_OUT/server$i.json" 2>"$T_OUT/server$i.err" &
    wait_port podB "$port"
    in_pod podA timeout 200 "$RDMABW" client --json --netdev "$nd" -n 200 -p "$port" "$srv" \
      >"$T_OUT/client$i.json" 2>"$T_OUT/client$i.err" || { cat "$T_OUT/client$i.err"; fail "rail $i: client failed"; }
    wait $! || { cat "$T_OUT/server$i.err"; fail "rail $i: server failed"; }
    same_as_rails "$T_OUT/client$i.json" "$T_OUT/railsA.json" "$nd" "client rail $i"
    same_as_rails "$T_OUT/server$i.json" "$T_OUT/railsB.json" "$nd" "server rail $i"
  done
}

# The probe in a lab pod: no FAIL; WARN only for what does not apply (no Kubernetes, no GPU)
# and for the lab's /dev/shm (a tmpfs of half the guest's 1 GiB).
test_probe_in_pod_mostly_passes() {
  probe_expect podA "rails uverbs-files uverbs-open memlock memory-registration rdma-netns-mode rail-gids host-network" \
    "cluster-dns dev-shm gpu-isolation"
}

# A uverbs file this process cannot open (mode 0000 under a non-root user) fails uverbs-open,
# and the probe exits 1.
test_probe_fails_when_a_device_cannot_be_opened() {
  local rc=0
  in_pod podA setpriv --reuid=65534 --regid=65534 --clear-groups "$RDMABW" probe --json \
    >"$T_OUT/probe.json" 2>"$T_OUT/probe.err" || rc=$?
  # Without root the uverbs files (crw-rw-rw-) still open; memlock is what the guest gives.
  echo "probe as nobody: exit $rc"
  json_get "$T_OUT/probe.json" '.checks[] | "\(.name)\t\(.status) \(.detail)"'
  chmod 000 /dev/infiniband/uverbs0
  rc=0
  in_pod podA setpriv --reuid=65534 --regid=65534 --clear-groups "$RDMABW" probe --json \
    >"$T_OUT/probe-denied.json" 2>"$T_OUT/probe-denied.err" || rc=$?
  chmod 666 /dev/infiniband/uverbs0
  [ "$rc" -eq 1 ] || fail "probe with an unopenable uverbs0 exited $rc, not 1"
  [ "$(json_get "$T_OUT/probe-denied.json" '[.checks[] | select(.name == "uverbs-open") | .status][0]')" = FAIL ] \
    || fail "uverbs-open did not fail"
  json_get "$T_OUT/probe-denied.json" '[.checks[] | select(.name == "uverbs-open") | .detail][0]'
}
