package latchtest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Paths of Debian's ZooKeeper (package zookeeper, which pulls
// libzookeeper-java and a JRE). The jar's manifest names the rest of its
// classpath.
const (
	JavaPath         = "/usr/bin/java"
	ZooKeeperJarPath = "/usr/share/java/zookeeper.jar"
)

// zkStartWait bounds the wait for ZooKeeper to serve after one start: a
// JVM's start, about 2 s on a loaded 2-core machine.
const zkStartWait = 30 * time.Second

// StartZooKeeper starts Debian's ZooKeeper 3.8 as a standalone server on a
// free loopback port, its data in a temporary directory, and returns its
// client address (host:port) once it serves: once the four-letter word
// "srvr" answers "Mode: standalone" ("ruok" answers before the server
// serves) and "conf" names this server's own data directory (a port that
// another process took answers otherwise). Every four-letter word is
// allowed; the AdminServer (an HTTP port) is off. The server is killed
// when the test ends.
func StartZooKeeper(t testing.TB) string {
	t.Helper()
	need(t, JavaPath, "zookeeper (its JRE)")
	need(t, ZooKeeperJarPath, "zookeeper")
	dir := t.TempDir()
	return launchProbe(t, "zookeeper", zkStartWait, func(addr string, _ int) error {
		return zkServes(addr, dir)
	}, func(attempt int) (string, *exec.Cmd) {
		port := FreePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("conf-%d", attempt))
		data := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		for _, d := range []string{conf, data} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cfg := fmt.Sprintf(`tickTime=2000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
`, data, port)
		path := filepath.Join(conf, "zoo.cfg")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(JavaPath, "-Xmx128m", "-cp", conf+":"+ZooKeeperJarPath,
			"org.apache.zookeeper.server.ZooKeeperServerMain", path)
		cmd.Dir = conf
		return addr, cmd
	})
}

// zkServes returns nil when the ZooKeeper at addr serves as a standalone
// server whose data directory is under dir.
func zkServes(addr, dir string) error {
	srvr, err := ZooKeeperCommand(addr, "srvr")
	if err != nil {
		return err
	}
	if !strings.Contains(srvr, "Mode: standalone") {
		return fmt.Errorf("srvr: %q", srvr)
	}
	conf, err := ZooKeeperCommand(addr, "conf")
	if err != nil {
		return err
	}
	if !strings.Contains(conf, "dataDir="+dir+string(filepath.Separator)) {
		return fmt.Errorf("another server answers: conf: %q", conf)
	}
	return nil
}

// ZooKeeperCommand sends the four-letter word cmd ("srvr", "conf", "envi",
// "ruok"...) to the ZooKeeper server at addr and returns its answer, which
// ends where the server closes the connection.
func ZooKeeperCommand(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("%s: %w", cmd, err)
	}
	return string(b), nil
}
