package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/latchd/latch/internal/latchtest"
)

// imageInspect is what "latch-image inspect" prints of a docker-archive
// tarball, as go-containerregistry's tarball reader reads it.
type imageInspect struct {
	Digest   string `json:"digest"`
	Manifest struct {
		MediaType string `json:"mediaType"`
		Config    struct {
			Digest string `json:"digest"`
		} `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	} `json:"manifest"`
	Config struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Created      string `json:"created"`
		Config       struct {
			User         string              `json:"User"`
			WorkingDir   string              `json:"WorkingDir"`
			Env          []string            `json:"Env"`
			Entrypoint   []string            `json:"Entrypoint"`
			Cmd          []string            `json:"Cmd"`
			ExposedPorts map[string]struct{} `json:"ExposedPorts"`
			Volumes      map[string]struct{} `json:"Volumes"`
			Labels       map[string]string   `json:"Labels"`
		} `json:"config"`
	} `json:"config"`
}

// imagePorts are latch's default ports, each with the variable of its
// listener ("" for Raft's, which only a cluster node sets).
var imagePorts = map[string]string{
	"11211": "LATCH_MEMCACHE_ADDR",
	"11212": "LATCH_DLOCK_ADDR",
	"6379":  "LATCH_REDIS_ADDR",
	"2181":  "LATCH_ZOOKEEPER_ADDR",
	"11280": "LATCH_ADMIN_ADDR",
	"11290": "",
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %q: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// imageVersion is the version make image names the image: the v* tag at
// HEAD, else a Go pseudo-version of the commit (scripts/release.sh's, as
// for make release).
func imageVersion(t *testing.T) string {
	t.Helper()
	return imageStamps(t).version
}

// imageStamps is what scripts/release.sh stamps the image's binaries
// with, as it does the release's.
func imageStamps(t *testing.T) *releaseBuild {
	t.Helper()
	var b releaseBuild
	if err := releaseExpect(&b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// TestImage builds the OCI image as docs/install.md says (make image),
// checks that a second build into another directory is the same to the
// byte, reads the tarball back with go-containerregistry's reader (its
// user, ports, volume, environment, entry point and labels), unpacks it and
// runs it with runc as a container runtime would: as uid 65532, on a
// read-only root file system, /data a bind mount, in a network namespace
// of its own. It must become ready, serve a lock over each protocol, stop
// cleanly on SIGTERM and leave its data dir in /data.
func TestImage(t *testing.T) {
	needDeployRun(t)
	needRoot(t, "runc", "podman", "make", "git")

	// Build, as written, then again elsewhere: the same bytes.
	installShell(t, "../..", installBlock(t, "image-build"))
	dist := "../../dist"
	again := t.TempDir()
	installShell(t, "../..", "make image DIST="+again)
	for _, f := range []string{"latch-image/index.json", "latch-image-linux-amd64.tar", "latch-image-linux-arm64.tar"} {
		a, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(again, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of one commit: not reproducible", f)
		}
	}

	// The tarball, read back.
	tarball := filepath.Join(dist, "latch-image-linux-"+runtime.GOARCH+".tar")
	out, err := exec.Command(deployTool(t, "latch-image"), "inspect", tarball).Output()
	if err != nil {
		t.Fatalf("latch-image inspect %s: %v", tarball, err)
	}
	var img imageInspect
	if err := json.Unmarshal(out, &img); err != nil {
		t.Fatal(err)
	}
	checkImageConfig(t, img)

	checkPodmanLoad(t, img)
	checkPodmanLayout(t, dist)

	// Its file system: the binary, static, and the CA bundle; nothing else.
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	mustRun(t, deployTool(t, "latch-image"), "unpack", filepath.Join(dist, "latch-image"), "linux/"+runtime.GOARCH, rootfs)
	checkRootfs(t, rootfs)
	// The binary is the release's: built by scripts/release.sh's one
	// build function, so the same bytes as the release archive's.
	checkShipBuild(t, filepath.Join(rootfs, "usr/bin/latch"), imageStamps(t), runtime.GOARCH)

	runImage(t, rootfs, img)
}

func checkImageConfig(t *testing.T, img imageInspect) {
	t.Helper()
	c := img.Config.Config
	if img.Config.OS != "linux" || img.Config.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", img.Config.OS, img.Config.Architecture, runtime.GOARCH)
	}
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/latch", "serve"}) || len(c.Cmd) != 0 {
		t.Errorf("Entrypoint %q Cmd %q, want [/usr/bin/latch serve] and none", c.Entrypoint, c.Cmd)
	}
	if c.WorkingDir != "/data" {
		t.Errorf("WorkingDir %q, want /data", c.WorkingDir)
	}
	if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("Volumes %v, want /data", c.Volumes)
	}
	if !slices.Contains(c.Env, "LATCH_DATA_DIR=/data") {
		t.Errorf("Env %q does not set LATCH_DATA_DIR=/data", c.Env)
	}
	for port, env := range imagePorts {
		if _, ok := c.ExposedPorts[port+"/tcp"]; !ok {
			t.Errorf("port %s/tcp not exposed: %v", port, c.ExposedPorts)
		}
		if env != "" && !slices.Contains(c.Env, env+"=0.0.0.0:"+port) {
			t.Errorf("Env %q does not set %s=0.0.0.0:%s", c.Env, env, port)
		}
	}
	if len(c.ExposedPorts) != len(imagePorts) {
		t.Errorf("ExposedPorts %v, want the %d of latch", c.ExposedPorts, len(imagePorts))
	}
	commitTime, err := time.Parse(time.RFC3339, gitOut(t, "log", "-1", "--format=%cI"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"org.opencontainers.image.version":  imageVersion(t),
		"org.opencontainers.image.revision": gitOut(t, "rev-parse", "HEAD"),
		"org.opencontainers.image.created":  commitTime.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":   "https://github.com/latchd/latch",
		"org.opencontainers.image.licenses": "LicenseRef-latch-unlicensed",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if created, err := time.Parse(time.RFC3339, img.Config.Created); err != nil || !created.Equal(commitTime) {
		t.Errorf("created %q, want the commit's date %v", img.Config.Created, commitTime)
	}
	if len(img.Manifest.Layers) != 2 {
		t.Errorf("%d layers, want 2 (the CA bundle and /data, the binary)", len(img.Manifest.Layers))
	}
}

// checkPodmanLoad loads the tarball with podman as docs/install.md says
// (the tarball of this machine's platform, as it tells a user to pick),
// checks what podman sees and removes the image.
func checkPodmanLoad(t *testing.T, img imageInspect) {
	t.Helper()
	block := installBlock(t, "image-load")
	block = strings.ReplaceAll(block, "linux-amd64", "linux-"+runtime.GOARCH)
	out := installShell(t, "../..", block)
	tag := "localhost/latch:" + imageVersion(t)
	if !strings.Contains(out, "Loaded image: "+tag) {
		t.Fatalf("podman load printed %q, want it to load %s", out, tag)
	}
	defer func() {
		if out, err := exec.Command("podman", "rmi", tag).CombinedOutput(); err != nil {
			t.Errorf("podman rmi %s: %v\n%s", tag, err, out)
		}
	}()
	got := mustRun(t, "podman", "image", "inspect", "--format", "{{.Id}} {{.Config.User}} {{.Config.Entrypoint}} {{.Os}}/{{.Architecture}}", tag)
	config := strings.TrimPrefix(img.Manifest.Config.Digest, "sha256:")
	want := fmt.Sprintf("%s 65532:65532 [/usr/bin/latch serve] linux/%s", config, runtime.GOARCH)
	if strings.TrimSpace(got) != want {
		t.Errorf("podman image inspect: %q, want %q", got, want)
	}
}

// checkPodmanLayout has podman (containers/image) read the OCI layout:
// for each platform, the image it picks from the index is the one whose
// config the tarball of that platform holds.
func checkPodmanLayout(t *testing.T, dist string) {
	t.Helper()
	for _, arch := range []string{"amd64", "arm64"} {
		out, err := exec.Command(deployTool(t, "latch-image"), "inspect", filepath.Join(dist, "latch-image-linux-"+arch+".tar")).Output()
		if err != nil {
			t.Fatalf("latch-image inspect: %v", err)
		}
		var want imageInspect
		if err := json.Unmarshal(out, &want); err != nil {
			t.Fatal(err)
		}
		// From the repository's root, so that the name podman gives the
		// image (localhost/PATH) is a valid one.
		pull := exec.Command("podman", "pull", "-q", "--arch", arch, "oci:dist/latch-image:"+imageVersion(t))
		pull.Dir = "../.."
		out, err = pull.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", pull, err, out)
		}
		id := strings.TrimSpace(string(out))
		if exec.Command("podman", "rmi", "-f", id).Run() != nil {
			t.Errorf("podman rmi %s failed", id)
		}
		if "sha256:"+id != want.Manifest.Config.Digest {
			t.Errorf("podman pull --arch %s of the layout: image %s, want the tarball's %s", arch, id, want.Manifest.Config.Digest)
		}
	}
}

func checkRootfs(t *testing.T, rootfs string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(rootfs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(rootfs, path)
		if rel != "." {
			files = append(files, "/"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/data", "/etc", "/etc/ssl", "/etc/ssl/certs", "/etc/ssl/certs/ca-certificates.crt", "/usr", "/usr/bin", "/usr/bin/latch"}
	if !slices.Equal(files, want) {
		t.Errorf("the image holds %q, want %q", files, want)
	}
	f, err := elf.Open(filepath.Join(rootfs, "usr/bin/latch"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("/usr/bin/latch is dynamically linked (%v)", p.Type)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(rootfs, "data"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65532 || st.Gid != 65532 {
		t.Errorf("/data owned by %d:%d, want 65532:65532", st.Uid, st.Gid)
	}
}

// runImage runs the unpacked image with runc and checks it.
func runImage(t *testing.T, rootfs string, img imageInspect) {
	bundle := filepath.Dir(rootfs)
	id := fmt.Sprintf("latch-image-test-%d", os.Getpid())
	ns := id
	addNetns(t, ns)
	// The container's own interface and address, as a runtime's network
	// gives it: the clients below reach it there, which they could not
	// if latch listened on loopback only.
	const ip = "10.88.0.2"
	mustRun(t, "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	mustRun(t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	mustRun(t, "ip", "-n", ns, "link", "set", "eth1", "up")
	data := filepath.Join(bundle, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	writeRuncSpec(t, bundle, id, ns, data, img)

	var log latchtest.SyncBuffer
	logText := log.String
	cmd := exec.Command("runc", "run", "--bundle", bundle, id)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&log, pr)
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); <-copied; close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = exec.Command("runc", "kill", id, "KILL").Run()
			<-exited
		}
		_ = exec.Command("runc", "delete", "--force", id).Run()
	})

	hc := nsHTTPClient(ns)
	waitNsReady(t, hc, "http://"+ip+":11280/readyz", exited, time.Minute, logText)
	dial := nsDialer(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// memcached, with yrmcds's lock.
	mc, err := dial(ctx, "tcp", ip+":11211")
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	_ = mc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := mc.Write([]byte("set deploy 0 0 2\r\nme\r\nlock deploy\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(mc)
	for _, want := range []string{"STORED\r\n", "OK\r\n"} {
		if line, err := br.ReadString('\n'); err != nil || line != want {
			t.Fatalf("memcached: %q %v, want %q", line, err, want)
		}
	}

	// Redis: SET NX PX, once granted, then refused.
	rc := redis.NewClient(&redis.Options{Addr: ip + ":6379", Dialer: dial, MaxRetries: -1})
	defer rc.Close()
	if ok, err := rc.SetNX(ctx, "job", "a", 30*time.Second).Result(); err != nil || !ok {
		t.Fatalf("redis SET NX PX: %v %v", ok, err)
	}
	if ok, err := rc.SetNX(ctx, "job", "b", 30*time.Second).Result(); err != nil || ok {
		t.Fatalf("redis second SET NX PX: %v %v, want refused", ok, err)
	}

	// ZooKeeper: an ephemeral node, seen by a second session.
	zdial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(dctx, network, addr)
	}
	zc, _, err := zk.Connect([]string{ip + ":2181"}, 10*time.Second, zk.WithDialer(zdial), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Create("/lock", []byte("me"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("zookeeper create ephemeral: %v", err)
	}
	zc2, _, err := zk.Connect([]string{ip + ":2181"}, 10*time.Second, zk.WithDialer(zdial), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc2.Close()
	if _, err := zc2.Create("/lock", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("second create of the ephemeral: %v, want node exists", err)
	}

	// dlock, with latch run (version 3) in the container's namespace: the
	// lock is free, then held by the memcached connection.
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, bin, "run", "-n", "--addr", ip+":11212", "build", "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("latch run on a free key: %v\n%s", err, out)
	}
	out, err := exec.Command("ip", "netns", "exec", ns, bin, "run", "-n", "--addr", ip+":11212", "deploy", "--", "true").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("latch run -n on deploy, which the memcached connection holds: %v, want exit status 1 (busy)\n%s", err, out)
	}

	// SIGTERM, as a runtime stops a container.
	mc.Close()
	zc.Close()
	zc2.Close()
	mustRun(t, "runc", "kill", id, "TERM")
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM\n%s", logText())
	}
	if waitErr != nil {
		t.Errorf("runc run: %v, want exit 0\n%s", waitErr, logText())
	}
	if !strings.Contains(logText(), "shut down cleanly") {
		t.Errorf("no clean shutdown in its log:\n%s", logText())
	}
	for _, f := range []string{"node-id", "stable", "log", "lock"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			t.Errorf("the /data volume lacks the data dir's %s: %v", f, err)
		}
	}
}

// writeRuncSpec writes bundle/config.json: runc's default spec, with the
// image's entry point, environment and user, a read-only root, no
// capabilities, /data bound to data and the network namespace ns.
func writeRuncSpec(t *testing.T, bundle, hostname, ns, data string, img imageInspect) {
	t.Helper()
	mustRun(t, "runc", "spec", "--bundle", bundle)
	file := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	var uid, gid int
	if _, err := fmt.Sscanf(img.Config.Config.User, "%d:%d", &uid, &gid); err != nil {
		t.Fatalf("image user %q: %v", img.Config.Config.User, err)
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = img.Config.Config.Entrypoint
	proc["env"] = img.Config.Config.Env
	proc["cwd"] = img.Config.Config.WorkingDir
	proc["user"] = map[string]any{"uid": uid, "gid": gid}
	proc["capabilities"] = map[string]any{"bounding": []string{}, "effective": []string{}, "permitted": []string{}}
	proc["noNewPrivileges"] = true
	spec["root"] = map[string]any{"path": "rootfs", "readonly": true}
	spec["hostname"] = hostname
	spec["mounts"] = append(spec["mounts"].([]any), map[string]any{
		"destination": "/data", "type": "bind", "source": data, "options": []string{"rbind", "rw"},
	})
	linux := spec["linux"].(map[string]any)
	nss := linux["namespaces"].([]any)
	for i, n := range nss {
		if n.(map[string]any)["type"] == "network" {
			nss[i] = map[string]any{"type": "network", "path": filepath.Join("/run/netns", ns)}
		}
	}
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
