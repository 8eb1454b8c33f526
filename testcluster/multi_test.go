package main

import "testing"

// With --count, node I's name, port and per-node files come from the prefix and the index.
func TestForNode(t *testing.T) {
	o, err := parseNodeFlags([]string{"--name", "bench-", "--count", "3", "--port", "14251",
		"--kubeconfig", "pki/node-{name}.kubeconfig", "--cni-state", "cni/{name}", "--address", "10.0.0.2",
		"--tls-cert", "c", "--tls-key", "k", "--client-ca", "ca"})
	if err != nil {
		t.Fatal(err)
	}
	n := o.forNode(3)
	if n.name != "bench-3" || n.port != 14253 || n.kubeconfig != "pki/node-bench-3.kubeconfig" ||
		n.cniState != "cni/bench-3" || n.draIfPrefix != "dra-bench--" || n.count != 0 {
		t.Fatalf("forNode(3) = name %q port %d kubeconfig %q cni %q dra %q count %d",
			n.name, n.port, n.kubeconfig, n.cniState, n.draIfPrefix, n.count)
	}
	if o.name != "bench-" || o.port != 14251 {
		t.Fatalf("forNode changed the template: %q %d", o.name, o.port)
	}
	if _, err := parseNodeFlags([]string{"--name", "x", "--count", "-1", "--kubeconfig", "k", "--address", "10.0.0.2",
		"--tls-cert", "c", "--tls-key", "k", "--client-ca", "ca"}); err == nil {
		t.Fatal("--count -1 accepted")
	}
}
