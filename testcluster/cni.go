package main

// The Multus step of a pod's sandbox. For the k8s.v1.cni.cncf.io/networks annotation the node
// agent reads each NetworkAttachmentDefinition from the API server and runs the CNI plugins
// its config names (the real binaries of Debian's containernetworking-plugins) in the pod's
// network namespace, as Multus delegates to them. Failures come back in Multus's and
// containerd's words, with the plugin's own error inside.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

const networksAnnotation = "k8s.v1.cni.cncf.io/networks"

var nadResource = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// netRef is one element of the networks annotation.
type netRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Interface string `json:"interface"`
}

// parseNetworks reads the annotation in either of Multus's forms: `a,ns/b@net5` or a JSON
// list of {name, namespace, interface}. Interfaces default to net1, net2, ... in order.
func parseNetworks(value, podNamespace string) ([]netRef, error) {
	var refs []netRef
	value = strings.TrimSpace(value)
	if strings.HasPrefix(value, "[") {
		if err := json.Unmarshal([]byte(value), &refs); err != nil {
			return nil, fmt.Errorf("parsePodNetworkAnnotation: failed to parse pod Network Attachment Selection Annotation JSON format: %v", err)
		}
	} else {
		for _, item := range strings.Split(value, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			var r netRef
			if n, ifname, ok := strings.Cut(item, "@"); ok {
				item, r.Interface = n, ifname
			}
			if ns, n, ok := strings.Cut(item, "/"); ok {
				r.Namespace, r.Name = ns, n
			} else {
				r.Name = item
			}
			refs = append(refs, r)
		}
	}
	for i := range refs {
		if refs[i].Namespace == "" {
			refs[i].Namespace = podNamespace
		}
		if refs[i].Interface == "" {
			refs[i].Interface = fmt.Sprintf("net%d", i+1)
		}
	}
	return refs, nil
}

// attachment is one network added to a pod: the plugins of its config, ready to run.
type attachment struct {
	ref     netRef
	name    string // the CNI network name: the config's, else the NAD's
	plugins []map[string]any
	result  json.RawMessage // the last plugin's ADD result
}

// cniRunner runs plugins for one node.
type cniRunner struct {
	client  dynamic.Interface
	binDir  string // where the plugin binaries are (/usr/lib/cni)
	dataDir string // host-local's state, per node (a node's own disk under a kubelet)
	// podNetwork is the CNI config of the pods' own network (eth0), if the node has one.
	podNetwork string
}

// sandboxError is a failed sandbox, worded as the kubelet's FailedCreatePodSandBox event.
func sandboxError(pod *v1.Pod, multus string) error {
	return fmt.Errorf("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox %q: "+
		"plugin type=\"multus\" name=\"multus-cni-network\" failed (add): %s", string(pod.UID), multus)
}

// add attaches every network of the annotation to netns, in order. On a failure the ones
// added are deleted again, and the error is the event's text.
func (c *cniRunner) add(ctx context.Context, pod *v1.Pod, netns string) ([]attachment, error) {
	refs, err := parseNetworks(pod.Annotations[networksAnnotation], pod.Namespace)
	if err != nil {
		return nil, sandboxError(pod, fmt.Sprintf("Multus: [%s/%s/%s]: %v", pod.Namespace, pod.Name, pod.UID, err))
	}
	var done []attachment
	for _, ref := range refs {
		a, err := c.load(ctx, ref)
		if err != nil {
			c.del(pod, netns, done)
			return nil, sandboxError(pod, fmt.Sprintf("Multus: [%s/%s/%s]: error loading k8s delegates k8s args: "+
				"TryLoadPodDelegates: error in getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: "+
				"getKubernetesDelegate: %v", pod.Namespace, pod.Name, pod.UID, err))
		}
		var prev json.RawMessage
		for _, conf := range a.plugins {
			out, err := c.run(ctx, "ADD", pod, netns, ref.Interface, conf, prev)
			if err != nil {
				// Multus deletes what the failed network left before it reports.
				c.del(pod, netns, append(done, a))
				return nil, sandboxError(pod, fmt.Sprintf("[%s/%s/%s:%s]: error adding container to network %q: %v",
					pod.Namespace, pod.Name, pod.UID, a.name, a.name, err))
			}
			prev = out
		}
		a.result = prev
		done = append(done, a)
	}
	return done, nil
}

// del detaches the networks in reverse order, each chain's plugins in reverse; errors are
// logged, as the kubelet does on teardown.
func (c *cniRunner) del(pod *v1.Pod, netns string, added []attachment) {
	for i := len(added) - 1; i >= 0; i-- {
		a := added[i]
		for j := len(a.plugins) - 1; j >= 0; j-- {
			// run bounds each plugin; a teardown is not cut short by the caller's deadline.
			if _, err := c.run(context.Background(), "DEL", pod, netns, a.ref.Interface, a.plugins[j], a.result); err != nil {
				fmt.Fprintf(os.Stderr, "testcluster node: CNI DEL of %s for pod %s/%s: %v\n", a.name, pod.Namespace, pod.Name, err)
			}
		}
	}
}

// load reads the NetworkAttachmentDefinition of ref and resolves its config into plugins.
func (c *cniRunner) load(ctx context.Context, ref netRef) (attachment, error) {
	nad, err := c.client.Resource(nadResource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return attachment{}, fmt.Errorf("cannot find a network-attachment-definition (%s) in namespace (%s): %v", ref.Name, ref.Namespace, err)
	}
	config, _, _ := unstructured.NestedString(nad.Object, "spec", "config")
	var conf map[string]any
	if err := json.Unmarshal([]byte(config), &conf); err != nil {
		return attachment{}, fmt.Errorf("GetCNIConfig: err in GetCNIConfigFromSpec of %s/%s: invalid config: %v", ref.Namespace, ref.Name, err)
	}
	return c.resolve(ref, ref.Name, conf, fmt.Sprintf("NetworkAttachmentDefinition %s/%s", ref.Namespace, ref.Name))
}

// resolve turns a CNI config (one plugin, or a list under "plugins") into the plugins to run,
// each with the network's name and version, host-local's leases under this node's state.
func (c *cniRunner) resolve(ref netRef, name string, conf map[string]any, what string) (attachment, error) {
	a := attachment{ref: ref, name: name}
	if n, ok := conf["name"].(string); ok && n != "" {
		a.name = n
	}
	version, _ := conf["cniVersion"].(string)
	var list []any
	if ps, ok := conf["plugins"].([]any); ok {
		list = ps
	} else {
		list = []any{conf}
	}
	for _, item := range list {
		p, ok := item.(map[string]any)
		if !ok {
			return attachment{}, fmt.Errorf("%s: a plugin of its config is not an object", what)
		}
		p = clone(p)
		p["name"], p["cniVersion"] = a.name, version
		delete(p, "plugins")
		if ipam, ok := p["ipam"].(map[string]any); ok && ipam["type"] == "host-local" && ipam["dataDir"] == nil {
			ipam["dataDir"] = c.dataDir
		}
		a.plugins = append(a.plugins, p)
	}
	return a, nil
}

func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// run executes one plugin as the CNI spec says: its config on stdin, the command in CNI_*
// variables. An error is the plugin's own (its JSON error's msg and details).
func (c *cniRunner) run(ctx context.Context, command string, pod *v1.Pod, netns, ifname string, conf map[string]any, prev json.RawMessage) (json.RawMessage, error) {
	typ, _ := conf["type"].(string)
	bin := filepath.Join(c.binDir, typ)
	if _, err := os.Stat(bin); typ == "" || err != nil {
		return nil, fmt.Errorf("failed to find plugin %q in path [%s]", typ, c.binDir)
	}
	in := clone(conf)
	if prev != nil {
		var r any
		if json.Unmarshal(prev, &r) == nil {
			in["prevResult"] = r
		}
	}
	stdin, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(os.Environ(),
		"CNI_COMMAND="+command,
		"CNI_CONTAINERID="+string(pod.UID),
		"CNI_NETNS=/run/netns/"+netns,
		"CNI_IFNAME="+ifname,
		"CNI_PATH="+c.binDir,
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=true;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			pod.Namespace, pod.Name, pod.UID, pod.UID),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	var perr struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
	}
	if json.Unmarshal(stdout.Bytes(), &perr) == nil && perr.Msg != "" {
		if perr.Details != "" {
			return nil, fmt.Errorf("%s; %s", perr.Msg, perr.Details)
		}
		return nil, fmt.Errorf("%s", perr.Msg)
	}
	return nil, fmt.Errorf("netplugin failed: %q: %v", strings.TrimSpace(stderr.String()), err)
}

// primary attaches the node's pod network (--pod-network, a CNI config file, as a kubelet's
// runtime reads /etc/cni/net.d) to netns as eth0: the attachment, and the pod's IPv4 address
// from the plugin's result.
func (c *cniRunner) primary(ctx context.Context, pod *v1.Pod, netns string) (attachment, string, error) {
	fail := func(err error) (attachment, string, error) {
		return attachment{}, "", fmt.Errorf("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox %q: %v", string(pod.UID), err)
	}
	raw, err := os.ReadFile(c.podNetwork)
	if err != nil {
		return fail(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fail(fmt.Errorf("%s: invalid config: %v", c.podNetwork, err))
	}
	a, err := c.resolve(netRef{Namespace: pod.Namespace, Name: "pod-network", Interface: "eth0"}, "pod-network", conf, c.podNetwork)
	if err != nil {
		return fail(err)
	}
	var prev json.RawMessage
	for _, conf := range a.plugins {
		out, err := c.run(ctx, "ADD", pod, netns, "eth0", conf, prev)
		if err != nil {
			c.del(pod, netns, []attachment{a})
			return fail(fmt.Errorf("plugin type=%q failed (add): %v", conf["type"], err))
		}
		prev = out
	}
	a.result = prev
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	_ = json.Unmarshal(prev, &res)
	for _, ip := range res.IPs {
		if addr, _, ok := strings.Cut(ip.Address, "/"); ok && !strings.Contains(addr, ":") {
			return a, addr, nil
		}
	}
	c.del(pod, netns, []attachment{a})
	return fail(fmt.Errorf("the pod network %s gave no IPv4 address", c.podNetwork))
}
