package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest"
)

// TestDialMemcachedPort: a client pointed at latch's memcached port is told
// at once what it reached, rather than waiting for its dial timeout: the
// memcached front end answers a connection that starts like a dlock frame
// with an error line, and the client recognises a text reply.
func TestDialMemcachedPort(t *testing.T) {
	addr := latchtest.Start(t).Memcache

	// A long dial timeout: the answer must not come from it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, addr, DialTimeout(time.Minute))
	if err == nil {
		c.Close()
		t.Fatal("Dial of a memcached port succeeded")
	}
	if !errors.Is(err, ErrProtocol) || errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "not a dlock port") || !strings.Contains(err.Error(), "CLIENT_ERROR") {
		t.Fatalf("Dial of a memcached port: %v; want a protocol error naming the text reply", err)
	}
}
