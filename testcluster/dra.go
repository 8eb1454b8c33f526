package main

// The node agent as a DRA network driver. With --dra-rails N it publishes a ResourceSlice of
// N rail NICs under the driver name dranet (kubernetes-sigs/dranet) uses, dra.net, with the
// attributes dranet gives a netdev (ifName, rdma, pciAddress, numaNode, rdmaDevice) and the
// standard resource.kubernetes.io/pcieRoot; with --dra-layout b4.8 a second ResourceSlice of
// 8 GPUs (driver gpu.nvidia.com) shares the PCIe roots with the NICs, 2 GPUs and 2 NICs per
// root over 4 roots, as on the IPvlan report's BM.GPU.B4.8 nodes. When a pod whose claims the
// scheduler allocated starts, the agent reads each claim's status.allocation and gives the pod
// exactly the allocated rails: each rail's interface moves into the pod's network namespace
// with its addresses (and with --dra-rxe its rxe device is made again there), as dranet moves
// the netdev and the RDMA device in exclusive mode; the rails go back when the pod goes.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// draNetDriver is dranet's driver name, the domain of its attributes.
	draNetDriver = "dra.net"
	// draGPUDriver is NVIDIA's GPU DRA driver, whose devices the b4.8 layout imitates.
	draGPUDriver = "gpu.nvidia.com"
	// pcieRootAttr is the standard attribute that puts devices under one PCIe root.
	pcieRootAttr = "resource.kubernetes.io/pcieRoot"
)

// draRail is one rail NIC the node publishes.
type draRail struct {
	device, ifName, pciAddress, pcieRoot string
	numaNode                             int64
}

// draGPU is one fixture GPU of the b4.8 layout.
type draGPU struct {
	device, pciBusID, pcieRoot string
	numaNode                   int64
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// deviceName is a device name for an interface, as dranet makes one: lowercased, with what a
// DNS label cannot hold replaced.
func deviceName(ifName string) string {
	n := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(ifName), "-"), "-")
	if n == "" {
		n = "nic"
	}
	return n
}

// draInventory is the node's rails (and GPUs with the b4.8 layout). Rail i is interface
// PREFIX+(FIRST+i). Without a layout every rail has a PCIe root of its own, NUMA node i%2; with b4.8
// the rails are spread over 4 roots in order (2 per root for 8 rails), NUMA node = root.
func (o *nodeOptions) draInventory() ([]draRail, []draGPU) {
	var rails []draRail
	var gpus []draGPU
	roots := 0
	if o.draLayout == "b4.8" {
		roots = 4
	}
	for i := 0; i < o.draRails; i++ {
		bus := 0x10 + i*0x10
		root, numa := fmt.Sprintf("pci0000:%02x", bus), int64(i%2)
		if roots > 0 {
			per := (o.draRails + roots - 1) / roots
			r := i / per
			bus = 0x0c + r*0x40 + 1 + i%per
			root, numa = fmt.Sprintf("pci0000:%02x", 0x0c+r*0x40), int64(r)
		}
		ifName := fmt.Sprintf("%s%d", o.draIfPrefix, o.draFirst+i)
		rails = append(rails, draRail{device: deviceName(ifName), ifName: ifName,
			pciAddress: fmt.Sprintf("0000:%02x:00.0", bus+1), pcieRoot: root, numaNode: numa})
	}
	if roots > 0 {
		for g := 0; g < 8; g++ {
			r := g / 2
			gpus = append(gpus, draGPU{device: fmt.Sprintf("gpu-%d", g),
				pciBusID: fmt.Sprintf("0000:%02x:00.0", 0x0c+r*0x40+0x10+g%2), pcieRoot: fmt.Sprintf("pci0000:%02x", 0x0c+r*0x40),
				numaNode: int64(r)})
		}
	}
	return rails, gpus
}

func strAttr(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: &s}
}
func intAttr(i int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &i} }
func boolAttr(b bool) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{BoolValue: &b} }

// draSlices are the node's ResourceSlices: one pool per driver, named after the node.
func (p *provider) draSlices() []*resourceapi.ResourceSlice {
	rails, gpus := p.opts.draInventory()
	slice := func(driver string, devices []resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: p.opts.name + "-" + strings.ReplaceAll(driver, ".", "-")},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				Pool:     resourceapi.ResourcePool{Name: p.opts.name, Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To(p.opts.name),
				Devices:  devices,
			},
		}
	}
	var out []*resourceapi.ResourceSlice
	if len(rails) > 0 {
		var devices []resourceapi.Device
		for _, r := range rails {
			devices = append(devices, resourceapi.Device{Name: r.device, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"ifName":     strAttr(r.ifName),
				"rdma":       boolAttr(true),
				"pciAddress": strAttr(r.pciAddress),
				"numaNode":   intAttr(r.numaNode),
				"type":       strAttr("device"),
				"virtual":    boolAttr(false),
				pcieRootAttr: strAttr(r.pcieRoot),
			}})
		}
		out = append(out, slice(draNetDriver, devices))
	}
	if len(gpus) > 0 {
		var devices []resourceapi.Device
		for _, g := range gpus {
			devices = append(devices, resourceapi.Device{Name: g.device, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            strAttr("gpu"),
				"resource.kubernetes.io/pciBusID": strAttr(g.pciBusID),
				"numaNode":                        intAttr(g.numaNode),
				pcieRootAttr:                      strAttr(g.pcieRoot),
			}})
		}
		out = append(out, slice(draGPUDriver, devices))
	}
	return out
}

// publishSlices makes the rails' interfaces that do not exist (veth pairs on this
// machine) and writes the node's ResourceSlices, replacing those of an earlier agent.
func (p *provider) publishSlices(ctx context.Context, client kubernetes.Interface) error {
	rails, _ := p.opts.draInventory()
	for _, r := range rails {
		if ipIn(p.opts.draNetns, "link", "show", "dev", r.ifName) == nil {
			continue
		}
		if err := ipIn(p.opts.draNetns, "link", "add", r.ifName, "type", "veth", "peer", "name", r.ifName+"p"); err != nil {
			return fmt.Errorf("rail %s: %v", r.ifName, err)
		}
		if err := ipIn(p.opts.draNetns, "link", "set", r.ifName, "up"); err != nil {
			return fmt.Errorf("rail %s: %v", r.ifName, err)
		}
		_ = ipIn(p.opts.draNetns, "link", "set", r.ifName+"p", "up")
		p.draMade = append(p.draMade, r.ifName)
	}
	api := client.ResourceV1().ResourceSlices()
	// A node may list and delete only its own slices (the Node authorizer): those of an
	// earlier agent go first.
	old, err := api.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + p.opts.name})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %v", err)
	}
	for _, s := range old.Items {
		if err := api.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ResourceSlice %s: %v", s.Name, err)
		}
	}
	for _, s := range p.draSlices() {
		if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice %s: %v", s.Name, err)
		}
	}
	return nil
}

// unpublish deletes the node's ResourceSlices and the interfaces it made, at shutdown.
func (p *provider) unpublish(client kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range p.draSlices() {
		_ = client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
	for _, ifName := range p.draMade {
		_ = ipIn(p.opts.draNetns, "link", "del", ifName)
	}
}

// ipIn runs ip(8) in network namespace ns ("-": the agent's own).
func ipIn(ns string, args ...string) error {
	if ns != "-" && ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs a command in network namespace ns ("-": the agent's own), its output back.
func inNetns(ns string, argv ...string) (string, error) {
	if ns != "-" && ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %s", strings.Join(argv, " "), strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// allocatedRails reads the pod's claims (the names the resourceclaim controller wrote in
// its status) and returns the rails of this node that the scheduler allocated to them.
func (p *provider) allocatedRails(ctx context.Context, pod *v1.Pod) ([]draRail, error) {
	if len(pod.Spec.ResourceClaims) == 0 || p.client == nil {
		return nil, nil
	}
	rails, _ := p.opts.draInventory()
	byDevice := map[string]draRail{}
	for _, r := range rails {
		byDevice[r.device] = r
	}
	names := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			names[s.Name] = *s.ResourceClaimName
		}
	}
	var out []draRail
	for _, pc := range pod.Spec.ResourceClaims {
		name := names[pc.Name]
		if pc.ResourceClaimName != nil {
			name = *pc.ResourceClaimName
		}
		if name == "" {
			return nil, fmt.Errorf("claim %s of the pod has no ResourceClaim yet", pc.Name)
		}
		claim, err := p.client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get ResourceClaim %s/%s: %v", pod.Namespace, name, err)
		}
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", pod.Namespace, name)
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != draNetDriver || r.Pool != p.opts.name {
				continue
			}
			rail, ok := byDevice[r.Device]
			if !ok {
				return nil, fmt.Errorf("ResourceClaim %s/%s: device %s is not one of node %s's", pod.Namespace, name, r.Device, p.opts.name)
			}
			out = append(out, rail)
		}
	}
	return out, nil
}

// movedRail is a rail in a pod: where it came from, its addresses, its rxe device.
type movedRail struct {
	ifName string
	addrs  []string
	rxe    string
}

// addresses are an interface's global addresses, as `ip addr add` takes them.
func addresses(ns, ifName string) []string {
	out, err := inNetns(ns, "ip", "-o", "addr", "show", "dev", ifName, "scope", "global")
	if err != nil {
		return nil
	}
	var addrs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				addrs = append(addrs, f[i+1])
			}
		}
	}
	return addrs
}

// rxeOf is the rxe device on ifName in ns (`rdma link show`: "link rxe_a0/1 ... netdev net1").
func rxeOf(ns, ifName string) string {
	out, err := inNetns(ns, "rdma", "link", "show")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "link" && len(f) > 2 && f[len(f)-2] == "netdev" && f[len(f)-1] == ifName {
			dev, _, _ := strings.Cut(f[1], "/")
			return dev
		}
	}
	return ""
}

// moveRail moves one interface from namespace from to namespace to, with its addresses, up,
// with its rxe device made again on the other side when rxe is set.
func moveRail(from, to, ifName string, addrs []string, rxeName string, rxe bool) error {
	if rxe {
		if dev := rxeOf(from, ifName); dev != "" {
			rxeName = dev
			if _, err := inNetns(from, "rdma", "link", "del", dev); err != nil {
				return err
			}
		}
	}
	target := to
	if to == "-" {
		target = "1" // the initial network namespace, by the PID of init
	}
	// Each step is one that a second try may find done (moveRailPatiently tries again).
	if ipIn(to, "link", "show", "dev", ifName) != nil {
		if err := ipIn(from, "link", "set", "dev", ifName, "netns", target); err != nil {
			return err
		}
	}
	for _, a := range addrs {
		if err := ipIn(to, "addr", "replace", a, "dev", ifName); err != nil {
			return err
		}
	}
	if err := ipIn(to, "link", "set", "dev", ifName, "up"); err != nil {
		return err
	}
	if rxe && rxeOf(to, ifName) == "" {
		if rxeName == "" {
			rxeName = "rxe_" + ifName
		}
		if _, err := inNetns(to, "rdma", "link", "add", rxeName, "type", "rxe", "netdev", ifName); err != nil {
			return err
		}
	}
	return nil
}

// giveRails moves the allocated rails into the pod's namespace; on a failure the ones moved
// go back. The error is the kubelet's FailedPrepareDynamicResources text.
func (p *provider) giveRails(netns string, rails []draRail) ([]movedRail, error) {
	var moved []movedRail
	for _, r := range rails {
		m := movedRail{ifName: r.ifName, addrs: addresses(p.opts.draNetns, r.ifName)}
		if p.opts.draRxe {
			m.rxe = rxeOf(p.opts.draNetns, r.ifName)
		}
		if err := p.moveRailPatiently(p.opts.draNetns, netns, m); err != nil {
			p.takeRails(netns, moved)
			return nil, fmt.Errorf("Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim: driver %s: rail %s: %v", draNetDriver, r.ifName, err)
		}
		moved = append(moved, m)
	}
	return moved, nil
}

// takeRails moves a pod's rails back to where the node keeps them. A rail left in the pod's
// namespace is lost when the namespace goes (a veth ends with it).
func (p *provider) takeRails(netns string, moved []movedRail) {
	for _, m := range moved {
		if err := p.moveRailPatiently(netns, p.opts.draNetns, m); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster node %s: rail %s back from %s: %v\n", p.opts.name, m.ifName, netns, err)
		}
	}
}

// moveRailPatiently is moveRail tried again for up to 10 s: a pod's process killed a moment
// before may still hold the rail's rxe device (a rail once stayed behind while the next one
// came back; once a pod's rail could not be given because the previous pod's server still held
// it: `rdma link del rxe_b0: Wrong device name`). Each of moveRail's steps is one that a
// second try may find done.
func (p *provider) moveRailPatiently(from, to string, m movedRail) error {
	for end := time.Now().Add(10 * time.Second); ; {
		err := moveRail(from, to, m.ifName, m.addrs, m.rxe, p.opts.draRxe)
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// prepareResources gives the pod the rails its claims were allocated, as the kubelet asks a
// DRA driver to (NodePrepareResources) before the pod's containers start. The claims are
// allocated before the pod is bound; a short retry covers a status read before the write.
func (p *provider) prepareResources(pod *v1.Pod, sb *sandbox) error {
	if len(pod.Spec.ResourceClaims) == 0 || p.opts.draRails == 0 {
		return nil
	}
	var rails []draRail
	var err error
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rails, err = p.allocatedRails(ctx, pod)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
		if fresh, gerr := p.client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{}); gerr == nil {
			pod = fresh
		}
	}
	if err != nil {
		return fmt.Errorf("Failed to prepare dynamic resources: %v", err)
	}
	moved, err := p.giveRails(sb.netns, rails)
	if err != nil {
		return err
	}
	sb.rails = moved
	names := make([]string, len(moved))
	for i, m := range moved {
		names[i] = m.ifName
	}
	fmt.Fprintf(os.Stderr, "testcluster node %s: pod %s/%s: rails %s\n", p.opts.name, pod.Namespace, pod.Name, strings.Join(names, ","))
	return nil
}
