package metrics

import (
	"time"

	"github.com/latchd/latch/internal/node"
)

// maxProtocols bounds the protocols the lock-table metrics tell apart; the
// sessions of any further one are counted under "other". Protocol names
// come from the front ends, so there are a handful.
const maxProtocols = 32

// Label values of the protocol label that are not a protocol's name.
const (
	protoNone    = "none"    // a lease that outlived its session
	protoUnknown = "unknown" // a session that gave no protocol
	protoOther   = "other"   // past maxProtocols
)

// causeLabels are the values of the cause label, by node.ReleaseCause.
var causeLabels = [node.NumReleaseCauses]string{
	node.ReleasedByClient:     "release",
	node.ReleasedSessionEnded: "session_end",
	node.ReleasedLeaseExpired: "lease_expiry",
	node.ReleasedForced:       "forced",
}

// protoCounts are the lock-table counters of one protocol.
type protoCounts struct {
	opened, ended, expired    uint64
	grants, timeouts, cancels uint64
	released                  [node.NumReleaseCauses]uint64
}

// Observer implements node.Observer: it counts what the lock service does.
// Every method but HandedOff runs under the node's mutex, which guards its
// fields; the registry reads them under the same mutex (see Watch).
type Observer struct {
	// Guarded by the node's mutex.
	index  map[string]int // protocol name to index in protos
	names  []string       // label value of each index
	protos []protoCounts  // index 0 (node.NoProto) is protoNone
	owned  int            // index of node.OwnedProtocol, for node.OwnedProto; 0 until its first event
	wait   hist
	hold   hist

	handoff atomicHist // HandedOff runs without the node's mutex
}

var _ node.Observer = (*Observer)(nil)

func newObserver() *Observer {
	o := &Observer{index: make(map[string]int)}
	o.add(protoNone)
	return o
}

func (o *Observer) add(name string) int {
	i := len(o.names)
	o.index[name] = i
	o.names = append(o.names, name)
	o.protos = append(o.protos, protoCounts{})
	return i
}

// counts returns the counters of proto: node.OwnedProto's are those of
// node.OwnedProtocol (the Redis front end's locks); node.NoProto and
// anything else out of range count under "none".
func (o *Observer) counts(proto int) *protoCounts {
	if proto == node.OwnedProto {
		if o.owned == 0 {
			o.owned = o.index[node.OwnedProtocol]
			if o.owned == 0 {
				o.owned = o.add(node.OwnedProtocol)
			}
		}
		proto = o.owned
	}
	if proto < 0 || proto >= len(o.protos) {
		proto = 0
	}
	return &o.protos[proto]
}

// SessionOpened implements node.Observer.
func (o *Observer) SessionOpened(protocol string) int {
	if protocol == "" || protocol == protoNone {
		protocol = protoUnknown // and never node.NoProto
	}
	i, ok := o.index[protocol]
	if !ok {
		if len(o.names) < maxProtocols {
			i = o.add(protocol)
		} else if i, ok = o.index[protoOther]; !ok {
			i = o.add(protoOther)
		}
	}
	o.protos[i].opened++
	return i
}

// SessionEnded implements node.Observer.
func (o *Observer) SessionEnded(proto int) { o.counts(proto).ended++ }

// SessionExpired implements node.Observer.
func (o *Observer) SessionExpired(proto int) { o.counts(proto).expired++ }

// Granted implements node.Observer.
func (o *Observer) Granted(proto, keys int, waited time.Duration) {
	o.counts(proto).grants++
	o.wait.observe(waited)
}

// TimedOut implements node.Observer.
func (o *Observer) TimedOut(proto, keys int) { o.counts(proto).timeouts++ }

// Canceled implements node.Observer.
func (o *Observer) Canceled(proto int) { o.counts(proto).cancels++ }

// Released implements node.Observer.
func (o *Observer) Released(drops []node.Drop) {
	for i := range drops {
		d := &drops[i]
		if int(d.Cause) < node.NumReleaseCauses {
			o.counts(int(d.Tag)).released[d.Cause]++
		}
		o.hold.observe(time.Duration(d.At - d.Acquired))
	}
}

// HandedOff implements node.Observer. It is safe for concurrent use.
func (o *Observer) HandedOff(latency time.Duration) { o.handoff.observe(latency) }

// tableSnapshot is a copy of the Observer and the lock table's counts,
// taken under the node's mutex.
type tableSnapshot struct {
	stats  node.Stats
	names  []string
	protos []protoCounts
	wait   Histogram
	hold   Histogram
}

// snapshot copies o. Called under the node's mutex.
func (o *Observer) snapshot(st node.Stats) tableSnapshot {
	return tableSnapshot{
		stats:  st,
		names:  append([]string(nil), o.names...),
		protos: append([]protoCounts(nil), o.protos...),
		wait:   o.wait.snapshot(),
		hold:   o.hold.snapshot(),
	}
}
