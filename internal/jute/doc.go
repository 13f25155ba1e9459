// Package jute is ZooKeeper's wire format as latch's ZooKeeper front end
// speaks it: the op, error, xid, event and state codes; the jute encoding
// of the records that front end reads and writes; and the frames that carry
// them, with their length limit and the four-letter words that may take a
// frame's place at the start of a connection.
//
// # Encoding
//
// Jute, ZooKeeper's record encoding, writes int as 4 bytes and long as 8,
// both big-endian two's complement; boolean as one byte (0 or 1; any other
// byte reads as true); buffer and ustring as an int length, -1 for null,
// then the bytes; vector as an int count, -1 for null, then the elements.
// A record is its fields in order, with no tag, length or padding.
//
// A Decoder reads from a byte slice and keeps the first error it meets;
// every later read returns a zero value, so a record's Decode method reads
// its fields in a row and its caller looks at Decoder.Err once. A length
// other than -1 that is negative or larger than the bytes left is an error
// (ErrLength), as is input that ends inside a field (ErrShort). No input
// makes the Decoder panic, and what it allocates is bounded by a small
// multiple of the input's size: a count is checked against the bytes left
// before anything is reserved for it. The Append functions and each
// record's Append method write the encoding at the end of a byte slice.
//
// Buffers are borrowed: the []byte a Decoder returns for a buffer (a
// znode's data, a password) is a sub-slice of its input, valid only as long
// as the input is. Strings are copied. A record's Decode reuses the record's
// own slices (ACL lists, children, multi ops) where their capacity allows.
//
// Null and empty are kept apart where it costs nothing: a null buffer or
// vector decodes as nil, and nil encodes as null (-1); an empty one decodes
// as a non-nil empty slice, which encodes as 0. A null ustring decodes
// as "" (ZooKeeper's clients send none where latch reads strings) and the
// Decoder notes that the input was not canonical (Decoder.Canonical), as it
// does for a boolean byte other than 0 or 1.
//
// # Frames
//
// Every message is a frame: a 4-byte big-endian length, then that many
// bytes. ZooKeeper closes a connection whose frame length is negative or
// more than jute.maxbuffer (MaxFrame by default). The first frame of a
// connection is a bare ConnectRequest; after it each request is a
// RequestHeader and the record of its op, and each reply a ReplyHeader
// followed by the op's response record only when the header's error is OK.
// NextFrame cuts frames from buffered input; StartFrame and FinishFrame
// write one in place. FourLetterWord recognizes a connection that starts
// with an admin command (ruok, srvr, ...) instead of a frame length.
//
// The package does no I/O and imports nothing from the rest of the module.
package jute
