package resp_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// TestRueidisCache: rueidis with client-side caching on (its default,
// tracking in OPTIN mode over RESP3): a GET cached by DoCache is served
// from the cache until another client changes the key, and the
// invalidation latch pushes makes the next DoCache read it again.
func TestRueidisCache(t *testing.T) {
	for _, served := range []string{"event loops", "goroutines"} {
		t.Run(served, func(t *testing.T) {
			addr := startLatch(t).redis
			if served == "goroutines" {
				addr = startResp(t, -1)
			}
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableRetry: true})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			other, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := prefix(t) + "k"
			get := func() (string, bool) {
				t.Helper()
				r := client.DoCache(ctx, client.B().Get().Key(key).Cache(), time.Minute)
				v, err := r.ToString()
				if rueidis.IsRedisNil(err) {
					v, err = "(nil)", nil
				}
				if err != nil {
					t.Fatalf("DoCache GET: %v", err)
				}
				return v, r.IsCacheHit()
			}
			if v, hit := get(); v != "(nil)" || hit {
				t.Fatalf("first GET: %q, cache hit %v; want nil from the server", v, hit)
			}
			if v, hit := get(); v != "(nil)" || !hit {
				t.Fatalf("second GET: %q, cache hit %v; want nil from the cache", v, hit)
			}
			if err := other.Do(ctx, other.B().Set().Key(key).Value("owner").Nx().Px(time.Minute).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			// The invalidation arrives on its own: poll until the cache forgot.
			deadline := time.Now().Add(5 * time.Second)
			for {
				v, hit := get()
				if v == "owner" && !hit {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after another client's SET: %q, cache hit %v; the cache was never invalidated", v, hit)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if v, hit := get(); v != "owner" || !hit {
				t.Fatalf("GET again: %q, cache hit %v; want the value from the cache", v, hit)
			}
			if err := other.Do(ctx, other.B().Del().Key(key).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			for v, hit := get(); v != "(nil)" || hit; v, hit = get() {
				if time.Now().After(deadline) {
					t.Fatalf("after DEL: %q, cache hit %v", v, hit)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestRueidisLock: rueidislock with its default options (three keys per
// lock, a majority of two, client-side caching to hear of releases):
// WithContext, TryWithContext while held and once released, and two
// lockers contending for one lock, one holding it at a time.
func TestRueidisLock(t *testing.T) {
	addr := startLatch(t).redis
	if os.Getenv("RUEIDIS_AGAINST_REDIS") != "" {
		addr = startRedis(t)
	}
	lockPrefix := prefix(t) + "lock"
	newLocker := func() rueidislock.Locker {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
			KeyPrefix:    lockPrefix,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	a, b := newLocker(), newLocker()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lctx, release, err := a.WithContext(ctx, "name")
	if err != nil {
		t.Fatalf("WithContext: %v", err)
	}
	if _, _, err := b.TryWithContext(ctx, "name"); !errors.Is(err, rueidislock.ErrNotLocked) {
		t.Fatalf("TryWithContext of a held lock: %v, want ErrNotLocked", err)
	}
	if lctx.Err() != nil {
		t.Fatalf("the holder's context ended: %v", lctx.Err())
	}
	release()
	bctx, brelease, err := b.TryWithContext(ctx, "name")
	if err != nil {
		t.Fatalf("TryWithContext once released: %v", err)
	}

	// Contention: a waits for b's lock, and gets it once b releases it.
	got := make(chan error, 1)
	go func() {
		_, r, err := a.WithContext(ctx, "name")
		if err == nil {
			defer r()
			if bctx.Err() == nil {
				err = errors.New("a got the lock while b still held it")
			}
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a's WithContext returned while b held the lock: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	brelease()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		// The release is heard through an invalidation, well before the
		// keys' validity (5 s) would end.
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("a got the lock %v after b released it", d)
		}
	case <-ctx.Done():
		t.Fatal("a never got the lock after b released it")
	}
}
