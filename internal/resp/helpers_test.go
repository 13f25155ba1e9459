package resp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
	"github.com/latchd/latch/internal/server"
)

// Debian's Redis, the reference of the differential tests.
const (
	redisServerPath = "/usr/bin/redis-server"
	redisCLIPath    = "/usr/bin/redis-cli"
	python          = "/usr/bin/python3" // sees Debian's python3-redis
)

// addrs are the listeners of a test's latch.
type addrs struct{ redis, memcache, dlock string }

// startLatch starts an in-process latch with its Redis, memcached and dlock
// front ends on free loopback ports; it is shut down when the test ends.
func startLatch(t testing.TB) addrs {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Redis.Addr = "127.0.0.1:0"
	cfg.Memcache.Addr = "127.0.0.1:0"
	cfg.DLock.Addr = "127.0.0.1:0"
	cfg.ZooKeeper.Addr = ""
	cfg.Admin.Addr = ""
	s, err := server.New(cfg, nil)
	if err != nil {
		t.Fatalf("starting latch: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutting latch down: %v", err)
		}
	})
	return addrs{s.RedisAddr().String(), s.MemcacheAddr().String(), s.DLockAddr().String()}
}

// startRedis starts Debian's redis-server on a free loopback port, without
// persistence, and returns its address once it answers with its own pid.
func startRedis(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(redisServerPath); err != nil {
		t.Fatalf("%s is missing (Debian package redis-server; `make test` installs it): %v", redisServerPath, err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port := latchtest.FreePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(redisServerPath, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--dir", t.TempDir(), "--logfile", "")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited })
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if pid, err := redisPID(addr); err == nil && pid == cmd.Process.Pid {
				return addr
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatal("redis-server did not start")
	return ""
}

// redisPID asks the server at addr for its process_id.
func redisPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write([]byte("INFO server\r\n"))
	rep, err := readReply(bufio.NewReader(c))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(rep), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id")
}

// rconn is a raw RESP connection.
type rconn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, addr string) *rconn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rconn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// encode writes args as a RESP array of bulk strings.
func encode(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// do sends one command and returns its raw reply.
func (c *rconn) do(args ...string) string {
	c.t.Helper()
	if _, err := c.nc.Write(encode(args...)); err != nil {
		c.t.Fatal(err)
	}
	return c.read()
}

// read reads one raw reply.
func (c *rconn) read() string {
	c.t.Helper()
	rep, err := readReply(c.br)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	return string(rep)
}

// readReply reads one RESP2 or RESP3 reply, raw.
func readReply(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short line %q", line)
	}
	out := line
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return out, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return out, err
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, err
		}
		return append(out, data...), nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return out, err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			el, err := readReply(br)
			if err != nil {
				return nil, err
			}
			out = append(out, el...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}
