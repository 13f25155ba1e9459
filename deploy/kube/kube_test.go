package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const base = "../../contrib/kubernetes"

func load(t *testing.T, dir string) *Objects {
	t.Helper()
	y, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(y)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestManifests: both kustomizations render, decode strictly and pass
// every check.
func TestManifests(t *testing.T) {
	for _, tc := range []struct {
		dir      string
		monitors int
	}{{base, 0}, {base + "/monitoring", 1}} {
		objs := load(t, tc.dir)
		if len(objs.StatefulSets) != 1 || len(objs.Services) != 2 || len(objs.PDBs) != 1 || len(objs.ServiceMonitors) != tc.monitors {
			t.Errorf("%s: %d StatefulSets, %d Services, %d PDBs, %d ServiceMonitors", tc.dir,
				len(objs.StatefulSets), len(objs.Services), len(objs.PDBs), len(objs.ServiceMonitors))
		}
		for _, err := range Check(objs) {
			t.Errorf("%s: %v", tc.dir, err)
		}
	}
}

// TestCheckCatches breaks the manifests one way at a time: Check must
// name each.
func TestCheckCatches(t *testing.T) {
	container := func(o *Objects) *corev1.Container { return &o.StatefulSets[0].Spec.Template.Spec.Containers[0] }
	setEnv := func(o *Objects, name, value string) {
		c := container(o)
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i].Value = value
			}
		}
	}
	setArg := func(o *Objects, flag, value string) {
		c := container(o)
		for i, a := range c.Args {
			if strings.HasPrefix(a, "--"+flag+"=") {
				c.Args[i] = "--" + flag + "=" + value
			}
		}
	}
	for _, tc := range []struct {
		name, want string
		mutate     func(*Objects)
	}{
		{"ordered pods", "podManagementPolicy", func(o *Objects) { o.StatefulSets[0].Spec.PodManagementPolicy = "OrderedReady" }},
		{"an even cluster", "odd count", func(o *Objects) { n := int32(4); o.StatefulSets[0].Spec.Replicas = &n }},
		{"loopback listener", "LATCH_REDIS_ADDR", func(o *Objects) { setEnv(o, "LATCH_REDIS_ADDR", "127.0.0.1:6379") }},
		{"env and port apart", "LATCH_DLOCK_ADDR listens on port 11213", func(o *Objects) { setEnv(o, "LATCH_DLOCK_ADDR", "0.0.0.0:11213") }},
		{"initial cluster of 2", "--initial-cluster", func(o *Objects) {
			setArg(o, "initial-cluster", "latch-0=latch-0.latch-peers.$(NAMESPACE).svc:11290,latch-1=latch-1.latch-peers.$(NAMESPACE).svc:11290")
		}},
		{"initial cluster on another service", "--initial-cluster", func(o *Objects) { o.StatefulSets[0].Spec.ServiceName = "other" }},
		{"advertise a name", "--raft-advertise", func(o *Objects) { setArg(o, "raft-advertise", "$(POD_NAME).latch-peers:11290") }},
		{"readiness on /healthz", "readiness probe on \"/healthz\"", func(o *Objects) { container(o).ReadinessProbe.HTTPGet.Path = "/healthz" }},
		{"liveness on another port", "liveness probe on port", func(o *Objects) { container(o).LivenessProbe.HTTPGet.Port = intstr.FromString("redis") }},
		{"service port off", "targets", func(o *Objects) { o.Services[1].Spec.Ports[0].TargetPort = intstr.FromString("memcached") }},
		{"headless published ready only", "publishNotReadyAddresses", func(o *Objects) {
			for _, s := range o.Services {
				s.Spec.PublishNotReadyAddresses = false
			}
		}},
		{"PDB elsewhere", "PodDisruptionBudget latch: its selector", func(o *Objects) {
			o.PDBs[0].Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}},
		{"root filesystem writable", "readOnlyRootFilesystem", func(o *Objects) { f := false; container(o).SecurityContext.ReadOnlyRootFilesystem = &f }},
		{"service links", "enableServiceLinks", func(o *Objects) { o.StatefulSets[0].Spec.Template.Spec.EnableServiceLinks = nil }},
		{"data dir off the volume", "LATCH_DATA_DIR", func(o *Objects) { setEnv(o, "LATCH_DATA_DIR", "/tmp/data") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := load(t, base)
			tc.mutate(objs)
			var msgs []string
			for _, err := range Check(objs) {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("Check: %q, want an error naming %q", msgs, tc.want)
			}
		})
	}
}

// TestDecodeStrict: a misspelt field, a kind not known, an object named
// twice are errors.
func TestDecodeStrict(t *testing.T) {
	y, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, stream, want string }{
		{"typo", strings.Replace(string(y), "  image: ", "  imagee: ", 1), "imagee"},
		{"string replicas", strings.Replace(string(y), "replicas: 3", "replicas: three", 1), "replicas"},
		{"unknown kind", string(y) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", "ConfigMap"},
		{"twice", string(y) + "---\n" + string(y), "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stream == string(y) {
				t.Fatal("the mutation changed nothing")
			}
			if _, err := Decode([]byte(tc.stream)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_NAME": "latch-1", "NAMESPACE": "ns", "EMPTY": ""}
	for _, tc := range []struct{ in, want string }{
		{"--node-id=$(POD_NAME)", "--node-id=latch-1"},
		{"$(POD_NAME).svc.$(NAMESPACE)", "latch-1.svc.ns"},
		{"$(UNSET)", "$(UNSET)"},
		{"$$(POD_NAME)", "$(POD_NAME)"},
		{"a$(EMPTY)b", "ab"},
		{"$(POD_NAME", "$(POD_NAME"},
		{"cost $5", "cost $5"},
		{"end$", "end$"},
	} {
		if got := Expand(tc.in, env); got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPods(t *testing.T) {
	pods, err := Pods(load(t, base), "prod", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	p := pods[2]
	want := []string{
		"--node-id=latch-2",
		"--raft-addr=0.0.0.0:11290",
		"--raft-advertise=10.0.0.3:11290",
		"--initial-cluster=latch-0=latch-0.latch-peers.prod.svc:11290,latch-1=latch-1.latch-peers.prod.svc:11290,latch-2=latch-2.latch-peers.prod.svc:11290",
	}
	if strings.Join(p.Args, " ") != strings.Join(want, " ") {
		t.Errorf("args %q, want %q", p.Args, want)
	}
	if p.Env["POD_IP"] != "10.0.0.3" || p.Env["LATCH_ADMIN_ADDR"] != "0.0.0.0:11280" || p.AdminPort != 11280 {
		t.Errorf("pod %+v", p)
	}
}

// FuzzExpand: Expand never panics; with no variables set it never
// lengthens its input (only $$ changes) and leaves text without a $ as
// it is; a reference to a set variable, between any texts without a $,
// becomes its value.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"--node-id=$(POD_NAME)", "$$(X)", "$(", "$)", "a$(B)c$$d$", ""} {
		f.Add(s, "B", "value")
	}
	f.Fuzz(func(t *testing.T, s, name, value string) {
		if got := Expand(s, nil); len(got) > len(s) {
			t.Errorf("Expand(%q, nil) = %q: longer", s, got)
		}
		if !strings.Contains(s, "$") && Expand(s, map[string]string{name: value}) != s {
			t.Errorf("Expand(%q) changed text without a $", s)
		}
		if strings.ContainsAny(name, ")") || strings.Contains(s, "$") {
			return
		}
		in := s + "$(" + name + ")" + s
		if got := Expand(in, map[string]string{name: value}); got != s+value+s {
			t.Errorf("Expand(%q) = %q, want %q", in, got, s+value+s)
		}
	})
}
