// Package dlockpb is the Go code generated from proto/dlock.proto: the
// messages of the dlock wire protocol, version 2 (temoto/dlock) and
// version 3 (latch's compatible extension). It holds generated code only;
// edit the .proto and run "make proto". docs/protocol.md describes the
// protocol, and internal/frame the framing the messages travel in.
package dlockpb
