package refuse

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestRefuse: a refused client reads the answer, then EOF, even when it
// sent a request first; beyond MaxAtOnce, connections are closed at once.
func TestRefuse(t *testing.T) {
	var wg sync.WaitGroup
	r := New(&wg)
	client, server := net.Pipe()
	go client.Write([]byte("a request the server never reads"))
	if !r.Refuse(server, []byte("busy\n")) {
		t.Fatal("Refuse() = false with no refusal in progress")
	}
	client.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "busy\n" {
		t.Errorf("client read %q, %v; want the answer, then EOF", got, err)
	}
	wg.Wait()

	// Fill every slot with clients that never read.
	var held []net.Conn
	for range MaxAtOnce {
		c, s := net.Pipe()
		held = append(held, c)
		r.Refuse(s, []byte("busy\n"))
	}
	c, s := net.Pipe()
	if r.Refuse(s, []byte("busy\n")) {
		t.Error("Refuse() = true with MaxAtOnce refusals in progress")
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Errorf("over MaxAtOnce: read %d bytes, want the connection closed", n)
	}
	wg.Wait() // each gives up within Timeout
	for _, c := range held {
		c.Close()
	}
}
