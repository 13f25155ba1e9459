package jute

import "encoding/binary"

// This file holds the records of the client protocol (zookeeper.jute's
// org.apache.zookeeper.data and .proto modules) that latch's front end
// reads or writes. Each has Decode, which reads it from a Decoder (errors
// stay in the Decoder), and Append, which appends its encoding, except
// where noted.

// StatSize is the encoded size of a Stat.
const StatSize = 68

// Stat is a znode's metadata as a client sees it. Its fields are those of
// internal/znode's Stat, in the same order, so that one converts to the other.
type Stat struct {
	Czxid, Mzxid, Ctime, Mtime  int64 // ctime and mtime: Unix milliseconds
	Version, Cversion, Aversion int32
	EphemeralOwner              int64
	DataLength, NumChildren     int32
	Pzxid                       int64
}

// Decode reads a Stat.
func (s *Stat) Decode(d *Decoder) {
	p := d.take(StatSize)
	if p == nil {
		*s = Stat{}
		return
	}
	i64 := func(i int) int64 { return int64(binary.BigEndian.Uint64(p[i:])) }
	i32 := func(i int) int32 { return int32(binary.BigEndian.Uint32(p[i:])) }
	*s = Stat{
		Czxid: i64(0), Mzxid: i64(8), Ctime: i64(16), Mtime: i64(24),
		Version: i32(32), Cversion: i32(36), Aversion: i32(40),
		EphemeralOwner: i64(44),
		DataLength:     i32(52), NumChildren: i32(56),
		Pzxid: i64(60),
	}
}

// Append appends a Stat's StatSize bytes.
func (s *Stat) Append(b []byte) []byte {
	b = AppendLong(b, s.Czxid)
	b = AppendLong(b, s.Mzxid)
	b = AppendLong(b, s.Ctime)
	b = AppendLong(b, s.Mtime)
	b = AppendInt(b, s.Version)
	b = AppendInt(b, s.Cversion)
	b = AppendInt(b, s.Aversion)
	b = AppendLong(b, s.EphemeralOwner)
	b = AppendInt(b, s.DataLength)
	b = AppendInt(b, s.NumChildren)
	return AppendLong(b, s.Pzxid)
}

// aclMinSize is the smallest encoding of an ACL: perms and two empty strings.
const aclMinSize = 12

// ACL is one entry of a znode's access list: jute's ACL{perms, Id{scheme,
// id}}, flattened (the encoding is the same), with the fields of
// internal/znode's ACL.
type ACL struct {
	Perms  int32 // Perm bits
	Scheme string
	ID     string
}

// Decode reads an ACL.
func (a *ACL) Decode(d *Decoder) {
	a.Perms = d.Int()
	a.Scheme = d.Str()
	a.ID = d.Str()
}

// Append appends an ACL.
func (a *ACL) Append(b []byte) []byte {
	b = AppendInt(b, a.Perms)
	b = AppendString(b, a.Scheme)
	return AppendString(b, a.ID)
}

// ConnectRequest is the first frame of a connection, with no header.
// ReadOnly is optional on the wire: older clients (go-zookeeper,
// node-zookeeper-client) end the record after Passwd. HasReadOnly says
// whether it was there, and whether Append writes it.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32 // milliseconds
	SessionID       int64 // 0: a new session
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Decode reads a ConnectRequest: ReadOnly is read if any byte follows
// Passwd, as ZooKeeper does; bytes after it are left unread.
func (r *ConnectRequest) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int()
	r.LastZxidSeen = d.Long()
	r.TimeOut = d.Int()
	r.SessionID = d.Long()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Len() > 0 {
		r.ReadOnly, r.HasReadOnly = d.Bool(), true
	}
}

// Append appends a ConnectRequest, with ReadOnly only if HasReadOnly.
func (r *ConnectRequest) Append(b []byte) []byte {
	b = AppendInt(b, r.ProtocolVersion)
	b = AppendLong(b, r.LastZxidSeen)
	b = AppendInt(b, r.TimeOut)
	b = AppendLong(b, r.SessionID)
	b = AppendBuffer(b, r.Passwd)
	if r.HasReadOnly {
		b = AppendBool(b, r.ReadOnly)
	}
	return b
}

// ConnectResponse answers a ConnectRequest, with no header. ZooKeeper sends
// ReadOnly only to a client whose request had it: set HasReadOnly from the
// request's.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // the negotiated timeout; 0 with SessionID 0: expired
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Decode reads a ConnectResponse, ReadOnly if any byte follows Passwd.
func (r *ConnectResponse) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int()
	r.TimeOut = d.Int()
	r.SessionID = d.Long()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Len() > 0 {
		r.ReadOnly, r.HasReadOnly = d.Bool(), true
	}
}

// Append appends a ConnectResponse, with ReadOnly only if HasReadOnly.
func (r *ConnectResponse) Append(b []byte) []byte {
	b = AppendInt(b, r.ProtocolVersion)
	b = AppendInt(b, r.TimeOut)
	b = AppendLong(b, r.SessionID)
	b = AppendBuffer(b, r.Passwd)
	if r.HasReadOnly {
		b = AppendBool(b, r.ReadOnly)
	}
	return b
}

// RequestHeader starts every request after the ConnectRequest.
type RequestHeader struct {
	Xid  int32 // the client's sequence number, or a special Xid
	Type Op
}

// RequestHeaderSize is the encoded size of a RequestHeader.
const RequestHeaderSize = 8

// Decode reads a RequestHeader.
func (h *RequestHeader) Decode(d *Decoder) {
	h.Xid = d.Int()
	h.Type = Op(d.Int())
}

// Append appends a RequestHeader.
func (h *RequestHeader) Append(b []byte) []byte {
	return AppendInt(AppendInt(b, h.Xid), int32(h.Type))
}

// ReplyHeader starts every reply after the ConnectResponse. The op's
// response record follows it only when Err is OK.
type ReplyHeader struct {
	Xid  int32 // the request's xid, or XidWatch for an event
	Zxid int64 // the server's last zxid (-1 in an event)
	Err  Code
}

// ReplyHeaderSize is the encoded size of a ReplyHeader.
const ReplyHeaderSize = 16

// Decode reads a ReplyHeader.
func (h *ReplyHeader) Decode(d *Decoder) {
	h.Xid = d.Int()
	h.Zxid = d.Long()
	h.Err = Code(d.Int())
}

// Append appends a ReplyHeader.
func (h *ReplyHeader) Append(b []byte) []byte {
	b = AppendInt(b, h.Xid)
	b = AppendLong(b, h.Zxid)
	return AppendInt(b, int32(h.Err))
}

// CreateRequest is the request of create, create2 and createContainer (and
// of those ops inside a multi). Flags is the create mode: 0 persistent, 1
// ephemeral, 2 persistent sequential, 3 ephemeral sequential, 4 container,
// 5 and 6 with a TTL.
type CreateRequest struct {
	Path  string
	Data  []byte // borrowed
	ACL   []ACL
	Flags int32
}

// Decode reads a CreateRequest, reusing r.ACL.
func (r *CreateRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Data = d.Buffer()
	r.ACL = d.ACLs(r.ACL)
	r.Flags = d.Int()
}

// Append appends a CreateRequest.
func (r *CreateRequest) Append(b []byte) []byte {
	b = AppendString(b, r.Path)
	b = AppendBuffer(b, r.Data)
	b = AppendACLs(b, r.ACL)
	return AppendInt(b, r.Flags)
}

// CreateTTLRequest is createTTL's request: a CreateRequest and the TTL in
// milliseconds. Decode only: latch answers createTTL as stock ZooKeeper
// does by default (Unimplemented).
type CreateTTLRequest struct {
	CreateRequest
	TTL int64
}

// Decode reads a CreateTTLRequest, reusing r.ACL.
func (r *CreateTTLRequest) Decode(d *Decoder) {
	r.CreateRequest.Decode(d)
	r.TTL = d.Long()
}

// CreateResponse answers create.
type CreateResponse struct {
	Path string // the path created, with its sequence suffix
}

// Decode reads a CreateResponse.
func (r *CreateResponse) Decode(d *Decoder) { r.Path = d.Str() }

// Append appends a CreateResponse.
func (r *CreateResponse) Append(b []byte) []byte { return AppendString(b, r.Path) }

// Create2Response answers create2 and createContainer.
type Create2Response struct {
	Path string
	Stat Stat
}

// Decode reads a Create2Response.
func (r *Create2Response) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Stat.Decode(d)
}

// Append appends a Create2Response.
func (r *Create2Response) Append(b []byte) []byte {
	return r.Stat.Append(AppendString(b, r.Path))
}

// DeleteRequest is delete's request (also deleteContainer's). Its reply is
// the header alone.
type DeleteRequest struct {
	Path    string
	Version int32 // -1: any
}

// Decode reads a DeleteRequest.
func (r *DeleteRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Version = d.Int()
}

// Append appends a DeleteRequest.
func (r *DeleteRequest) Append(b []byte) []byte {
	return AppendInt(AppendString(b, r.Path), r.Version)
}

// ExistsRequest is exists' request.
type ExistsRequest struct {
	Path  string
	Watch bool
}

// Decode reads an ExistsRequest.
func (r *ExistsRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Watch = d.Bool()
}

// Append appends an ExistsRequest.
func (r *ExistsRequest) Append(b []byte) []byte {
	return AppendBool(AppendString(b, r.Path), r.Watch)
}

// ExistsResponse answers exists when the znode exists (else NoNode).
type ExistsResponse struct{ Stat Stat }

// Decode reads an ExistsResponse.
func (r *ExistsResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// Append appends an ExistsResponse.
func (r *ExistsResponse) Append(b []byte) []byte { return r.Stat.Append(b) }

// GetDataRequest is getData's request.
type GetDataRequest struct {
	Path  string
	Watch bool
}

// Decode reads a GetDataRequest.
func (r *GetDataRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Watch = d.Bool()
}

// Append appends a GetDataRequest.
func (r *GetDataRequest) Append(b []byte) []byte {
	return AppendBool(AppendString(b, r.Path), r.Watch)
}

// GetDataResponse answers getData.
type GetDataResponse struct {
	Data []byte // nil encodes as null
	Stat Stat
}

// Decode reads a GetDataResponse.
func (r *GetDataResponse) Decode(d *Decoder) {
	r.Data = d.Buffer()
	r.Stat.Decode(d)
}

// Append appends a GetDataResponse.
func (r *GetDataResponse) Append(b []byte) []byte {
	return r.Stat.Append(AppendBuffer(b, r.Data))
}

// SetDataRequest is setData's request.
type SetDataRequest struct {
	Path    string
	Data    []byte // borrowed
	Version int32  // -1: any
}

// Decode reads a SetDataRequest.
func (r *SetDataRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Data = d.Buffer()
	r.Version = d.Int()
}

// Append appends a SetDataRequest.
func (r *SetDataRequest) Append(b []byte) []byte {
	b = AppendString(b, r.Path)
	b = AppendBuffer(b, r.Data)
	return AppendInt(b, r.Version)
}

// SetDataResponse answers setData.
type SetDataResponse struct{ Stat Stat }

// Decode reads a SetDataResponse.
func (r *SetDataResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// Append appends a SetDataResponse.
func (r *SetDataResponse) Append(b []byte) []byte { return r.Stat.Append(b) }

// GetACLRequest is getACL's request.
type GetACLRequest struct{ Path string }

// Decode reads a GetACLRequest.
func (r *GetACLRequest) Decode(d *Decoder) { r.Path = d.Str() }

// Append appends a GetACLRequest.
func (r *GetACLRequest) Append(b []byte) []byte { return AppendString(b, r.Path) }

// GetACLResponse answers getACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

// Decode reads a GetACLResponse, reusing r.ACL.
func (r *GetACLResponse) Decode(d *Decoder) {
	r.ACL = d.ACLs(r.ACL)
	r.Stat.Decode(d)
}

// Append appends a GetACLResponse.
func (r *GetACLResponse) Append(b []byte) []byte {
	return r.Stat.Append(AppendACLs(b, r.ACL))
}

// SetACLRequest is setACL's request.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32 // the expected aversion; -1: any
}

// Decode reads a SetACLRequest, reusing r.ACL.
func (r *SetACLRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.ACL = d.ACLs(r.ACL)
	r.Version = d.Int()
}

// Append appends a SetACLRequest.
func (r *SetACLRequest) Append(b []byte) []byte {
	b = AppendString(b, r.Path)
	b = AppendACLs(b, r.ACL)
	return AppendInt(b, r.Version)
}

// SetACLResponse answers setACL.
type SetACLResponse struct{ Stat Stat }

// Decode reads a SetACLResponse.
func (r *SetACLResponse) Decode(d *Decoder) { r.Stat.Decode(d) }

// Append appends a SetACLResponse.
func (r *SetACLResponse) Append(b []byte) []byte { return r.Stat.Append(b) }

// GetChildrenRequest is the request of getChildren and of getChildren2
// (jute's GetChildren2Request has the same fields).
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

// Decode reads a GetChildrenRequest.
func (r *GetChildrenRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Watch = d.Bool()
}

// Append appends a GetChildrenRequest.
func (r *GetChildrenRequest) Append(b []byte) []byte {
	return AppendBool(AppendString(b, r.Path), r.Watch)
}

// GetChildrenResponse answers getChildren.
type GetChildrenResponse struct {
	Children []string // names, not paths
}

// Decode reads a GetChildrenResponse, reusing r.Children.
func (r *GetChildrenResponse) Decode(d *Decoder) { r.Children = d.Strings(r.Children) }

// Append appends a GetChildrenResponse.
func (r *GetChildrenResponse) Append(b []byte) []byte { return AppendStrings(b, r.Children) }

// GetChildren2Response answers getChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

// Decode reads a GetChildren2Response, reusing r.Children.
func (r *GetChildren2Response) Decode(d *Decoder) {
	r.Children = d.Strings(r.Children)
	r.Stat.Decode(d)
}

// Append appends a GetChildren2Response.
func (r *GetChildren2Response) Append(b []byte) []byte {
	return r.Stat.Append(AppendStrings(b, r.Children))
}

// SyncRequest is sync's request.
type SyncRequest struct{ Path string }

// Decode reads a SyncRequest.
func (r *SyncRequest) Decode(d *Decoder) { r.Path = d.Str() }

// Append appends a SyncRequest.
func (r *SyncRequest) Append(b []byte) []byte { return AppendString(b, r.Path) }

// SyncResponse answers sync.
type SyncResponse struct{ Path string }

// Decode reads a SyncResponse.
func (r *SyncResponse) Decode(d *Decoder) { r.Path = d.Str() }

// Append appends a SyncResponse.
func (r *SyncResponse) Append(b []byte) []byte { return AppendString(b, r.Path) }

// CheckVersionRequest is check's request (an op inside a multi; the Java
// client never sends check alone).
type CheckVersionRequest struct {
	Path    string
	Version int32
}

// Decode reads a CheckVersionRequest.
func (r *CheckVersionRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Version = d.Int()
}

// Append appends a CheckVersionRequest.
func (r *CheckVersionRequest) Append(b []byte) []byte {
	return AppendInt(AppendString(b, r.Path), r.Version)
}

// SetWatches re-arms a reconnecting client's watches (op setWatches): the
// server fires at once those whose znode changed after RelativeZxid. Its
// reply is the header alone.
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

// Decode reads a SetWatches, reusing its slices.
func (r *SetWatches) Decode(d *Decoder) {
	r.RelativeZxid = d.Long()
	r.DataWatches = d.Strings(r.DataWatches)
	r.ExistWatches = d.Strings(r.ExistWatches)
	r.ChildWatches = d.Strings(r.ChildWatches)
}

// Append appends a SetWatches.
func (r *SetWatches) Append(b []byte) []byte {
	b = AppendLong(b, r.RelativeZxid)
	b = AppendStrings(b, r.DataWatches)
	b = AppendStrings(b, r.ExistWatches)
	return AppendStrings(b, r.ChildWatches)
}

// CheckWatchesRequest is checkWatches' request: does the connection hold a
// watch of this type on the path (else NoWatcher). Its reply is the header.
type CheckWatchesRequest struct {
	Path string
	Type WatcherType
}

// Decode reads a CheckWatchesRequest.
func (r *CheckWatchesRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Type = WatcherType(d.Int())
}

// Append appends a CheckWatchesRequest.
func (r *CheckWatchesRequest) Append(b []byte) []byte {
	return AppendInt(AppendString(b, r.Path), int32(r.Type))
}

// RemoveWatchesRequest is removeWatches' request: remove the connection's
// watches of this type on the path (else NoWatcher). Its reply is the header.
type RemoveWatchesRequest struct {
	Path string
	Type WatcherType
}

// Decode reads a RemoveWatchesRequest.
func (r *RemoveWatchesRequest) Decode(d *Decoder) {
	r.Path = d.Str()
	r.Type = WatcherType(d.Int())
}

// Append appends a RemoveWatchesRequest.
func (r *RemoveWatchesRequest) Append(b []byte) []byte {
	return AppendInt(AppendString(b, r.Path), int32(r.Type))
}

// WatcherEvent is the record of a watch's notification, which follows a
// ReplyHeader{Xid: XidWatch, Zxid: -1, Err: OK}.
type WatcherEvent struct {
	Type  EventType
	State State
	Path  string
}

// Decode reads a WatcherEvent.
func (r *WatcherEvent) Decode(d *Decoder) {
	r.Type = EventType(d.Int())
	r.State = State(d.Int())
	r.Path = d.Str()
}

// Append appends a WatcherEvent.
func (r *WatcherEvent) Append(b []byte) []byte {
	b = AppendInt(b, int32(r.Type))
	b = AppendInt(b, int32(r.State))
	return AppendString(b, r.Path)
}

// AuthPacket is auth's request (sent with XidAuth): add the credentials
// Auth of Scheme to the connection. Type is unused (0).
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte // borrowed
}

// Decode reads an AuthPacket.
func (r *AuthPacket) Decode(d *Decoder) {
	r.Type = d.Int()
	r.Scheme = d.Str()
	r.Auth = d.Buffer()
}

// Append appends an AuthPacket.
func (r *AuthPacket) Append(b []byte) []byte {
	b = AppendInt(b, r.Type)
	b = AppendString(b, r.Scheme)
	return AppendBuffer(b, r.Auth)
}

// ErrorResponse is the record of a failed op's result inside a multi
// response.
type ErrorResponse struct{ Err Code }

// Decode reads an ErrorResponse.
func (r *ErrorResponse) Decode(d *Decoder) { r.Err = Code(d.Int()) }

// Append appends an ErrorResponse.
func (r *ErrorResponse) Append(b []byte) []byte { return AppendInt(b, int32(r.Err)) }
