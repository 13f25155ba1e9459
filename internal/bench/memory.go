package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// sampler reads a server's memory: its VmRSS from /proc/<pid>/status, and,
// for latch, the Go heap after a forced GC and the RSS from its admin
// endpoint (/debug/pprof/heap?gc=1 runs the GC, /metrics reports).
type sampler struct {
	pid   int
	admin string // host:port
	http  *http.Client
}

func newSampler(cfg *Config) *sampler {
	return &sampler{pid: cfg.ServerPID, admin: cfg.Admin, http: &http.Client{Timeout: 30 * time.Second}}
}

func (s *sampler) enabled() bool { return s.pid > 0 || s.admin != "" }

// source says where the samples come from.
func (s *sampler) source() string {
	var src []string
	if s.pid > 0 {
		src = append(src, fmt.Sprintf("/proc/%d/status VmRSS", s.pid))
	}
	if s.admin != "" {
		src = append(src, "http://"+s.admin+"/metrics")
	}
	if len(src) == 0 {
		return "none: give --server-pid or --admin"
	}
	return strings.Join(src, " and ")
}

func (s *sampler) sample(ctx context.Context) (Memory, error) {
	m := Memory{RSS: -1, Heap: -1}
	if s.admin != "" {
		heap, rss, err := s.fromAdmin(ctx)
		if err != nil {
			return m, err
		}
		m.Heap, m.RSS = heap, rss
	}
	if s.pid > 0 {
		rss, err := vmRSS(s.pid)
		if err != nil {
			return m, err
		}
		m.RSS = rss
	}
	return m, nil
}

// vmRSS reads the VmRSS of process pid, in bytes.
func vmRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: server memory: %w", err)
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := strings.Fields(string(rest))
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10, nil
				}
			}
			return 0, fmt.Errorf("bench: server memory: bad VmRSS line %q", line)
		}
	}
	return 0, fmt.Errorf("bench: server memory: no VmRSS in /proc/%d/status", pid)
}

// fromAdmin forces a GC in the server, then reads its live heap and RSS
// from its metrics; -1 for a metric it does not export.
func (s *sampler) fromAdmin(ctx context.Context) (heap, rss int64, err error) {
	if _, err := s.get(ctx, "/debug/pprof/heap?gc=1"); err != nil {
		return -1, -1, err
	}
	body, err := s.get(ctx, "/metrics")
	if err != nil {
		return -1, -1, err
	}
	heap, rss = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes":
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				continue
			}
			if name == "go_memstats_heap_alloc_bytes" {
				heap = int64(f)
			} else {
				rss = int64(f)
			}
		}
	}
	if heap < 0 && rss < 0 {
		return -1, -1, errors.New("bench: server memory: /metrics has neither go_memstats_heap_alloc_bytes nor process_resident_memory_bytes")
	}
	return heap, rss, nil
}

func (s *sampler) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: server memory: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("bench: server memory: %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: server memory: %s: %s", path, resp.Status)
	}
	return body, nil
}

// perUnit returns (after - before) / n for a source both samples have, or -1.
func perUnit(after, before int64, n int) float64 {
	if after < 0 || before < 0 || n <= 0 {
		return -1
	}
	return float64(after-before) / float64(n)
}
