package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
)

// A lock around a job: the job stops using what the lock protects as soon
// as the lock may be lost, and passes the fencing token to the store.
func Example() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:11212")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Lock(ctx, []string{"reports/daily"}, client.Wait(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)

	// Stop the job when the lock is lost.
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Done():
			log.Printf("lock lost: %v", l.Err())
			cancel()
		case <-jobCtx.Done():
		}
	}()
	runJob(jobCtx, l.Token())
}

func runJob(ctx context.Context, token latch.Token) {}

// TryLock fails at once when a key is busy.
func ExampleClient_TryLock() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:11212")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.TryLock(ctx, []string{"deploy/prod"})
	var busy *latch.BusyError
	switch {
	case errors.As(err, &busy):
		fmt.Println("someone else is deploying:", busy.Keys)
		return
	case err != nil:
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	fmt.Println("deploying with token", l.Token())
}

// RLock with a limit is a counting semaphore: at most 4 holders of
// "gpu-pool" at once, on any number of machines.
func ExampleClient_RLock() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:11212")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.RLock(ctx, []string{"gpu-pool"}, client.Limit(4))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	// ... use one of the 4 slots ...
}

// Waiting is bounded by Wait and by the context; a cancelled wait is
// withdrawn from the server's queue.
func ExampleClient_Lock_timeout() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, "127.0.0.1:11212")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.Lock(ctx, []string{"a", "b"}, client.Wait(5*time.Second))
	switch {
	case errors.Is(err, latch.ErrTimeout):
		fmt.Println("still busy after 5s")
	case errors.Is(err, latch.ErrCanceled):
		fmt.Println("gave up:", ctx.Err())
	case err != nil:
		log.Fatal(err)
	}
}

// A lease outlives the client: should this process die, the lock stays
// held for at most the lease, unless renewed.
func ExampleLock_Renew() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:11212")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const lease = time.Minute
	l, err := c.Lock(ctx, []string{"migration"}, client.Lease(lease))
	if err != nil {
		log.Fatal(err)
	}
	tick := time.NewTicker(lease / 3)
	defer tick.Stop()
	for step := 0; step < 10; step++ {
		select {
		case <-tick.C:
			if err := l.Renew(ctx, lease); err != nil {
				log.Fatal(err)
			}
		case <-l.Done():
			log.Fatal(l.Err())
		}
	}
	l.Unlock(ctx)
}
