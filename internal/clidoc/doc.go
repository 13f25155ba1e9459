// Package clidoc describes a command-line program (its commands, their
// flags and help text) and writes shell completion scripts (bash, zsh,
// fish) and a roff man page from that description, so that both follow
// the flags as they are defined.
package clidoc
