package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest"
)

// kubePod is what "latch-kube pods" prints of one pod.
type kubePod struct {
	Name, Namespace, IP         string
	Args                        []string
	Env                         map[string]string
	ReadinessPath, LivenessPath string
	AdminPort                   int32
}

// TestKubernetes checks contrib/kubernetes as docs/install.md applies it
// (kubectl apply -k DIR: no API server here, so latch-kube renders DIR
// with kustomize and checks every object, strictly decoded), then runs
// the StatefulSet's three pods as the kubelet would start them: each in a
// network namespace of its own (its pod IP on a bridge, as on a node),
// resolving the pods' DNS names through /etc/hosts (ip netns exec mounts
// /etc/netns/NS/hosts there), with latch serve given exactly the
// manifest's arguments and environment, $(POD_NAME), $(NAMESPACE) and
// $(POD_IP) expanded; only LATCH_DATA_DIR points at a directory of the
// test instead of the pod's volume. The three must form one cluster: a
// leader, three members, every node's readiness and liveness probes 200.
func TestKubernetes(t *testing.T) {
	needDeployRun(t)
	block := installBlock(t, "kubernetes-apply")
	fields := strings.Fields(block)
	if len(fields) != 4 || fields[0] != "kubectl" || fields[1] != "apply" || fields[2] != "-k" {
		t.Fatalf("the block is %q, want kubectl apply -k DIR", block)
	}
	dir, err := filepath.Abs(filepath.Join("../..", fields[3]))
	if err != nil {
		t.Fatal(err)
	}
	tool := deployTool(t, "latch-kube")
	for _, d := range []string{dir, filepath.Join(dir, "monitoring")} {
		out, err := exec.Command(tool, "check", d).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": ok:") {
			t.Fatalf("latch-kube check %s: %v\n%s", d, err, out)
		}
	}

	needRoot(t)
	const namespace = "latch-test"
	ips := []string{"10.244.7.10", "10.244.7.11", "10.244.7.12"}
	out, err := exec.Command(tool, "pods", "--namespace", namespace, "--ips", strings.Join(ips, ","), dir).Output()
	if err != nil {
		t.Fatalf("latch-kube pods: %v", err)
	}
	var pods []kubePod
	if err := json.Unmarshal(out, &pods); err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}

	// The node's network: a bridge in a namespace of its own, each pod
	// a veth pair from it.
	tag := fmt.Sprintf("k%d", os.Getpid()%100000)
	bridge := tag + "-br"
	addNetns(t, bridge)
	mustRun(t, "ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
	mustRun(t, "ip", "-n", bridge, "link", "set", "br0", "up")
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for _, p := range pods {
		fmt.Fprintf(&hosts, "%s %s.latch-peers.%s.svc\n", p.IP, p.Name, p.Namespace)
	}
	for i, p := range pods {
		ns := fmt.Sprintf("%s-%d", tag, i)
		addNetns(t, ns)
		veth := fmt.Sprintf("v%d", i)
		mustRun(t, "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", veth, "netns", bridge)
		mustRun(t, "ip", "-n", bridge, "link", "set", veth, "master", "br0", "up")
		mustRun(t, "ip", "-n", ns, "addr", "add", p.IP+"/24", "dev", "eth0")
		mustRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		etc := filepath.Join("/etc/netns", ns)
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(etc) })
		if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	type node struct {
		pod    kubePod
		ns     string
		cmd    *exec.Cmd
		log    *latchtest.SyncBuffer
		exited chan struct{}
	}
	var nodes []*node
	for i, p := range pods {
		n := &node{pod: p, ns: fmt.Sprintf("%s-%d", tag, i), log: &latchtest.SyncBuffer{}, exited: make(chan struct{})}
		env := cleanEnv()
		for k, v := range p.Env {
			if k == "LATCH_DATA_DIR" {
				v = t.TempDir() // the pod's volume
			}
			env = append(env, k+"="+v)
		}
		n.cmd = exec.Command("ip", append([]string{"netns", "exec", n.ns, bin, "serve"}, p.Args...)...)
		n.cmd.Env = env
		n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = n.cmd.Wait(); close(n.exited) }()
		t.Cleanup(func() {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
		})
		nodes = append(nodes, n)
	}

	leaders := map[string]bool{}
	for _, n := range nodes {
		hc := nsHTTPClient(n.ns)
		base := fmt.Sprintf("http://%s:%d", n.pod.IP, n.pod.AdminPort) // as the kubelet probes a pod
		waitNsReady(t, hc, base+n.pod.ReadinessPath, n.exited, 2*time.Minute, func() string { return n.pod.Name + ":\n" + n.log.String() })
		resp, err := hc.Get(base + n.pod.LivenessPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: liveness probe %s answered %s", n.pod.Name, n.pod.LivenessPath, resp.Status)
		}
		// The cluster as this node sees it, from the client side of its
		// pod IP: a leader and the three pods, by their DNS names.
		resp, err = hc.Get(base + "/v1/cluster")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var cl struct {
			Mode    string `json:"mode"`
			Leader  string `json:"leader"`
			Members []struct {
				ID       string `json:"id"`
				RaftAddr string `json:"raft_addr"`
			} `json:"members"`
		}
		if err := json.Unmarshal(body, &cl); err != nil {
			t.Fatalf("%s: /v1/cluster: %v\n%s", n.pod.Name, err, body)
		}
		if cl.Mode != "cluster" || cl.Leader == "" || len(cl.Members) != 3 {
			t.Errorf("%s: /v1/cluster: %s, want a cluster of 3 with a leader", n.pod.Name, body)
		}
		leaders[cl.Leader] = true
		for _, m := range cl.Members {
			if m.RaftAddr != fmt.Sprintf("%s.latch-peers.%s.svc:11290", m.ID, namespace) {
				t.Errorf("%s: member %s at %s, want its pod's DNS name", n.pod.Name, m.ID, m.RaftAddr)
			}
		}
	}

	if len(leaders) != 1 {
		t.Errorf("the nodes name %d leaders: %v", len(leaders), leaders)
	}

	// SIGTERM, as the kubelet stops a pod: each shuts down cleanly.
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		select {
		case <-n.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still running 30 s after SIGTERM", n.pod.Name)
		}
		if !strings.Contains(n.log.String(), "shut down cleanly") {
			t.Errorf("%s: no clean shutdown in its log:\n%s", n.pod.Name, n.log.String())
		}
	}
}
