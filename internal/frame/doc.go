// Package frame reads and writes length-prefixed frames: a 4-byte unsigned
// big-endian length N, then N bytes of payload. The dlock protocol carries
// one protobuf message per frame.
//
// A Reader reads each frame whole with io.ReadFull, so a frame split across
// any number of TCP segments reads the same as one that arrived at once. It
// refuses a frame longer than its limit with an error wrapping ErrTooLarge
// before reading its payload, and reuses one buffer for the payloads it
// returns.
//
// The writing side appends frames to a byte slice (Append, or Start and
// Finish around a payload encoded in place), so that a sender can gather
// many frames and write them with one call; Writer wraps that for a single
// io.Writer.
//
// The package imports nothing from the rest of the module.
package frame
