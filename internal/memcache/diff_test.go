package memcache_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchd/latch/internal/latchtest"
)

// The differential suite: every scenario of testdata/scenarios is replayed
// against a fresh Debian yrmcds and a fresh latch, and the two transcripts
// must be equal. The transcript format is described in
// internal/latchtest/transcript.go.
//
// Where latch deliberately differs from yrmcds (a yrmcds bug we do not
// copy), the scenario lives in testdata/scenarios_latch instead, with
// latch's expected replies written out, and is replayed against latch only.

var updateGolden = flag.Bool("update-golden", false,
	"rewrite the expected replies of testdata/scenarios_latch from latch's transcripts (review the diff before keeping it)")

var showTranscripts = flag.Bool("show-transcripts", false, "log yrmcds's transcript of every differential scenario")

// minScenarios is the least number of differential scenarios issue 3 asks for.
const minScenarios = 100

// diffWorkers is how many scenarios run at once. Most of a scenario's time
// is spent waiting (for replies, for sleeps), so more run than there are
// cores; each runs its own yrmcds and latch.
const diffWorkers = 6

// TestDifferential replays testdata/scenarios/*.txt against yrmcds and
// latch and compares the transcripts. A missing yrmcds fails the test.
func TestDifferential(t *testing.T) {
	scs, err := latchtest.LoadScenarios(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) < minScenarios {
		t.Errorf("%d differential scenarios, want at least %d", len(scs), minScenarios)
	}
	forEach(t, scs, func(t *testing.T, sc *latchtest.Scenario) {
		var (
			wg               sync.WaitGroup
			yrmcds, latch    *latchtest.Transcript
			yrmcdsE, latchE  error
			yrmcdsAddr, addr = latchtest.StartYrmcds(t), latchtest.StartLatch(t)
		)
		wg.Add(2)
		go func() { defer wg.Done(); yrmcds, yrmcdsE = latchtest.Replay(yrmcdsAddr, sc) }()
		go func() { defer wg.Done(); latch, latchE = latchtest.Replay(addr, sc) }()
		wg.Wait()
		if yrmcdsE != nil || latchE != nil {
			t.Fatalf("replay: yrmcds: %v; latch: %v", yrmcdsE, latchE)
		}
		if *showTranscripts {
			t.Logf("%s: %q: yrmcds's transcript:\n%s", sc.Pos(), sc.Title, strings.Join(yrmcds.Lines(), "\n"))
		}
		if diff := cmp.Diff(yrmcds.Lines(), latch.Lines()); diff != "" {
			t.Errorf("%s: %q: transcripts differ (-yrmcds +latch):\n%s", sc.Pos(), sc.Title, diff)
		}
		if sc.Golden() {
			if diff := cmp.Diff(sc.Want(), yrmcds.Lines()); diff != "" {
				t.Errorf("%s: %q: yrmcds's transcript is not the one written down (-want +yrmcds):\n%s", sc.Pos(), sc.Title, diff)
			}
		}
	})
}

// TestLatchOnly replays testdata/scenarios_latch/*.txt, latch's deliberate
// divergences from yrmcds, against latch only and compares its transcripts
// with the replies written in the files. Each scenario must say why latch
// differs, in a comment under its title.
func TestLatchOnly(t *testing.T) {
	pattern := filepath.Join("testdata", "scenarios_latch", "*.txt")
	scs, err := latchtest.LoadScenarios(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got = map[*latchtest.Scenario]*latchtest.Transcript{}
	)
	forEach(t, scs, func(t *testing.T, sc *latchtest.Scenario) {
		if len(sc.Notes) == 0 {
			t.Errorf("%s: %q: say why latch differs from yrmcds in a comment under the title", sc.Pos(), sc.Title)
		}
		tr, err := latchtest.Replay(latchtest.StartLatch(t), sc)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got[sc] = tr
		mu.Unlock()
		if *updateGolden {
			return
		}
		if !sc.Golden() {
			t.Errorf("%s: %q: no expected replies (run with -update-golden and review)", sc.Pos(), sc.Title)
		}
		if diff := cmp.Diff(sc.Want(), tr.Lines()); diff != "" {
			t.Errorf("%s: %q: latch's transcript differs (-want +latch):\n%s", sc.Pos(), sc.Title, diff)
		}
	})
	if *updateGolden && !t.Failed() {
		writeGolden(t, pattern, scs, got)
	}
}

// forEach runs f for every scenario as a subtest named <file>/<title>, at
// most diffWorkers at a time.
func forEach(t *testing.T, scs []*latchtest.Scenario, f func(*testing.T, *latchtest.Scenario)) {
	sem := make(chan struct{}, diffWorkers)
	var wg sync.WaitGroup
	for _, sc := range scs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := strings.TrimSuffix(sc.File, ".txt") + "/" + sc.Title
			t.Run(name, func(t *testing.T) { f(t, sc) })
		}()
	}
	wg.Wait()
}

// writeGolden rewrites the scenario files of pattern, replacing every
// step's expected replies with the ones latch sent.
func writeGolden(t *testing.T, pattern string, scs []*latchtest.Scenario, got map[*latchtest.Scenario]*latchtest.Transcript) {
	t.Helper()
	byFile := map[string][]*latchtest.Scenario{}
	for _, sc := range scs {
		byFile[sc.File] = append(byFile[sc.File], sc)
	}
	for file, fscs := range byFile {
		path := filepath.Join(filepath.Dir(pattern), file)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Keep every line but the old replies, and put each step's new
		// replies right after it.
		replies := map[int][]string{} // by the step's line number
		for _, sc := range fscs {
			for _, e := range got[sc].Entries {
				replies[e.Step.Line] = e.Replies
			}
		}
		var out []string
		for n, line := range strings.Split(strings.TrimSuffix(string(src), "\n"), "\n") {
			if strings.HasPrefix(line, "<") {
				continue
			}
			out = append(out, line)
			out = append(out, replies[n+1]...)
		}
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
