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
	name, kubeconfig, address, podIP, netns string
	port                                    int
	cert, key, clientCA                     string
	labels                                  map[string]string
	taints                                  []v1.Taint
	capacity                                v1.ResourceList
	pullFails                               map[string]bool
}

func parseNodeFlags(args []string) (*nodeOptions, error) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	o := &nodeOptions{labels: map[string]string{}, pullFails: map[string]bool{}}
	var labels, taints, capacity, pullFails listFlag
	fs.StringVar(&o.name, "name", "", "node name (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the node's identity (required)")
	fs.StringVar(&o.address, "address", "", "the node's InternalIP, where the API server reaches its kubelet port (required; not loopback)")
	fs.IntVar(&o.port, "port", 10250, "kubelet port")
	fs.StringVar(&o.podIP, "pod-ip", "", "the IP reported for the node's pods that are not on the host network (default: --address)")
	fs.StringVar(&o.netns, "netns", "-", "network namespace the node's pods run in; - runs them in the agent's own")
	fs.StringVar(&o.cert, "tls-cert", "", "serving certificate of the kubelet port (required)")
	fs.StringVar(&o.key, "tls-key", "", "its key (required)")
	fs.StringVar(&o.clientCA, "client-ca", "", "CA of the API server's kubelet client certificate (required)")
	fs.Var(&labels, "label", "KEY=VALUE node label (repeatable)")
	fs.Var(&taints, "taint", "KEY[=VALUE]:EFFECT node taint (repeatable)")
	fs.Var(&capacity, "capacity", "RESOURCE=QUANTITY in capacity and allocatable (repeatable; cpu, memory and pods have defaults)")
	fs.Var(&pullFails, "pull-fails", "IMAGE whose pull fails, in the kubelet's words (repeatable)")
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
	return o, nil
}

// runNode registers one node and runs the pods the scheduler binds to it until SIGTERM/SIGINT.
func runNode(args []string) int {
	o, err := parseNodeFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: %v\n", err)
		return 2
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: --kubeconfig %s: %v\n", o.kubeconfig, err)
		return 2
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer eb.Shutdown()
	recorder := eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: o.name})
	p := &provider{opts: o, pods: map[string]*agentPod{}, events: recorder}

	httpMux := http.NewServeMux()
	n, err := nodeutil.NewNode(o.name, func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		p.configureNode(cfg.Node)
		return p, nil, nil
	}, func(cfg *nodeutil.NodeConfig) error {
		cfg.Handler = httpMux
		cfg.HTTPListenAddr = net.JoinHostPort(o.address, strconv.Itoa(o.port))
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
		return 1
	}
	go n.Run(ctx) //nolint:errcheck
	if err := n.WaitReady(ctx, 60*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster node %s: not ready: %v\n", o.name, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testcluster node %s: ready (kubelet port %s:%d, pods in netns %s)\n", o.name, o.address, o.port, o.netns)
	select {
	case <-ctx.Done():
	case <-n.Done():
		if err := n.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster node %s: %v\n", o.name, err)
			p.killAll()
			return 1
		}
	}
	p.killAll()
	<-n.Done()
	return 0
}

// provider runs a node's pods as processes: each container's command, in the node's network
// namespace, with exec through the kubelet API that the API server proxies to.
type provider struct {
	opts   *nodeOptions
	events record.EventRecorder

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

// command is how a container's argv runs: in the node's network namespace with its own view
// of /sys (ip netns exec), so rdmabw sees that namespace's interfaces and RDMA devices.
func (p *provider) command(argv []string) *exec.Cmd {
	if p.opts.netns != "-" {
		argv = append([]string{"ip", "netns", "exec", p.opts.netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (p *provider) podIP(pod *v1.Pod) string {
	if pod.Spec.HostNetwork {
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

func (p *provider) CreatePod(ctx context.Context, in *v1.Pod) error {
	pod := in.DeepCopy()
	now := metav1.Now()
	ap := &agentPod{pod: pod, procs: map[string]*exec.Cmd{}, logs: map[string]*syncBuffer{}, execs: map[int]*exec.Cmd{}}
	pod.Status = v1.PodStatus{
		Phase:     v1.PodPending,
		HostIP:    p.opts.address,
		HostIPs:   []v1.HostIP{{IP: p.opts.address}},
		PodIP:     p.podIP(pod),
		PodIPs:    []v1.PodIP{{IP: p.podIP(pod)}},
		StartTime: &now,
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, c := range pod.Spec.Containers {
		if p.opts.pullFails[c.Image] {
			msg := fmt.Sprintf("failed to pull and unpack image %q: failed to resolve reference %q: pull access denied, repository does not exist or may require authorization", c.Image, c.Image)
			p.events.Eventf(pod, v1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
			p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", c.Image, msg)
			p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}},
			})
			continue
		}
		argv := append(append([]string{}, c.Command...), c.Args...)
		if len(argv) == 0 {
			argv = []string{"sleep", "infinity"}
		}
		cmd := p.command(argv)
		logs := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		p.events.Eventf(pod, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", c.Image)
		if err := cmd.Start(); err != nil {
			p.events.Eventf(pod, v1.EventTypeWarning, "Failed", "Error: failed to create containerd task: %v", err)
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}},
			})
			continue
		}
		p.events.Eventf(pod, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
		p.events.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
		ap.procs[c.Name], ap.logs[c.Name] = cmd, logs
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: &started,
			ContainerID: fmt.Sprintf("testcluster://%s-%d", pod.UID, cmd.Process.Pid),
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
		go p.wait(podKey(pod.Namespace, pod.Name), c.Name, cmd)
	}
	p.refreshPhase(pod)
	p.mu.Lock()
	p.pods[podKey(pod.Namespace, pod.Name)] = ap
	p.mu.Unlock()
	p.setNotify(pod)
	return nil
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
	if ok {
		delete(p.pods, key)
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

func (p *provider) killAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ap := range p.pods {
		stopProcs(ap.procs, 0)
		for _, c := range ap.execs {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
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

// RunInContainer runs an exec in the pod's network namespace. Its exit status goes back as
// the kubelet's does (k8s.io/utils/exec's CodeExitError becomes NonZeroExitCode). When the
// stream closes first the process keeps running, as under a kubelet: its output is then
// read and dropped so that it does not die of a broken pipe.
func (p *provider) RunInContainer(ctx context.Context, ns, name, container string, argv []string, attach api.AttachIO) error {
	p.mu.Lock()
	ap, ok := p.pods[podKey(ns, name)]
	running := ok && ap.procs[container] != nil
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
	// The pod shares this machine's files, so the program is looked up here, before the
	// netns wrapper runs it; a missing one fails the exec as containerd words it.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("failed to exec in container: failed to start exec: OCI runtime exec failed: exec failed: unable to start container process: exec: %q: %v: unknown", argv[0], err)
	}
	cmd := p.command(argv)
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
	if p.pods[podKey(ns, name)] != ap {
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
