package resp

import (
	"sort"
	"strings"
)

// Pub/sub, as far as client-side caching needs it: a RESP2 connection
// that is the REDIRECT target of a tracking connection receives its
// invalidations as messages of the channel __redis__:invalidate once it
// has subscribed (to any channel, as Redis sends them). Nothing else is
// published: latch has no PUBLISH.

// subscribedCommands are those a RESP2 connection with subscriptions may
// send.
var subscribedCommands = map[string]bool{
	"subscribe": true, "unsubscribe": true, "psubscribe": true, "punsubscribe": true,
	"ping": true, "quit": true, "reset": true,
}

// cmdSubscribe is SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE and PUNSUBSCRIBE: one
// reply per channel or pattern, with the count of subscriptions left.
func cmdSubscribe(c *conn, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	set := &c.channels
	if name[0] == 'p' {
		set = &c.patterns
	}
	if *set == nil {
		*set = make(map[string]bool)
	}
	sub := !strings.Contains(name, "unsub")
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	if !sub && len(names) == 0 {
		for ch := range *set {
			names = append(names, ch)
		}
		sort.Strings(names) // an order of its own: Redis's is its hash table's
		if len(names) == 0 {
			c.pubsubReply(name, "", false)
			return
		}
	}
	for _, ch := range names {
		if sub {
			(*set)[ch] = true
		} else {
			delete(*set, ch)
		}
		c.nsubs.Store(int32(len(c.channels) + len(c.patterns)))
		c.pubsubReply(name, ch, true)
	}
}

// pubsubReply writes a (un)subscription's confirmation: its kind, the
// channel (a null without one) and the subscriptions left.
func (c *conn) pubsubReply(kind, ch string, named bool) {
	c.w.Push(3)
	c.w.BulkString(kind)
	if named {
		c.w.BulkString(ch)
	} else {
		c.w.Null()
	}
	c.w.Int(int64(c.nsubs.Load()))
}
