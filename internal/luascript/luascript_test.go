package luascript_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest"
	"github.com/latchd/latch/internal/luascript"
)

const redisServer = "/usr/bin/redis-server"

// startRedis starts Debian's redis-server (installed by `make deps`) on a
// free port and returns its address.
func startRedis(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(redisServer); err != nil {
		t.Fatalf("%s is missing (Debian package redis-server): %v", redisServer, err)
	}
	port := latchtest.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(redisServer, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--protected-mode", "no", "--dir", t.TempDir(), "--logfile", "")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatal("redis-server did not start")
	return ""
}

// rconn is a RESP connection to redis-server.
type rconn struct {
	nc net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, addr string) *rconn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rconn{nc, bufio.NewReader(nc)}
}

func (c *rconn) send(args [][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b.Bytes()); err != nil {
		panic(err)
	}
	var out bytes.Buffer
	readRaw(c.br, &out)
	return out.Bytes()
}

func (c *rconn) do(args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return c.send(bs)
}

// readRaw copies one reply from br to out.
func readRaw(br *bufio.Reader, out *bytes.Buffer) {
	line, err := br.ReadString('\n')
	if err != nil {
		panic(err)
	}
	out.WriteString(line)
	body := strings.TrimRight(line[1:], "\r\n")
	switch line[0] {
	case '$', '=':
		n, _ := strconv.Atoi(body)
		if n >= 0 {
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(br, buf); err != nil {
				panic(err)
			}
			out.Write(buf)
		}
	case '*', '~', '>':
		n, _ := strconv.Atoi(body)
		for range max(n, 0) {
			readRaw(br, out)
		}
	case '%':
		n, _ := strconv.Atoi(body)
		for range 2 * n {
			readRaw(br, out)
		}
	}
}

// parse reads one reply as a luascript.Reply.
func parse(br *bufio.Reader) luascript.Reply {
	line, err := br.ReadString('\n')
	if err != nil {
		panic(err)
	}
	body := strings.TrimRight(line[1:], "\r\n")
	n, _ := strconv.ParseInt(body, 10, 64)
	switch line[0] {
	case '+':
		return luascript.Reply{Kind: luascript.Status, Str: body}
	case '-':
		return luascript.ErrorReply(body)
	case ':':
		return luascript.Reply{Kind: luascript.Int, Int: n}
	case '_':
		return luascript.Reply{Kind: luascript.Nil}
	case '#':
		return luascript.Reply{Kind: luascript.Bool, Int: luascript.B2I(body == "t")}
	case ',':
		f, _ := strconv.ParseFloat(body, 64)
		return luascript.Reply{Kind: luascript.Double, Num: f}
	case '(':
		return luascript.Reply{Kind: luascript.BigNum, Str: body}
	case '$', '=':
		if n < 0 {
			return luascript.Reply{Kind: luascript.Nil}
		}
		buf := make([]byte, n+2)
		io.ReadFull(br, buf)
		if line[0] == '=' {
			return luascript.Reply{Kind: luascript.Verbatim, Format: string(buf[:3]), Str: string(buf[4:n])}
		}
		return luascript.Reply{Kind: luascript.Bulk, Str: string(buf[:n])}
	case '*', '~', '%':
		if n < 0 {
			return luascript.Reply{Kind: luascript.NilArray}
		}
		k := map[byte]luascript.Kind{'*': luascript.Array, '~': luascript.Set, '%': luascript.Map}[line[0]]
		if k == luascript.Map {
			n *= 2
		}
		r := luascript.Reply{Kind: k, Elems: []luascript.Reply{}}
		for range n {
			r.Elems = append(r.Elems, parse(br))
		}
		return r
	}
	panic("unexpected reply " + line)
}

// redisCaller runs a script's commands on redis-server.
type redisCaller struct {
	c *rconn
}

func (rc redisCaller) Call(args [][]byte, resp int) luascript.Reply {
	name := strings.ToLower(string(args[0]))
	if name == "hello" || name == "eval" || name == "multi" {
		return luascript.ErrorReply("ERR This Redis command is not allowed from script")
	}
	rc.c.do("HELLO", strconv.Itoa(resp))
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.c.nc.Write(b.Bytes())
	r := parse(rc.c.br)
	if r.Kind == luascript.Error && strings.HasPrefix(r.Str, "ERR unknown command") {
		return luascript.ErrorReply("ERR Unknown Redis command called from script")
	}
	return r
}
