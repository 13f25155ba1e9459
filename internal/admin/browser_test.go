package admin_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
)

// findChromium returns the path of a Chromium or Chrome binary. When there
// is none the test is skipped, except on CI (CI=true), where it fails:
// make test installs Debian's chromium.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium to run the status page in: install Debian's chromium (make deps)")
	}
	t.Skip("no chromium to run the status page in (apt-get install chromium)")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// context driving one tab of it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(findChromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The browser lives as long as the context of the first Run: this one.
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// TestStatusPage loads the status page in a real browser: a lock the test
// holds appears, with its holder and waiter; searching and sorting work;
// the lock disappears once released. Screenshots (desktop and phone) go to
// the test's artifact directory (go test -artifacts keeps them).
func TestStatusPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	e := start(t, "")
	ctx := browser(t)

	holder := e.open("dlock", "10.1.2.3:40122", time.Minute)
	waiter := e.open("memcache", "10.1.2.9:51234", 0)
	other := e.open("dlock", "10.1.2.4:40123", 0)
	e.hold(holder, latch.LockRequest{Keys: []string{"deploy/prod"}})
	e.hold(other, latch.LockRequest{Keys: []string{"jobs/nightly-report"}, Mode: latch.Shared, Limit: 2, Lease: 10 * time.Minute})
	e.hold(holder, latch.LockRequest{Keys: []string{"jobs/nightly-report"}, Mode: latch.Shared, Limit: 2})
	e.hold(other, latch.LockRequest{Keys: []string{"cache/rebuild"}})
	granted := e.park(waiter, "deploy/prod")

	const row = `tr[data-key="deploy/prod"]`
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		must("reading "+sel, err)
		return s
	}
	eval := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		must("evaluating "+expr, err)
		return n
	}

	must("loading the page", chromedp.Do(ctx,
		chromedp.Navigate(e.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(row)),
	))
	if got, want := text(row+` td[data-label="Held by"]`), "session "+itoa(holder.ID()); !strings.Contains(got, want) || !strings.Contains(got, "10.1.2.3:40122") {
		t.Errorf("held by = %q, want %q and the peer", got, want)
	}
	if got := text(row + ` td[data-label="Waiting"]`); !strings.Contains(got, "0 ahead") || !strings.Contains(got, "s"+itoa(waiter.ID())) {
		t.Errorf("waiting = %q, want the waiter first in line", got)
	}
	if got := text("#t-held"); got != "4" {
		t.Errorf("held locks tile = %q, want 4", got)
	}

	// Let a chart sample or two arrive, then take the screenshots.
	e.eventually("a chart sample", func() bool { return eval(`document.querySelectorAll("#c-grants polyline").length`) > 0 })
	dir := t.ArtifactDir()
	shot := func(name string, full bool) {
		t.Helper()
		must("settling", chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)))
		take := chromedp.CaptureScreenshot()
		if full {
			take = chromedp.FullScreenshot(100)
		}
		png, err := chromedp.Run(ctx, take)
		must("screenshot", err)
		p := filepath.Join(dir, name)
		must("saving the screenshot", os.WriteFile(p, png, 0o644))
		t.Logf("screenshot: %s", p)
	}
	shot("status-desktop.png", true)
	dark := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, dark)
	must("dark mode", err)
	shot("status-desktop-dark.png", true)
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
	must("light mode", err)
	must("phone viewport", chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)))
	shot("status-phone.png", false)
	shot("status-phone-full.png", true)
	locksPNG, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#locks-panel")))
	must("screenshot of the locks", err)
	must("saving the screenshot", os.WriteFile(filepath.Join(dir, "status-phone-locks.png"), locksPNG, 0o644))
	must("desktop viewport", chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)))

	// Search by key.
	must("searching", chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#search"), "nightly"),
		chromedp.WaitNotPresent(chromedp.CSS(row)),
	))
	if n := eval(`document.querySelectorAll("#locks-body tr").length`); n != 1 {
		t.Errorf("searching \"nightly\" shows %d rows, want 1", n)
	}
	eval(`(() => { const s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input")); return 0 })()`)
	must("clearing the search", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(row))))

	// Sort by key, descending: click the header of the sorted column.
	var first string
	must("sorting", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#locks th[data-sort="key"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks th[data-sort="key"][aria-sort="descending"]`)),
	))
	first, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#locks-body tr").dataset.key`))
	must("reading the first row", err)
	if first != "jobs/nightly-report" {
		t.Errorf("first row sorted by key descending = %q, want jobs/nightly-report", first)
	}

	// Release: the lock passes to the waiter, then leaves the page.
	must("release", holder.Release("deploy/prod"))
	must("hand-off", <-granted)
	must("waiting for the hand-off to show", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(row+`:not(:has(.waiter))`))))
	if got, want := text(row+` td[data-label="Held by"]`), "session "+itoa(waiter.ID()); !strings.Contains(got, want) {
		t.Errorf("held by after the hand-off = %q, want %q", got, want)
	}
	must("release", waiter.Release("deploy/prod"))
	must("waiting for the released lock to disappear", chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(row))))
}

func itoa(id latch.SessionID) string { return strconv.FormatUint(uint64(id), 10) }

// TestStatusPageCluster: the page of a durable node shows its cluster
// line: the mode, the node, the leader and the members' states; an
// in-memory node's page hides it.
func TestStatusPageCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	srv := latchtest.Start(t, func(c *config.Config) { c.Cluster.DataDir = t.TempDir() })
	ctx := browser(t)
	var line string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+srv.Admin+"/"), chromedp.Sleep(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		var err error
		line, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#cluster")))
		if err == nil && strings.Contains(line, "leader latch") {
			break
		}
	}
	if want := "durable · node latch · leader latch · latch leader"; line != want {
		t.Errorf("cluster line = %q, want %q", line, want)
	}
}

// TestStatusPageZooKeeper: the page shows the data tree's counts in a
// tile, and a ZooKeeper session's ephemeral znodes in its row.
func TestStatusPageZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	e := start(t, "")
	zk := dialZK(t, e.srv.ZooKeeperAddr().String(), 10000)
	zk.create("/svc", 0)
	for _, p := range []string{"/svc/a", "/svc/b", "/svc/c", "/svc/d"} {
		zk.create(p, 1) // ephemeral
	}
	dl := e.open("dlock", "10.1.2.3:40122", 0)
	ctx := browser(t)
	row := `tr[data-session="` + strconv.FormatInt(zk.sess, 10) + `"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(e.base+"/"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	if got := text("#t-znodes"); got != "9" {
		t.Errorf("znodes tile = %q, want 9", got)
	}
	if got := text("#t-zk"); got != "4 ephemeral" {
		t.Errorf("znodes tile's line = %q", got)
	}
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("t-zk").title`))
	if err != nil || !strings.HasPrefix(title, "ZooKeeper: 1 session · 0 watches · zxid 0x") {
		t.Errorf("znodes tile's title = %q, %v", title, err)
	}
	if got := text(row + ` td[data-label="Protocol"]`); got != "zookeeper" {
		t.Errorf("protocol = %q, want zookeeper", got)
	}
	got := text(row + ` td[data-label="Ephemerals"]`)
	for _, want := range []string{"/svc/a", "/svc/c", "+1 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("ephemerals = %q, want it to show %q", got, want)
		}
	}
	if got := text(`tr[data-session="` + itoa(dl.ID()) + `"] td[data-label="Ephemerals"]`); got != "–" {
		t.Errorf("a dlock session's ephemerals = %q, want –", got)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(t.ArtifactDir(), "status-zookeeper.png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}
