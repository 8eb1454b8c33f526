package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// One agent process for many nodes (--count N): a fleet of a thousand nodes on one machine
// (scripts/bench-fleet). Each node is what a single agent runs (startNode): its own identity
// (kubeconfig, so NodeRestriction holds), its own kubelet port (--port + I - --first-index, as
// the API server reaches a node by its address and daemon port), its own lease, informers and
// pods; only the process is shared. A pod's processes learn their node from TESTCLUSTER_NODE.

// startConcurrency is how many nodes register at once: a thousand at a time would each list
// and watch four resources in the same second, and the API server's priority and fairness
// answers that with 429s that client-go retries after a second, slower than a queue here.
const startConcurrency = 32

// forNode is node i's options: the name prefix and index joined, its port, and {name}
// replaced in the files that are per node.
func (o *nodeOptions) forNode(i int) *nodeOptions {
	c := *o
	c.count = 0
	c.name = o.name + strconv.Itoa(i)
	c.port = o.port + i - o.firstIndex
	c.kubeconfig = strings.ReplaceAll(o.kubeconfig, "{name}", c.name)
	c.cniState = strings.ReplaceAll(o.cniState, "{name}", c.name)
	if !o.draIfPrefixSet {
		n := c.name
		if len(n) > 6 {
			n = n[:6]
		}
		c.draIfPrefix = "dra-" + n + "-"
	}
	return &c
}

// runNodes runs --count nodes until SIGTERM/SIGINT or until one of them fails: then every
// node's pods are killed and the exit status is 1.
func runNodes(ctx context.Context, o *nodeOptions) int {
	t0 := time.Now()
	nodes := make([]*agentNode, o.count)
	codes := make([]int, o.count)
	sem := make(chan struct{}, startConcurrency)
	var wg sync.WaitGroup
	for k := range o.count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() == nil {
				nodes[k], codes[k] = startNode(ctx, o.forNode(o.firstIndex+k))
			}
		}()
	}
	wg.Wait()
	shutdown := func() {
		var stopping sync.WaitGroup
		for _, an := range nodes {
			if an == nil {
				continue
			}
			stopping.Add(1)
			go func() {
				defer stopping.Done()
				an.p.killAll()
				an.close()
				<-an.n.Done()
			}()
		}
		stopping.Wait()
	}
	code := 0
	for k, an := range nodes {
		if an == nil {
			code = max(code, codes[k], 1)
		}
	}
	if code != 0 || ctx.Err() != nil {
		shutdown()
		return max(code, 1)
	}
	last := o.forNode(o.firstIndex + o.count - 1)
	fmt.Fprintf(os.Stderr, "testcluster node %s%d..%s: %d nodes ready in %.1f s (kubelet ports %s:%d..%d, pods in netns %s)\n",
		o.name, o.firstIndex, last.name, o.count, time.Since(t0).Seconds(), o.listen, o.port, last.port, o.netns)
	failed := make(chan *agentNode, len(nodes))
	for _, an := range nodes {
		go func() {
			<-an.n.Done()
			if an.n.Err() != nil {
				failed <- an
			}
		}()
	}
	select {
	case <-ctx.Done():
	case an := <-failed:
		fmt.Fprintf(os.Stderr, "testcluster node %s: %v\n", an.p.opts.name, an.n.Err())
		code = 1
	}
	shutdown()
	return code
}
