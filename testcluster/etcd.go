package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd serves one embedded etcd member until SIGTERM or SIGINT.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dir := fs.String("data-dir", "", "data folder (required)")
	listen := fs.String("listen", "http://127.0.0.1:2379", "client URL")
	peer := fs.String("peer", "http://127.0.0.1:2380", "peer URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "testcluster etcd: --data-dir is required")
		return 2
	}
	cu, err := url.Parse(*listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster etcd: --listen %q: %v\n", *listen, err)
		return 2
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster etcd: --peer %q: %v\n", *peer, err)
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = "testcluster"
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "testcluster etcd: ready on %s\n", *listen)
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "testcluster etcd: not ready after 60 s")
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "testcluster etcd: %v\n", err)
		return 1
	}
}
