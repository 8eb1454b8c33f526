package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

// kubernetesVersion is the version of k8s.io/kubernetes compiled into this binary.
func kubernetesVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/kubernetes" {
				return d.Version
			}
		}
	}
	return "unknown"
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// runPKI writes a cluster's certificates and kubeconfigs into --dir:
// ca.{crt,key}; apiserver.{crt,key} (serving); kubelet.{crt,key} (the node agents' serving
// certificate); sa.{key,pub} (service-account tokens); and one kubeconfig per client:
// admin (system:masters), kube-scheduler, kube-controller-manager, apiserver-kubelet-client
// (certificate only) and node-NAME (system:node:NAME) for every --nodes name.
func runPKI(args []string) int {
	fs := flag.NewFlagSet("pki", flag.ContinueOnError)
	dir := fs.String("dir", "", "output folder (required)")
	server := fs.String("server", "https://127.0.0.1:6443", "the API server's URL written into the kubeconfigs")
	ips := fs.String("ip", "127.0.0.1", "comma-separated IP addresses the API server and node agents serve on")
	nodes := fs.String("nodes", "", "comma-separated node names")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "testcluster pki: --dir is required")
		return 2
	}
	var addrs []net.IP
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			fmt.Fprintf(os.Stderr, "testcluster pki: --ip %q is not an IP address\n", s)
			return 2
		}
		addrs = append(addrs, ip)
	}
	if err := writePKI(*dir, *server, addrs, splitList(*nodes)); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster pki: %v\n", err)
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func writePKI(dir, server string, ips []net.IP, nodes []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := issue(nil, pkix.Name{CommonName: "testcluster-ca"}, nil, nil, true)
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", ca); err != nil {
		return err
	}
	serving := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
	// 10.96.0.1 is the first address of the service range scripts/cluster gives the API server.
	apiIPs := append([]net.IP{net.ParseIP("10.96.0.1")}, ips...)
	for _, s := range []struct {
		name  string
		dns   []string
		addrs []net.IP
	}{{"apiserver", serving, apiIPs}, {"kubelet", append([]string{"localhost"}, nodes...), ips}} {
		kp, err := issue(ca, pkix.Name{CommonName: s.name}, s.dns, s.addrs, false)
		if err != nil {
			return err
		}
		if err := writePair(dir, s.name, kp); err != nil {
			return err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	clients := []struct{ file, cn, org string }{
		{"admin", "testcluster-admin", "system:masters"},
		{"kube-scheduler", "system:kube-scheduler", ""},
		{"kube-controller-manager", "system:kube-controller-manager", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
	}
	for _, n := range nodes {
		clients = append(clients, struct{ file, cn, org string }{"node-" + n, "system:node:" + n, "system:nodes"})
	}
	for _, c := range clients {
		name := pkix.Name{CommonName: c.cn}
		if c.org != "" {
			name.Organization = []string{c.org}
		}
		kp, err := issue(ca, name, nil, nil, false)
		if err != nil {
			return err
		}
		if err := writePair(dir, c.file, kp); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.file+".kubeconfig"), kubeconfig(server, c.cn, ca, kp), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// issue makes a key and a certificate signed by parent (self-signed when parent is nil).
func issue(parent *keyPair, name pkix.Name, dns []string, ips []net.IP, isCA bool) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               name,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		DNSNames:              dns,
		IPAddresses:           ips,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	signer, signerCert := crypto.Signer(key), tmpl
	if isCA {
		tmpl.IsCA = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	}
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	b, err := keyPEM(k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func writePair(dir, name string, kp *keyPair) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM(kp.cert), 0o600); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), kp.key)
}

func kubeconfig(server, user string, ca, kp *keyPair) []byte {
	b64 := base64.StdEncoding.EncodeToString
	key, _ := keyPEM(kp.key)
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: testcluster
  context:
    cluster: testcluster
    user: %s
    namespace: default
current-context: testcluster
`, server, b64(certPEM(ca.cert)), user, b64(certPEM(kp.cert)), b64(key), user))
}
