# lab: --layout ipvlan --rails 4
# `rdmabw rails` (issue 4) in the lab's ipvlan layout: rail masters rdma<i> and rxe<i> in the
# initial namespace, each pod an IPvlan child net<i+1> of every master, whose GID lands on the
# master's rxe device at another index in each pod. (RDMA traffic does not flow between IPvlan
# children over rxe, so this suite checks discovery only.)

TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# shellcheck source=scripts/labtests/rails.bash
. "$RAILBENCH_SUITE_DIR/rails.bash"

# Each pod gets the GID index of its own child on the master's device.
test_rails_ipvlan_each_pod_its_own_childs_gid() {
  check_rails_of podA ipvlan
  check_rails_of podB ipvlan
}

# Two pods on one rail: one device, two different GID indexes; neither is the master's own.
test_two_pods_on_one_rail_get_different_indexes() {
  local i a b master
  in_pod podA "$RDMABW" rails --json >"$T_OUT/a.json" || fail "rails in podA"
  in_pod podB "$RDMABW" rails --json >"$T_OUT/b.json" || fail "rails in podB"
  for ((i = 0; i < LAB_RAILS; i++)); do
    a=$(json_get "$T_OUT/a.json" "[.rails[] | select(.rail == $i) | \"\\(.device) \\(.gid_index)\"][0]")
    b=$(json_get "$T_OUT/b.json" "[.rails[] | select(.rail == $i) | \"\\(.device) \\(.gid_index)\"][0]")
    master=$(sysfs_gid_index "rxe$i" "10.224.$i.254")
    echo "rail $i: podA $a, podB $b, the master rdma$i's own GID index $master"
    [ "${a% *}" = "${b% *}" ] || fail "rail $i: different devices $a / $b"
    [ "${a#* }" != "${b#* }" ] || fail "rail $i: both pods got GID index ${a#* }"
    [ "${a#* }" != "$master" ] && [ "${b#* }" != "$master" ] || fail "rail $i: a pod got the master's GID $master"
  done
}

# The probe in an IPvlan pod: the shared RDMA netns mode, every rail's GID usable.
test_probe_in_an_ipvlan_pod() {
  probe_expect podB "rails uverbs-files uverbs-open memlock memory-registration rdma-netns-mode rail-gids host-network" \
    "cluster-dns dev-shm gpu-isolation"
}
