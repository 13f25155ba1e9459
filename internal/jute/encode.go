package jute

import "encoding/binary"

// AppendInt appends a jute int.
func AppendInt(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// AppendLong appends a jute long.
func AppendLong(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendBool appends a jute boolean (1 or 0).
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendBuffer appends a jute buffer: -1 for nil, else the length and p.
func AppendBuffer(b, p []byte) []byte {
	if p == nil {
		return AppendInt(b, -1)
	}
	return append(AppendInt(b, int32(len(p))), p...)
}

// AppendString appends a jute ustring (never null).
func AppendString(b []byte, s string) []byte {
	return append(AppendInt(b, int32(len(s))), s...)
}

// AppendStrings appends a vector<ustring>: -1 for nil.
func AppendStrings(b []byte, v []string) []byte {
	if v == nil {
		return AppendInt(b, -1)
	}
	b = AppendInt(b, int32(len(v)))
	for _, s := range v {
		b = AppendString(b, s)
	}
	return b
}

// AppendACLs appends a vector<ACL>: -1 for nil.
func AppendACLs(b []byte, v []ACL) []byte {
	if v == nil {
		return AppendInt(b, -1)
	}
	b = AppendInt(b, int32(len(v)))
	for i := range v {
		b = v[i].Append(b)
	}
	return b
}
