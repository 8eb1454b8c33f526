package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// nodeOptions are the node agent's flags, resolved.
type nodeOptions struct {
	name, kubeconfig, address, listen, podIP, netns string
	port                                            int
	cert, key, clientCA                             string
	labels                                          map[string]string
	taints                                          []v1.Taint
	capacity                                        v1.ResourceList
	pullFails, pullSlow                             map[string]bool
	numaNodes                                       int
	cniBin, cniState, podNetwork                    string
	// DRA (dra.go): rails published as dranet's devices, GPUs of a fixture layout.
	draRails, draFirst               int
	draLayout, draIfPrefix, draNetns string
	draRxe                           bool
	// count > 0: one agent for count nodes (multi.go); name is then their prefix.
	count, firstIndex int
	draIfPrefixSet    bool
}

func parseNodeFlags(args []string) (*nodeOptions, error) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	o := &nodeOptions{labels: map[string]string{}, pullFails: map[string]bool{}, pullSlow: map[string]bool{}}
	var labels, taints, capacity, pullFails, pullSlow listFlag
	fs.StringVar(&o.name, "name", "", "node name (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the node's identity (required)")
	fs.StringVar(&o.address, "address", "", "the node's InternalIP, where the API server reaches its kubelet port (required; not loopback)")
	fs.IntVar(&o.port, "port", 10250, "kubelet port")
	fs.StringVar(&o.listen, "listen", "", "the address the kubelet port binds, where it differs from --address: in the lab guest, "+
		"whose kubelet port the host forwards from --address (default: --address)")
	fs.StringVar(&o.podIP, "pod-ip", "", "the IP reported for the node's pods that are not on the host network (default: --address)")
	fs.StringVar(&o.netns, "netns", "-", "where the node's pods run: - in the agent's own network namespace; per-pod in one it makes for each pod "+
		"not on the host network, with the networks of its "+networksAnnotation+" annotation attached by CNI; NAME in that "+
		"existing namespace, every pod (the lab's pod namespaces, whose rails exist already)")
	fs.IntVar(&o.numaNodes, "numa-nodes", 0, "a Topology Manager with policy restricted over N NUMA nodes, each extended resource spread evenly (0: none)")
	fs.IntVar(&o.draRails, "dra-rails", 0, "publish N rail NICs in a ResourceSlice of driver "+draNetDriver+" (dranet's) and give a pod the rails "+
		"its claims were allocated (0: none)")
	fs.StringVar(&o.draLayout, "dra-layout", "", "b4.8: the rails over 4 PCIe roots, and 8 GPUs (driver "+draGPUDriver+") 2 per root")
	fs.StringVar(&o.draIfPrefix, "dra-ifname", "", "the rails' interfaces are PREFIX0, PREFIX1, ... (default dra-NODE-, NODE cut to 6); "+
		"one that does not exist is made, a veth pair (its peer PREFIXIp stays)")
	fs.IntVar(&o.draFirst, "dra-first", 0, "the number of the first rail's interface (1 for the lab's net1, net2, ...)")
	fs.StringVar(&o.draNetns, "dra-netns", "-", "the network namespace the rails live in while no pod has them (-: the agent's own)")
	fs.BoolVar(&o.draRxe, "dra-rxe", false, "a rail's rxe device follows it into the pod (deleted, made again there), as in the lab")
	fs.StringVar(&o.cniBin, "cni-bin", "/usr/lib/cni", "the CNI plugin binaries (--netns per-pod)")
	fs.StringVar(&o.podNetwork, "pod-network", "", "a CNI config file: the network every pod of its own namespace gets as eth0, whose IPv4 address is the pod's IP (default: none, the pod's IP is --pod-ip)")
	fs.StringVar(&o.cniState, "cni-state", "", "the node's CNI state: host-local's leases, when a config names no dataDir (required with --netns per-pod)")
	fs.StringVar(&o.cert, "tls-cert", "", "serving certificate of the kubelet port (required)")
	fs.StringVar(&o.key, "tls-key", "", "its key (required)")
	fs.StringVar(&o.clientCA, "client-ca", "", "CA of the API server's kubelet client certificate (required)")
	fs.Var(&labels, "label", "KEY=VALUE node label (repeatable)")
	fs.Var(&taints, "taint", "KEY[=VALUE]:EFFECT node taint (repeatable)")
	fs.Var(&capacity, "capacity", "RESOURCE=QUANTITY in capacity and allocatable (repeatable; cpu, memory and pods have defaults)")
	fs.Var(&pullFails, "pull-fails", "IMAGE whose pull fails, in the kubelet's words (repeatable)")
	fs.Var(&pullSlow, "pull-slow", "IMAGE whose pull takes a minute (repeatable)")
	fs.IntVar(&o.count, "count", 0, "host N nodes in this one process (0: one node, --name): nodes NAME"+
		"I for I from --first-index, node I's kubelet port --port+I-first; {name} in --kubeconfig and --cni-state "+
		"becomes each node's name (see multi.go)")
	fs.IntVar(&o.firstIndex, "first-index", 1, "the number of the first node with --count")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for flagName, v := range map[string]string{"--name": o.name, "--kubeconfig": o.kubeconfig, "--address": o.address,
		"--tls-cert": o.cert, "--tls-key": o.key, "--client-ca": o.clientCA} {
		if v == "" {
			return nil, fmt.Errorf("%s is required", flagName)
		}
	}
	if ip := net.ParseIP(o.address); ip == nil || ip.IsLoopback() {
		return nil, fmt.Errorf("--address %q: give a non-loopback IP address (a kubelet refuses a loopback node IP)", o.address)
	}
	if o.podIP == "" {
		o.podIP = o.address
	}
	if o.listen == "" {
		o.listen = o.address
	}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		o.labels[k] = v
	}
	for _, t := range taints {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("--taint %q: want KEY[=VALUE]:EFFECT", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		o.taints = append(o.taints, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	o.capacity = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("16"),
		v1.ResourceMemory: resource.MustParse("64Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	for _, c := range capacity {
		k, v, ok := strings.Cut(c, "=")
		q, err := resource.ParseQuantity(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("--capacity %q: want RESOURCE=QUANTITY", c)
		}
		o.capacity[v1.ResourceName(k)] = q
	}
	for _, i := range pullFails {
		o.pullFails[i] = true
	}
	for _, i := range pullSlow {
		o.pullSlow[i] = true
	}
	if o.count < 0 || o.firstIndex < 0 {
		return nil, fmt.Errorf("--count %d, --first-index %d: want numbers of at least 0", o.count, o.firstIndex)
	}
	o.draIfPrefixSet = o.draIfPrefix != ""
	if o.draIfPrefix == "" {
		n := o.name
		if len(n) > 6 {
			n = n[:6]
		}
		o.draIfPrefix = "dra-" + n + "-"
	}
	if o.draLayout != "" && o.draLayout != "b4.8" {
		return nil, fmt.Errorf("--dra-layout %q: the only layout is b4.8", o.draLayout)
	}
	if o.draRails > 0 && o.netns != "per-pod" && o.podNetwork == "" {
		return nil, fmt.Errorf("--dra-rails needs --netns per-pod, or --pod-network: a rail moves into the namespace of the pod it is allocated to, which needs a network of its own")
	}
	if (o.netns == "per-pod" || o.podNetwork != "") && o.cniState == "" {
		return nil, fmt.Errorf("--netns per-pod and --pod-network need --cni-state DIR (host-local's leases)")
	}
	return o, nil
}

// runNode registers one node (or, with --count, many: multi.go) and runs the pods the
// scheduler binds to it until SIGTERM/SIGINT.
func runNode(args []string) int {
	o, err := parseNodeFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if o.count > 0 {
		return runNodes(ctx, o)
	}
	an, code := startNode(ctx, o)
	if an == nil {
		return code
	}
	defer an.close()
	fmt.Fprintf(os.Stderr, "testcluster node %s: ready (kubelet port %s:%d, pods in netns %s, %d DRA rails)\n", o.name, o.listen, o.port, o.netns, o.draRails)
	select {
	case <-ctx.Done():
	case <-an.n.Done():
		if err := an.n.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster node %s: %v\n", o.name, err)
			an.p.killAll()
			return 1
		}
	}
	an.p.killAll()
	<-an.n.Done()
	return 0
}

// agentNode is one node the agent runs: virtual-kubelet's node, this project's provider, and
// what to undo when it stops (the event broadcaster, DRA's slices).
type agentNode struct {
	n    *nodeutil.Node
	p    *provider
	undo []func()
}

func (an *agentNode) close() {
	for i := len(an.undo) - 1; i >= 0; i-- {
		an.undo[i]()
	}
}

// startNode registers node o and waits until it is ready. On a failure it says why on stderr
// and returns nil and the exit status (2: a flag's file, 1: the node).
func startNode(ctx context.Context, o *nodeOptions) (*agentNode, int) {
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: --kubeconfig %s: %v\n", o.kubeconfig, err)
		return nil, 2
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: %v\n", err)
		return nil, 2
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: %v\n", err)
		return nil, 2
	}

	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	ctx, cancel := context.WithCancel(ctx)
	an := &agentNode{undo: []func(){cancel, eb.Shutdown}}
	recorder := eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: o.name})
	p := &provider{opts: o, pods: map[string]*agentPod{}, events: recorder, client: client,
		cni: &cniRunner{client: dyn, binDir: o.cniBin, dataDir: filepath.Join(o.cniState, "networks"), podNetwork: o.podNetwork}}

	httpMux := http.NewServeMux()
	n, err := nodeutil.NewNode(o.name, func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		p.configureNode(cfg.Node)
		return p, nil, nil
	}, func(cfg *nodeutil.NodeConfig) error {
		cfg.Handler = httpMux
		cfg.HTTPListenAddr = net.JoinHostPort(o.listen, strconv.Itoa(o.port))
		cfg.EventRecorder = recorder
		cfg.NumWorkers = 4
		cfg.StreamIdleTimeout = 4 * time.Hour
		cfg.StreamCreationTimeout = 30 * time.Second
		return nil
	},
		nodeutil.WithClient(client),
		withWebhookAuth(o),
		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(o.cert, o.key), nodeutil.WithCAFromPath(o.clientCA)),
		nodeutil.AttachProviderRoutes(httpMux),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node %s: %v\n", o.name, err)
		an.close()
		return nil, 1
	}
	an.n, an.p = n, p
	go n.Run(ctx) //nolint:errcheck
	if err := n.WaitReady(ctx, 60*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node %s: not ready: %v\n", o.name, err)
		an.close()
		return nil, 1
	}
	if o.draRails > 0 {
		if err := p.publishSlices(ctx, client); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster node %s: DRA: %v\n", o.name, err)
			p.unpublish(client)
			an.close()
			return nil, 1
		}
		an.undo = append(an.undo, func() { p.unpublish(client) })
	}
	return an, 0
}

// provider runs a node's pods as processes: each container's command, in the node's network
// namespace, with exec through the kubelet API that the API server proxies to.
type provider struct {
	opts   *nodeOptions
	events record.EventRecorder
	cni    *cniRunner
	client kubernetes.Interface
	// draMade are the rail interfaces the agent made (veth pairs), deleted at shutdown.
	draMade []string

	mu     sync.Mutex
	pods   map[string]*agentPod
	notify func(*v1.Pod)
}

type agentPod struct {
	pod   *v1.Pod
	procs map[string]*exec.Cmd
	logs  map[string]*syncBuffer
	// execs are the processes exec started in the pod, by PID: a container's cgroup holds
	// them under a kubelet, so they end with the pod.
	execs map[int]*exec.Cmd
	// sandbox is the pod's own network namespace and the networks attached to it (--netns
	// per-pod); gone is closed when the pod is deleted, which ends a start in progress.
	sandbox *sandbox
	gone    chan struct{}
}

// deleted says whether DeletePod (or the agent's shutdown) has taken the pod: gone is closed
// under p.mu at the same moment it leaves p.pods.
func (ap *agentPod) deleted() bool {
	select {
	case <-ap.gone:
		return true
	default:
		return false
	}
}

type sandbox struct {
	netns string
	// ip is the pod's address on its own network (--pod-network), if it has one.
	ip       string
	networks []attachment
	// rails are the DRA rails moved into the namespace (dra.go).
	rails []movedRail
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func podKey(ns, name string) string { return ns + "/" + name }

func (p *provider) configureNode(n *v1.Node) {
	o := p.opts
	n.Labels = map[string]string{
		"kubernetes.io/hostname": o.name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     runtime.GOARCH,
	}
	for k, v := range o.labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = o.taints
	// As a kubelet reports them; Ready is set by the node controller once registered.
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	for _, c := range []struct {
		t      v1.NodeConditionType
		reason string
	}{{v1.NodeMemoryPressure, "KubeletHasSufficientMemory"}, {v1.NodeDiskPressure, "KubeletHasNoDiskPressure"},
		{v1.NodePIDPressure, "KubeletHasSufficientPID"}} {
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{
			Type: c.t, Status: v1.ConditionFalse, Reason: c.reason,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		})
	}
	n.Status.Capacity = o.capacity.DeepCopy()
	n.Status.Allocatable = o.capacity.DeepCopy()
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: o.address},
		{Type: v1.NodeHostName, Address: o.name},
	}
	n.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(o.port)}}
	n.Status.NodeInfo = v1.NodeSystemInfo{
		KubeletVersion:          kubernetesVersion(),
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
		ContainerRuntimeVersion: "testcluster://" + kubernetesVersion(),
	}
}

// command is how a container's argv runs: in the pod's network namespace with its own view
// of /sys (ip netns exec), so rdmabw sees that namespace's interfaces and RDMA devices.
func (p *provider) command(ap *agentPod, argv []string) *exec.Cmd {
	netns := p.opts.netns
	if ap.sandbox != nil {
		netns = ap.sandbox.netns
	} else if netns == "per-pod" {
		netns = "-"
	}
	if netns != "-" {
		argv = append([]string{"ip", "netns", "exec", netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The node's name, for a program that asks which node it runs on: one agent may host many
	// nodes (--count), so the agent's own command line does not say.
	cmd.Env = append(os.Environ(), "TESTCLUSTER_NODE="+p.opts.name)
	return cmd
}

// podIP is a pod's IP as its node reports it: a hostNetwork pod has the node's, except with
// --netns NAME, where every pod runs in that namespace (a lab pod standing for the node's
// host network too) and so has its address.
func (p *provider) podIP(pod *v1.Pod, sb *sandbox) string {
	if sb != nil && sb.ip != "" {
		return sb.ip
	}
	fixed := p.opts.netns != "-" && p.opts.netns != "per-pod"
	if pod.Spec.HostNetwork && !fixed {
		return p.opts.address
	}
	return p.opts.podIP
}

func (p *provider) setNotify(pod *v1.Pod) {
	p.mu.Lock()
	f := p.notify
	p.mu.Unlock()
	if f != nil {
		f(pod.DeepCopy())
	}
}

// CreatePod admits the pod (the Topology Manager, with --numa-nodes), reports it Pending, and
// starts it in the background as a kubelet does: the sandbox (network namespace and CNI), the
// image pull, then the containers. DeletePod ends a start in progress.
func (p *provider) CreatePod(ctx context.Context, in *v1.Pod) error {
	pod := in.DeepCopy()
	now := metav1.Now()
	ap := &agentPod{pod: pod, procs: map[string]*exec.Cmd{}, logs: map[string]*syncBuffer{}, execs: map[int]*exec.Cmd{},
		gone: make(chan struct{})}
	pod.Status = v1.PodStatus{
		Phase:     v1.PodPending,
		HostIP:    p.opts.address,
		HostIPs:   []v1.HostIP{{IP: p.opts.address}},
		StartTime: &now,
		// The resourceclaim controller's record of the pod's claims: a status update that
		// drops it is refused by the API server.
		ResourceClaimStatuses: in.Status.ResourceClaimStatuses,
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
	}
	refusal := p.topologyRefusal(pod)
	if refusal != "" {
		pod.Status.Phase, pod.Status.Reason = v1.PodFailed, "TopologyAffinityError"
		pod.Status.Message = "Pod was rejected: " + refusal
		p.events.Event(pod, v1.EventTypeWarning, "TopologyAffinityError", refusal)
	} else {
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			})
		}
		p.refreshPhase(pod)
	}
	p.mu.Lock()
	p.pods[podKey(pod.Namespace, pod.Name)] = ap
	p.mu.Unlock()
	p.setNotify(pod)
	if refusal == "" {
		go p.start(ap)
	}
	return nil
}

// topologyRefusal is the Topology Manager's refusal (policy restricted, scope pod) over
// --numa-nodes NUMA nodes that share each extended resource evenly: the merged affinity is
// not preferred when the resources' narrowest spans differ. Empty when admitted.
func (p *provider) topologyRefusal(pod *v1.Pod) string {
	k := int64(p.opts.numaNodes)
	if k <= 0 {
		return ""
	}
	var spans []int64
	for _, c := range pod.Spec.Containers {
		for r, q := range c.Resources.Limits {
			capacity, ok := p.opts.capacity[r]
			if !ok || !strings.Contains(string(r), "/") {
				continue
			}
			if per := capacity.Value() / k; per > 0 {
				spans = append(spans, (q.Value()+per-1)/per)
			}
		}
	}
	for _, s := range spans {
		if s != spans[0] {
			return "Resources cannot be allocated with Topology locality"
		}
	}
	return ""
}

// start brings a pod up: sandbox, image, containers. Each step reports as a kubelet does.
func (p *provider) start(ap *agentPod) {
	pod := ap.pod // its spec does not change; its status only under p.mu
	if p.sandboxed(pod) {
		sb, err := p.makeSandbox(pod)
		if err != nil {
			p.events.Event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", err.Error())
			return
		}
		if err := p.prepareResources(pod, sb); err != nil {
			p.events.Event(pod, v1.EventTypeWarning, "FailedPrepareDynamicResources", err.Error())
			p.removeSandbox(pod, sb)
			return
		}
		p.mu.Lock()
		deleted := ap.deleted()
		if !deleted {
			ap.sandbox = sb
		}
		p.mu.Unlock()
		if deleted {
			p.removeSandbox(pod, sb)
			return
		}
	}
	for _, c := range pod.Spec.Containers {
		if !p.opts.pullSlow[c.Image] {
			continue
		}
		p.events.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
		select {
		case <-ap.gone:
			return
		case <-time.After(time.Minute):
		}
		p.events.Eventf(pod, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in 1m0s", c.Image)
	}
	p.mu.Lock()
	if ap.deleted() {
		p.mu.Unlock()
		return
	}
	pod.Status.PodIP = p.podIP(pod, ap.sandbox)
	pod.Status.PodIPs = []v1.PodIP{{IP: pod.Status.PodIP}}
	for i, c := range pod.Spec.Containers {
		p.startContainer(ap, c, &pod.Status.ContainerStatuses[i])
	}
	p.refreshPhase(pod)
	p.mu.Unlock()
	p.setNotify(pod)
}

// startContainer pulls (or fails to) and starts one container; p.mu is held.
func (p *provider) startContainer(ap *agentPod, c v1.Container, status *v1.ContainerStatus) {
	pod := ap.pod
	if p.opts.pullFails[c.Image] {
		msg := fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: pull access denied, repository does not exist or may require authorization", c.Image, c.Image)
		p.events.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
		p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", c.Image, msg)
		p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		status.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}}
		return
	}
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		argv = []string{"sleep", "infinity"}
	}
	cmd := p.command(ap, argv)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if !p.opts.pullSlow[c.Image] {
		p.events.Eventf(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
	}
	if err := cmd.Start(); err != nil {
		p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: failed to create containerd task: %v", err)
		status.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}}
		return
	}
	p.events.Eventf(pod, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	p.events.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	ap.procs[c.Name], ap.logs[c.Name] = cmd, logs
	started := true
	*status = v1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: &started,
		ContainerID: fmt.Sprintf("testcluster://%s-%d", pod.UID, cmd.Process.Pid),
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}
	go p.wait(podKey(pod.Namespace, pod.Name), c.Name, cmd)
}

// sandboxed says whether a pod gets a network namespace of its own: every pod but a
// hostNetwork one with --netns per-pod; with --pod-network also, whatever --netns says, a pod
// with resource claims on a node whose rails DRA gives out (the rails move into the pod).
func (p *provider) sandboxed(pod *v1.Pod) bool {
	if pod.Spec.HostNetwork {
		return false
	}
	return p.opts.netns == "per-pod" ||
		(p.opts.podNetwork != "" && p.opts.draRails > 0 && len(pod.Spec.ResourceClaims) > 0)
}

// makeSandbox creates the pod's network namespace and attaches its networks; on a failure
// nothing is left and the error is the FailedCreatePodSandBox event's text.
func (p *provider) makeSandbox(pod *v1.Pod) (*sandbox, error) {
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	sb := &sandbox{netns: fmt.Sprintf("tc-%s-%.12s", p.opts.name, uid)}
	if out, err := exec.Command("ip", "netns", "add", sb.netns).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create network namespace %s: %s", sb.netns, strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "-n", sb.netns, "link", "set", "lo", "up").Run()
	if p.opts.podNetwork != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		a, ip, err := p.cni.primary(ctx, pod, sb.netns)
		if err != nil {
			_ = exec.Command("ip", "netns", "del", sb.netns).Run()
			return nil, err
		}
		sb.networks, sb.ip = []attachment{a}, ip
	}
	if _, ok := pod.Annotations[networksAnnotation]; ok {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		nets, err := p.cni.add(ctx, pod, sb.netns)
		if err != nil {
			p.cni.del(pod, sb.netns, sb.networks)
			_ = exec.Command("ip", "netns", "del", sb.netns).Run()
			return nil, err
		}
		sb.networks = append(sb.networks, nets...)
	}
	return sb, nil
}

// removeSandbox detaches the networks (CNI DEL: host-local frees the addresses) and deletes
// the namespace.
func (p *provider) removeSandbox(pod *v1.Pod, sb *sandbox) {
	if sb == nil {
		return
	}
	p.takeRails(sb.netns, sb.rails)
	p.cni.del(pod, sb.netns, sb.networks)
	if out, err := exec.Command("ip", "netns", "del", sb.netns).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node %s: ip netns del %s: %s\n", p.opts.name, sb.netns, strings.TrimSpace(string(out)))
	}
}

// refreshPhase derives the pod's phase and readiness from its containers, as the kubelet does.
func (p *provider) refreshPhase(pod *v1.Pod) {
	now := metav1.Now()
	running, waiting, failed := 0, 0, 0
	for _, s := range pod.Status.ContainerStatuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Waiting != nil:
			waiting++
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			failed++
		}
	}
	ready := v1.ConditionFalse
	switch {
	case waiting > 0:
		pod.Status.Phase = v1.PodPending
	case running == len(pod.Spec.Containers):
		pod.Status.Phase = v1.PodRunning
		ready = v1.ConditionTrue
	case running > 0:
		pod.Status.Phase = v1.PodRunning
	case failed > 0:
		pod.Status.Phase = v1.PodFailed
	default:
		pod.Status.Phase = v1.PodSucceeded
	}
	var conds []v1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodReady && c.Type != v1.ContainersReady {
			conds = append(conds, c)
		}
	}
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		conds = append(conds, v1.PodCondition{Type: t, Status: ready, LastTransitionTime: now})
	}
	pod.Status.Conditions = conds
}

// wait records a container's end: its exit code (128+signal when killed) and the pod's phase.
func (p *provider) wait(key, container string, cmd *exec.Cmd) {
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = exitCode(ee)
	}
	p.mu.Lock()
	ap, ok := p.pods[key]
	if !ok || ap.procs[container] != cmd {
		p.mu.Unlock()
		return
	}
	delete(ap.procs, container)
	pod := ap.pod
	now := metav1.Now()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	for i := range pod.Status.ContainerStatuses {
		s := &pod.Status.ContainerStatuses[i]
		if s.Name != container {
			continue
		}
		var started metav1.Time
		if s.State.Running != nil {
			started = s.State.Running.StartedAt
		}
		s.Ready = false
		s.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: int32(code), Reason: reason, StartedAt: started, FinishedAt: now,
		}}
	}
	p.refreshPhase(pod)
	p.mu.Unlock()
	p.setNotify(pod)
}

func exitCode(ee *exec.ExitError) int {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

func (p *provider) UpdatePod(ctx context.Context, pod *v1.Pod) error { return nil }

// DeletePod stops the pod's processes (their whole process groups: SIGTERM, then SIGKILL
// after the grace period, at most 10 s) and reports the containers terminated.
func (p *provider) DeletePod(ctx context.Context, in *v1.Pod) error {
	key := podKey(in.Namespace, in.Name)
	// One critical section: once the pod is gone from p.pods no exec can start in it
	// (RunInContainer checks under the same lock), so every process is in procs.
	p.mu.Lock()
	ap, ok := p.pods[key]
	procs := map[string]*exec.Cmd{}
	var sb *sandbox
	if ok {
		delete(p.pods, key)
		close(ap.gone)
		sb = ap.sandbox
		for k, c := range ap.procs {
			procs[k] = c
		}
		for pid, c := range ap.execs {
			procs["exec-"+strconv.Itoa(pid)] = c
		}
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s not found on node %s", key, p.opts.name)
	}
	grace := 2 * time.Second
	if in.DeletionGracePeriodSeconds != nil {
		grace = min(time.Duration(*in.DeletionGracePeriodSeconds)*time.Second, 10*time.Second)
	}
	stopProcs(procs, grace)
	p.removeSandbox(ap.pod, sb)
	pod := ap.pod
	now := metav1.Now()
	for i := range pod.Status.ContainerStatuses {
		s := &pod.Status.ContainerStatuses[i]
		if s.State.Terminated == nil {
			var started metav1.Time
			if s.State.Running != nil {
				started = s.State.Running.StartedAt
			}
			s.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", StartedAt: started, FinishedAt: now,
			}}
		}
		s.Ready = false
	}
	p.events.Eventf(pod, v1.EventTypeNormal, "Killing", "Stopping container %s", pod.Spec.Containers[0].Name)
	pod.Status.Phase = v1.PodFailed
	p.setNotify(pod)
	return nil
}

func stopProcs(procs map[string]*exec.Cmd, grace time.Duration) {
	for _, c := range procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, c := range procs {
		for time.Now().Before(deadline) && syscall.Kill(-c.Process.Pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

// killAll ends every pod at shutdown: processes, networks, namespaces.
func (p *provider) killAll() {
	p.mu.Lock()
	pods := p.pods
	p.pods = map[string]*agentPod{}
	for _, ap := range pods {
		close(ap.gone)
		stopProcs(ap.procs, 0)
		for _, c := range ap.execs {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	p.mu.Unlock()
	for _, ap := range pods {
		p.removeSandbox(ap.pod, ap.sandbox)
	}
}

func (p *provider) GetPod(ctx context.Context, ns, name string) (*v1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ap, ok := p.pods[podKey(ns, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s not found", ns, name)
	}
	return ap.pod.DeepCopy(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*v1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(ctx context.Context) ([]*v1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*v1.Pod
	for _, ap := range p.pods {
		out = append(out, ap.pod.DeepCopy())
	}
	return out, nil
}

func (p *provider) NotifyPods(ctx context.Context, f func(*v1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

// execDelayAnnotation on a pod: a Go duration every exec in it waits before its process starts.
const execDelayAnnotation = "testcluster.railbench/exec-delay"

// RunInContainer runs an exec in the pod's network namespace. Its exit status goes back as
// the kubelet's does (k8s.io/utils/exec's CodeExitError becomes NonZeroExitCode). When the
// stream closes first the process keeps running, as under a kubelet: its output is then
// read and dropped so that it does not die of a broken pipe.
func (p *provider) RunInContainer(ctx context.Context, ns, name, container string, argv []string, attach api.AttachIO) error {
	p.mu.Lock()
	ap, ok := p.pods[podKey(ns, name)]
	running := ok && ap.procs[container] != nil
	var delay string
	if ok {
		delay = ap.pod.Annotations[execDelayAnnotation]
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s not found on node %s", ns, name, p.opts.name)
	}
	if !running {
		return errdefs.InvalidInputf("container %s of pod %s/%s is not running", container, ns, name)
	}
	if len(argv) == 0 {
		return errdefs.InvalidInput("no command")
	}
	// A node under load starts an exec's process late (a fleet round of 1,024 nodes on 2
	// cores took seconds): tests ask for that with the pod's annotation.
	if d, err := time.ParseDuration(delay); err == nil && d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The pod shares this machine's files, so the program is looked up here, before the
	// netns wrapper runs it; a missing one fails the exec as containerd words it.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("failed to exec in container: failed to start exec: OCI runtime exec failed: exec failed: unable to start container process: exec: %q: %v: unknown", argv[0], err)
	}
	p.mu.Lock()
	cmd := p.command(ap, argv)
	p.mu.Unlock()
	if in := attach.Stdin(); in != nil {
		cmd.Stdin = in
	}
	var copies sync.WaitGroup
	for _, s := range []struct {
		w    io.WriteCloser
		pipe func() (io.ReadCloser, error)
	}{{attach.Stdout(), cmd.StdoutPipe}, {attach.Stderr(), cmd.StderrPipe}} {
		if s.w == nil {
			continue
		}
		r, err := s.pipe()
		if err != nil {
			return err
		}
		copies.Add(1)
		go func(w io.Writer, r io.Reader) {
			defer copies.Done()
			if _, err := io.Copy(w, r); err != nil {
				_, _ = io.Copy(io.Discard, r)
			}
		}(s.w, r)
	}
	p.mu.Lock()
	if ap.deleted() {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s/%s was deleted on node %s", ns, name, p.opts.name)
	}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return utilexec.CodeExitError{Err: err, Code: 126}
	}
	pid := cmd.Process.Pid
	ap.execs[pid] = cmd
	p.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		copies.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		delete(ap.execs, pid)
		p.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return utilexec.CodeExitError{Err: err, Code: exitCode(ee)}
		}
		return err
	case <-ctx.Done():
		// The stream closed: the process goes on (see above); reap it when it ends.
		go func() { <-done }()
		return ctx.Err()
	}
}

func (p *provider) AttachToContainer(ctx context.Context, ns, name, container string, attach api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by the testcluster node agent")
}

func (p *provider) GetContainerLogs(ctx context.Context, ns, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ap, ok := p.pods[podKey(ns, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s not found", ns, name)
	}
	l, ok := ap.logs[container]
	if !ok {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return io.NopCloser(bytes.NewReader(l.Bytes())), nil
}

func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{}, nil
}

func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

func (p *provider) PortForward(ctx context.Context, ns, name string, port int32, stream io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported by the testcluster node agent")
}
