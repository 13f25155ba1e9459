package jute

// MultiHeader precedes each op of a multi request and each result of a
// multi response; a header with Done set ends either, and is sent as
// {Type: -1, Done: true, Err: -1}.
type MultiHeader struct {
	Type Op
	Done bool
	Err  Code
}

// MultiHeaderSize is the encoded size of a MultiHeader.
const MultiHeaderSize = 9

// multiEnd is the header that ends a multi request or response.
var multiEnd = MultiHeader{Type: -1, Done: true, Err: -1}

// Decode reads a MultiHeader.
func (h *MultiHeader) Decode(d *Decoder) {
	h.Type = Op(d.Int())
	h.Done = d.Bool()
	h.Err = Code(d.Int())
}

// Append appends a MultiHeader.
func (h *MultiHeader) Append(b []byte) []byte {
	b = AppendInt(b, int32(h.Type))
	b = AppendBool(b, h.Done)
	return AppendInt(b, int32(h.Err))
}

// MultiOp is one op of a multi request, its fields those of the op's
// request record: create, create2 and createContainer (CreateRequest: Path,
// Data, ACL, Flags), createTTL (the same and TTL), delete and check (Path,
// Version), setData (Path, Data, Version), and the read ops getData and
// getChildren (Path, Watch), which ZooKeeper allows only in a multiRead.
type MultiOp struct {
	Type    Op
	Path    string
	Data    []byte // borrowed
	ACL     []ACL
	Flags   int32
	TTL     int64
	Version int32
	Watch   bool
}

// IsRead reports whether the op is a read (getData, getChildren), which
// belongs in a multiRead, not a multi.
func (o *MultiOp) IsRead() bool { return o.Type == OpGetData || o.Type == OpGetChildren }

// decode reads the op's record, that of o.Type; false for an op that
// cannot be part of a multi.
func (o *MultiOp) decode(d *Decoder) bool {
	switch o.Type {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		o.Path = d.Str()
		o.Data = d.Buffer()
		o.ACL = d.ACLs(o.ACL)
		o.Flags = d.Int()
		if o.Type == OpCreateTTL {
			o.TTL = d.Long()
		}
	case OpDelete, OpCheck:
		o.Path = d.Str()
		o.Version = d.Int()
	case OpSetData:
		o.Path = d.Str()
		o.Data = d.Buffer()
		o.Version = d.Int()
	case OpGetData, OpGetChildren:
		o.Path = d.Str()
		o.Watch = d.Bool()
	default:
		return false
	}
	return true
}

// append appends the op's header and record. It writes nothing for an op
// that cannot be part of a multi.
func (o *MultiOp) append(b []byte) []byte {
	switch o.Type {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpCheck, OpSetData, OpGetData, OpGetChildren:
	default:
		return b
	}
	h := MultiHeader{Type: o.Type, Err: -1}
	b = h.Append(b)
	switch o.Type {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL:
		b = AppendString(b, o.Path)
		b = AppendBuffer(b, o.Data)
		b = AppendACLs(b, o.ACL)
		b = AppendInt(b, o.Flags)
		if o.Type == OpCreateTTL {
			b = AppendLong(b, o.TTL)
		}
	case OpDelete, OpCheck:
		b = AppendInt(AppendString(b, o.Path), o.Version)
	case OpSetData:
		b = AppendString(b, o.Path)
		b = AppendBuffer(b, o.Data)
		b = AppendInt(b, o.Version)
	case OpGetData, OpGetChildren:
		b = AppendBool(AppendString(b, o.Path), o.Watch)
	}
	return b
}

// MultiRequest is the request of multi (and of multiRead): ops, each a
// MultiHeader{Type: op, Done: false, Err: -1} and the op's record, ended by
// a header with Done set.
type MultiRequest struct {
	Ops []MultiOp
}

// Decode reads a MultiRequest, reusing m.Ops and their ACL slices. An op
// type that cannot be in a multi is an error wrapping ErrMultiOp, as it is
// ZooKeeper's; read ops are decoded (see MultiOp.IsRead). A header's Err
// other than -1, or an end other than {-1, true, -1}, makes the input
// non-canonical. After an error m.Ops holds the ops read before it.
func (m *MultiRequest) Decode(d *Decoder) {
	m.Ops = m.Ops[:0]
	for {
		off := d.Offset()
		var h MultiHeader
		h.Decode(d)
		if d.err != nil {
			return
		}
		if h.Done {
			if h != multiEnd {
				d.noncan = true
			}
			return
		}
		if h.Err != -1 {
			d.noncan = true
		}
		if len(m.Ops) < cap(m.Ops) {
			m.Ops = m.Ops[:len(m.Ops)+1]
		} else {
			m.Ops = append(m.Ops, MultiOp{})
		}
		o := &m.Ops[len(m.Ops)-1]
		*o = MultiOp{Type: h.Type, ACL: o.ACL[:0]}
		if !o.decode(d) {
			d.fail(ErrMultiOp, off, int64(h.Type))
		}
		if d.err != nil {
			m.Ops = m.Ops[:len(m.Ops)-1]
			return
		}
	}
}

// Append appends a MultiRequest, skipping ops whose type cannot be in a
// multi.
func (m *MultiRequest) Append(b []byte) []byte {
	for i := range m.Ops {
		b = m.Ops[i].append(b)
	}
	return multiEnd.Append(b)
}

// MultiResult is one op's result in a multi response.
//
// ZooKeeper 3.8 answers create with Type OpCreate and a CreateResponse
// (Path); create2, createContainer and createTTL with OpCreate2 and a
// Create2Response (Path, Stat); setData with OpSetData and a
// SetDataResponse (Stat); delete and check with their op and no record.
// When the multi fails, every result is Type OpError with an
// ErrorResponse: Err is OK for the ops before the one that failed, its code
// for that one and RuntimeInconsistency for those after it; the reply's
// header then still carries OK (MultiResultType maps a request's op to its
// result's Type).
type MultiResult struct {
	Type Op
	Err  Code // OpError's code
	Path string
	Stat Stat
}

// MultiResultType returns the Type of the result ZooKeeper gives for a
// successful op of type op in a multi, and false for an op that has no
// result in a write multi.
func MultiResultType(op Op) (Op, bool) {
	switch op {
	case OpCreate:
		return OpCreate, true
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return OpCreate2, true
	case OpDelete, OpDeleteContainer:
		return OpDelete, true
	case OpSetData, OpCheck:
		return op, true
	}
	return 0, false
}

// MultiResponse is the reply record of a multi: each result as a
// MultiHeader{Type, Done: false, Err: the error for OpError, else 0} and its
// record, ended by {-1, true, -1}.
type MultiResponse struct {
	Results []MultiResult
}

// Append appends a MultiResponse, skipping results whose type has no
// encoding (those MultiResultType never returns, but for OpError).
func (m *MultiResponse) Append(b []byte) []byte {
	for i := range m.Results {
		r := &m.Results[i]
		h := MultiHeader{Type: r.Type}
		switch r.Type {
		case OpCreate:
			b = AppendString(h.Append(b), r.Path)
		case OpCreate2:
			b = r.Stat.Append(AppendString(h.Append(b), r.Path))
		case OpSetData:
			b = r.Stat.Append(h.Append(b))
		case OpDelete, OpCheck:
			b = h.Append(b)
		case OpError:
			h.Err = r.Err
			b = AppendInt(h.Append(b), int32(r.Err))
		}
	}
	return multiEnd.Append(b)
}

// Decode reads a MultiResponse, reusing m.Results. A result type that has
// no encoding is an error wrapping ErrMultiOp. A header Err that differs
// from the error result's own (or is not 0 for another result), or an end
// other than {-1, true, -1}, makes the input non-canonical.
func (m *MultiResponse) Decode(d *Decoder) {
	m.Results = m.Results[:0]
	for {
		off := d.Offset()
		var h MultiHeader
		h.Decode(d)
		if d.err != nil {
			return
		}
		if h.Done {
			if h != multiEnd {
				d.noncan = true
			}
			return
		}
		r := MultiResult{Type: h.Type}
		switch h.Type {
		case OpCreate:
			r.Path = d.Str()
		case OpCreate2:
			r.Path = d.Str()
			r.Stat.Decode(d)
		case OpSetData:
			r.Stat.Decode(d)
		case OpDelete, OpCheck:
		case OpError:
			r.Err = Code(d.Int())
		default:
			d.fail(ErrMultiOp, off, int64(h.Type))
			return
		}
		if h.Err != r.Err {
			d.noncan = true
		}
		if d.err != nil {
			return
		}
		m.Results = append(m.Results, r)
	}
}
