// Command testcluster is railbench's test infrastructure, not part of the product: one binary
// that runs the real Kubernetes control plane (kube-apiserver, kube-scheduler and
// kube-controller-manager from k8s.io/kubernetes, etcd from go.etcd.io/etcd/server/v3) and the
// node agent whose pods are network namespaces of this machine or of the Soft-RoCE lab guest.
//
// Usage: testcluster COMMAND [ARGS...]
//
//	kube-apiserver ARGS...           the upstream kube-apiserver command, unmodified
//	kube-scheduler ARGS...           the upstream kube-scheduler command, unmodified
//	kube-controller-manager ARGS...  the upstream kube-controller-manager command, unmodified
//	etcd --data-dir D --listen URL   an embedded etcd server
//	pki --dir D --ip IP ...          certificates, keys and kubeconfigs for a cluster
//	node --name N ...                the node agent (virtual-kubelet with this project's provider)
//	version                          the Kubernetes version this binary was built from
//
// scripts/cluster drives these; see docs/testing.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage: testcluster COMMAND [ARGS...]
commands: kube-apiserver, kube-scheduler, kube-controller-manager (upstream, unmodified),
          etcd, pki, node, version (see scripts/cluster and docs/testing.md)`

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "testcluster" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	switch name {
	case "kube-apiserver":
		os.Exit(upstream(apiserver.NewAPIServerCommand(), args))
	case "kube-scheduler":
		os.Exit(upstream(scheduler.NewSchedulerCommand(), args))
	case "kube-controller-manager":
		os.Exit(upstream(controllermanager.NewControllerManagerCommand(), args))
	case "etcd":
		os.Exit(runEtcd(args))
	case "pki":
		os.Exit(runPKI(args))
	case "node":
		os.Exit(runNode(args))
	case "version":
		fmt.Println(kubernetesVersion())
	case "-h", "--help", "help":
		fmt.Println(usage)
	default:
		fmt.Fprintf(os.Stderr, "testcluster: unknown command %q\n%s\n", name, usage)
		os.Exit(2)
	}
}

// upstream runs one of Kubernetes' own component commands with the given arguments, as its
// main package does.
func upstream(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	return cli.Run(cmd)
}
