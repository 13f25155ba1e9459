package netserve

import "errors"

// loopRef is a loop connection's handle, for closing it from outside its
// loop.
type loopRef struct{}

func (r loopRef) close() error {
	return errors.New("netserve: closing a loop's connection from outside is not supported yet")
}
