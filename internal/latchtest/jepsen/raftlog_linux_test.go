//go:build linux

package jepsen

import (
	"fmt"
	"hash/fnv"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/replica/raftrep"
)

// raftLogs is what compareRaftLogs found in the nodes' Raft logs.
type raftLogs struct {
	entries  uint64   // indexes held by every node and compared
	diverged int      // indexes where two nodes hold different entries of one term
	problems []string // the first of them
}

// compareRaftLogs reads the Raft log of each data dir (its node stopped)
// and counts the indexes where two nodes hold entries of the same term
// that differ: Raft's Log Matching property broken, and with it every
// replica's copy of the lock table. Entries of different terms at one
// index are the uncommitted tail of a deposed leader, and not counted.
func compareRaftLogs(dirs map[string]string) (raftLogs, error) {
	type entry struct {
		term uint64
		typ  raft.LogType
		sum  uint64
	}
	var res raftLogs
	logs := map[string]map[uint64]entry{}
	lo, hi := uint64(0), ^uint64(0)
	for id, dir := range dirs {
		// The node is stopped: nothing else writes its log.
		s, err := raftrep.OpenLog(dir)
		if err != nil {
			return res, fmt.Errorf("jepsen: %s's raft log: %w", id, err)
		}
		first, err1 := s.FirstIndex()
		last, err2 := s.LastIndex()
		if err1 != nil || err2 != nil {
			s.Close()
			return res, fmt.Errorf("jepsen: %s's raft log: %v %v", id, err1, err2)
		}
		lo, hi = max(lo, first), min(hi, last)
		m := make(map[uint64]entry, last-first+1)
		for i := first; i <= last && first > 0; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				continue
			}
			h := fnv.New64a()
			h.Write(l.Data)
			m[i] = entry{l.Term, l.Type, h.Sum64()}
		}
		s.Close()
		logs[id] = m
	}
	var ids []string
	for id := range logs {
		ids = append(ids, id)
	}
	for i := lo; i <= hi && lo > 0; i++ {
		res.entries++
		counted := false
		for _, a := range ids {
			for _, b := range ids {
				ea, oka := logs[a][i]
				eb, okb := logs[b][i]
				if a >= b || !oka || !okb || ea.term != eb.term || ea == eb {
					continue
				}
				if !counted {
					res.diverged++
					counted = true
				}
				if len(res.problems) < 10 {
					res.problems = append(res.problems, fmt.Sprintf("raft logs diverge at index %d, term %d: %s holds a %v entry, %s a %v entry",
						i, ea.term, a, ea.typ, b, eb.typ))
				}
			}
		}
	}
	return res, nil
}
