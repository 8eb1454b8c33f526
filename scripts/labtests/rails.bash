# Helpers shared by the rails*.sh lab suites, sourced by them (not a suite: scripts/test runs *.sh).
# shellcheck shell=bash

# sysfs_gid_index DEV IPV4: what lib.sh's gid_index reads (the index of the IPv4-mapped GID of
# IPV4 on DEV, from sysfs), the lowest such index, in one grep: rxe's GID table has 1024
# entries, and one `cat` per entry takes minutes under emulation when the GID sits at index 4.
sysfs_gid_index() {
  local want
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${2//./ })
  grep -lx "$want" /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null | sed 's#.*/##' | sort -n | head -1 | grep . \
    || fail "no GID $want on $1"
}

# check_rails_of POD ATTACHMENT: `rdmabw rails` in POD lists every rail of the topology with its
# interface, address, device and GID index (sysfs_gid_index, an independent sysfs read), as
# usable, with ATTACHMENT; prints the table.
check_rails_of() {
  local pod=$1 want_att=$2 i row iface ip dev gi
  in_pod "$pod" "$RDMABW" rails >"$T_OUT/rails-$pod.txt" 2>"$T_OUT/rails-$pod.err" \
    || { cat "$T_OUT/rails-$pod.err"; fail "rdmabw rails failed in $pod"; }
  echo "--- $pod"; cat "$T_OUT/rails-$pod.txt"
  for ((i = 0; i < LAB_RAILS; i++)); do
    iface=$(topo "$pod" "$i" iface); ip=$(topo "$pod" "$i" ipv4); dev=$(topo "$pod" "$i" rdma_dev)
    gi=$(sysfs_gid_index "$dev" "$ip")
    # RAIL IFACE IPV4 DEVICE PORT GID_INDEX STATE GBPS MTU PCI NUMA GPUS ATTACHMENT USABLE
    row=$(awk -v r="$i" 'NR > 1 && $1 == r' "$T_OUT/rails-$pod.txt")
    [ -n "$row" ] || fail "$pod: no row for rail $i"
    set -- $row
    [ "$2" = "$iface" ] || fail "$pod rail $i: interface $2, topology says $iface"
    [ "$3" = "$ip" ] || fail "$pod rail $i: address $3, topology says $ip"
    [ "$4" = "$dev" ] || fail "$pod rail $i: device $4, topology says $dev"
    [ "$6" = "$gi" ] || fail "$pod rail $i: GID index $6, sysfs says $gi for $ip on $dev"
    [ "$7" = ACTIVE ] || fail "$pod rail $i: state $7"
    [ "${13}" = "$want_att" ] || fail "$pod rail $i: attachment ${13}, expected $want_att"
    [ "${14}" = yes ] || fail "$pod rail $i: not usable: $row"
  done
}

# same_as_rails BWREPORT RAILSREPORT IFACE WHAT: the test's local device, port and GID index are
# the rails row of IFACE.
same_as_rails() {
  local bw=$1 rails=$2 nd=$3 what=$4 used listed
  used=$(json_get "$bw" '"\(.local.device) \(.local.port) \(.local.gid_index)"')
  listed=$(json_get "$rails" "[.rails[] | select(.iface == \"$nd\") | \"\\(.device) \\(.port) \\(.gid_index)\"][0]")
  echo "$what ($nd): used $used, rails printed $listed"
  [ "$used" = "$listed" ] || fail "$what: used $used, but rails printed $listed"
}

# probe_expect POD "PASS CHECKS" "WARN CHECKS": rdmabw probe in POD exits 0 and gives exactly
# these statuses (and no FAIL); prints the table.
probe_expect() {
  local pod=$1 c st rc=0
  in_pod "$pod" "$RDMABW" probe >"$T_OUT/probe-$pod.txt" 2>&1 || rc=$?
  cat "$T_OUT/probe-$pod.txt"
  [ "$rc" -eq 0 ] || fail "probe in $pod exited $rc"
  in_pod "$pod" "$RDMABW" probe --json >"$T_OUT/probe-$pod.json" 2>"$T_OUT/probe-$pod.err" || fail "probe --json in $pod"
  for c in $2; do
    st=$(json_get "$T_OUT/probe-$pod.json" "[.checks[] | select(.name == \"$c\") | .status][0]")
    [ "$st" = PASS ] || fail "$pod probe: $c is $st, expected PASS"
  done
  for c in $3; do
    st=$(json_get "$T_OUT/probe-$pod.json" "[.checks[] | select(.name == \"$c\") | .status][0]")
    [ "$st" = WARN ] || fail "$pod probe: $c is $st, expected WARN"
  done
}
