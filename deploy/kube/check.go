package kube

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UID is the user the image runs as, and the pods must.
const UID = 65532

// listenerPorts maps each listener's variable to the name of its
// container port; Raft's port is named raft and set by --raft-addr.
var listenerPorts = map[string]string{
	"LATCH_MEMCACHE_ADDR":  "memcache",
	"LATCH_DLOCK_ADDR":     "dlock",
	"LATCH_REDIS_ADDR":     "redis",
	"LATCH_ZOOKEEPER_ADDR": "zookeeper",
	"LATCH_ADMIN_ADDR":     "admin",
}

// fieldEnv is what each variable of the pod's own must be taken from.
var fieldEnv = map[string]string{
	"POD_NAME":  "metadata.name",
	"NAMESPACE": "metadata.namespace",
	"POD_IP":    "status.podIP",
}

// Check returns every way objs do not fit together or do not fit latch.
func Check(objs *Objects) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(objs.StatefulSets) != 1 {
		return append(errs, fmt.Errorf("want one StatefulSet, have %d", len(objs.StatefulSets)))
	}
	s := objs.StatefulSets[0]
	spec := s.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return append(errs, fmt.Errorf("StatefulSet %s: want one container, have %d", s.Name, len(spec.Containers)))
	}
	c := spec.Containers[0]
	podLabels := s.Spec.Template.Labels

	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	if replicas < 3 || replicas%2 == 0 {
		fail("StatefulSet %s: %d replicas, want an odd count of 3 or more", s.Name, replicas)
	}
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		fail("StatefulSet %s: podManagementPolicy %q, want Parallel (a node is ready only once the cluster has a leader)", s.Name, s.Spec.PodManagementPolicy)
	}
	if s.Spec.Selector == nil || !subset(s.Spec.Selector.MatchLabels, podLabels) || len(s.Spec.Selector.MatchExpressions) > 0 {
		fail("StatefulSet %s: its selector does not match its pods' labels %v", s.Name, podLabels)
	}

	// Ports: by name, and each listener's variable names its port.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			fail("container port %s: protocol %s, want TCP", p.Name, p.Protocol)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for v, name := range listenerPorts {
		e, ok := env[v]
		if !ok {
			fail("container %s: no %s (latch would listen on 127.0.0.1 only)", c.Name, v)
			continue
		}
		host, port, err := net.SplitHostPort(e.Value)
		if err != nil || host != "0.0.0.0" {
			fail("%s=%q: want 0.0.0.0:PORT, every interface of the pod", v, e.Value)
			continue
		}
		if p, ok := ports[name]; !ok || strconv.Itoa(int(p)) != port {
			fail("%s listens on port %s, but the container's port %q is %d", v, port, name, ports[name])
		}
	}
	for name, v := range fieldEnv {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != v {
			fail("container %s: %s must come from the field %s", c.Name, name, v)
		}
	}

	// Arguments: the node's id, Raft's addresses, the initial cluster.
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			fail("argument %q: want --flag=value", a)
			continue
		}
		args[k] = v
	}
	if args["node-id"] != "$(POD_NAME)" {
		fail("--node-id=%q, want $(POD_NAME)", args["node-id"])
	}
	raftPort, ok := ports["raft"]
	if !ok {
		fail("container %s: no port named raft", c.Name)
	}
	rp := strconv.Itoa(int(raftPort))
	if args["raft-addr"] != "0.0.0.0:"+rp {
		fail("--raft-addr=%q, want 0.0.0.0:%s (the raft port)", args["raft-addr"], rp)
	}
	if args["raft-advertise"] != "$(POD_IP):"+rp {
		fail("--raft-advertise=%q, want $(POD_IP):%s: the pod's DNS name may not resolve yet when the node starts", args["raft-advertise"], rp)
	}
	var want []string
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", s.Name, i)
		want = append(want, fmt.Sprintf("%s=%s.%s.$(NAMESPACE).svc:%s", pod, pod, s.Spec.ServiceName, rp))
	}
	if got := strings.Split(args["initial-cluster"], ","); !slices.Equal(got, want) {
		fail("--initial-cluster=%q, want the pods' DNS names %q", args["initial-cluster"], strings.Join(want, ","))
	}
	if st, ok := args["initial-cluster-state"]; ok && st != "new" {
		fail("--initial-cluster-state=%q: the pods of the manifest bootstrap their cluster together", st)
	}

	// Probes on the admin server's paths.
	checkProbe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			fail("container %s: no %s probe over HTTP", c.Name, what)
			return
		}
		if p.HTTPGet.Path != path {
			fail("%s probe on %q, want %s", what, p.HTTPGet.Path, path)
		}
		if n, ok := resolvePort(p.HTTPGet.Port, c.Ports); !ok || n != ports["admin"] {
			fail("%s probe on port %s, want the admin port %d", what, p.HTTPGet.Port.String(), ports["admin"])
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz")
	checkProbe("liveness", c.LivenessProbe, "/healthz")

	// Services: the headless one names the pods; the others serve clients.
	var headless, client bool
	for _, svc := range objs.Services {
		if !subset(svc.Spec.Selector, podLabels) || len(svc.Spec.Selector) == 0 {
			fail("Service %s: selector %v does not match the pods' labels %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		named := map[string]bool{}
		for _, p := range svc.Spec.Ports {
			n, ok := resolvePort(p.TargetPort, c.Ports)
			if !ok {
				fail("Service %s: port %s targets %s, which the container does not have", svc.Name, p.Name, p.TargetPort.String())
			} else if n != p.Port {
				fail("Service %s: port %s is %d, but the container's is %d", svc.Name, p.Name, p.Port, n)
			}
			named[p.Name] = true
		}
		if svc.Name == s.Spec.ServiceName {
			headless = true
			if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
				fail("Service %s (the StatefulSet's): want clusterIP None and publishNotReadyAddresses", svc.Name)
			}
			if !named["raft"] {
				fail("Service %s: no raft port", svc.Name)
			}
			continue
		}
		client = true
		for _, name := range listenerPorts {
			if !named[name] {
				fail("Service %s: no %s port", svc.Name, name)
			}
		}
	}
	if !headless {
		fail("no Service named %q, the StatefulSet's serviceName", s.Spec.ServiceName)
	}
	if !client {
		fail("no Service for the clients")
	}

	// Disruptions: one node at a time.
	if len(objs.PDBs) != 1 {
		fail("want one PodDisruptionBudget, have %d", len(objs.PDBs))
	}
	for _, pdb := range objs.PDBs {
		if pdb.Spec.Selector == nil || len(pdb.Spec.Selector.MatchLabels) == 0 || !subset(pdb.Spec.Selector.MatchLabels, podLabels) {
			fail("PodDisruptionBudget %s: its selector does not match the pods", pdb.Name)
		}
		if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
			fail("PodDisruptionBudget %s: want maxUnavailable 1", pdb.Name)
		}
	}

	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		fail("StatefulSet %s: enableServiceLinks must be false: the Service latch would put LATCH_SERVICE_HOST and the like in latch's environment", s.Name)
	}

	// Security: not root, read-only, no capabilities, RuntimeDefault.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || !isTrue(psc.RunAsNonRoot) || !is(psc.RunAsUser, UID) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("pod securityContext: want runAsNonRoot, runAsUser %d and the RuntimeDefault seccomp profile", UID)
	}
	if sc == nil || !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		fail("container securityContext: want readOnlyRootFilesystem, no privilege escalation and every capability dropped")
	}
	if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != UID {
		fail("container securityContext: runAsUser %d, want %d", *sc.RunAsUser, UID)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		fail("container %s: want cpu and memory requests", c.Name)
	}

	// The data dir: on the volume of a claim template.
	dataDir := env["LATCH_DATA_DIR"].Value
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath != dataDir {
			continue
		}
		for _, t := range s.Spec.VolumeClaimTemplates {
			if t.Name == m.Name {
				mounted = true
			}
		}
	}
	if dataDir == "" || !mounted {
		fail("LATCH_DATA_DIR=%q is not a volume of the StatefulSet's claim templates", dataDir)
	}

	// A ServiceMonitor scrapes /metrics of the clients' Service.
	for _, sm := range objs.ServiceMonitors {
		var found bool
		for _, svc := range objs.Services {
			if !subset(sm.Spec.Selector.MatchLabels, svc.Labels) || len(sm.Spec.Selector.MatchLabels) == 0 {
				continue
			}
			found = true
			for _, ep := range sm.Spec.Endpoints {
				if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					fail("ServiceMonitor %s: Service %s has no port %q", sm.Metadata.Name, svc.Name, ep.Port)
				}
				if ep.Path != "/metrics" {
					fail("ServiceMonitor %s: path %q, want /metrics", sm.Metadata.Name, ep.Path)
				}
			}
		}
		if !found || len(sm.Spec.Endpoints) == 0 {
			fail("ServiceMonitor %s: selects no Service, or scrapes nothing", sm.Metadata.Name)
		}
	}
	return errs
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

func is(n *int64, v int64) bool { return n != nil && *n == v }

// resolvePort returns the number of the container port p names (by name
// or number).
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int32, bool) {
	for _, cp := range ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// Pod is one pod of the StatefulSet as the kubelet would start its
// container: its arguments and environment expanded.
type Pod struct {
	Name, Namespace, IP string
	Args                []string
	Env                 map[string]string
	// ReadinessPath and LivenessPath are the probes' paths on AdminPort.
	ReadinessPath, LivenessPath string
	AdminPort                   int32
}

// Pods returns the StatefulSet's pods in namespace, pod i at ips[i], for
// as many ips as given.
func Pods(objs *Objects, namespace string, ips []string) ([]Pod, error) {
	if errs := Check(objs); len(errs) > 0 {
		return nil, fmt.Errorf("kube: the manifests do not pass their check: %v", errs)
	}
	s := objs.StatefulSets[0]
	c := s.Spec.Template.Spec.Containers[0]
	var pods []Pod
	for i, ip := range ips {
		p := Pod{
			Name:          fmt.Sprintf("%s-%d", s.Name, i),
			Namespace:     namespace,
			IP:            ip,
			Env:           map[string]string{},
			ReadinessPath: c.ReadinessProbe.HTTPGet.Path,
			LivenessPath:  c.LivenessProbe.HTTPGet.Path,
		}
		p.AdminPort, _ = resolvePort(c.ReadinessProbe.HTTPGet.Port, c.Ports)
		fields := map[string]string{"metadata.name": p.Name, "metadata.namespace": namespace, "status.podIP": ip}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				p.Env[e.Name] = Expand(e.Value, p.Env)
			case e.ValueFrom.FieldRef != nil:
				v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
				if !ok {
					return nil, fmt.Errorf("kube: %s: field %s not known here", e.Name, e.ValueFrom.FieldRef.FieldPath)
				}
				p.Env[e.Name] = v
			default:
				return nil, fmt.Errorf("kube: %s: only values and fields are known here", e.Name)
			}
		}
		for _, a := range c.Args {
			p.Args = append(p.Args, Expand(a, p.Env))
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// Expand replaces $(NAME) in s by env's NAME, as Kubernetes expands a
// container's arguments and variables: $$ is a $, and a reference to a
// variable not set stays as it is.
func Expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
