// Command latch is the latch lock server and its tools.
//
// Usage:
//
//	latch <command> [flags]
//
// The commands are:
//
//	serve      run a lock server
//	run        run a command while holding a lock
//	status     show the holders, waiters and sessions of a server
//	cluster    show a cluster's members, change them, move its leader
//	snapshot   save, inspect or restore a backup of the state
//	datadir    let a node halted by a disk error start again
//	recover    make a node of a cluster that lost its quorum a cluster of one
//	bench      load a lock or memcached server and measure it
//	config     check a configuration file
//	completion print a shell completion script
//	man        print latch's man page
//	version    print latch's version
//	help       show help for latch or one of its commands
//
// Run "latch help <command>" for a command's flags.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// A command is one subcommand of latch. It parses its own flags, with its
// own flag.FlagSet, and returns the process exit code.
type command struct {
	name    string
	summary string
	run     func(args []string, env *environment) int
}

// environment is what a command may use of the process, so that tests can
// run commands in process.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// flagSet, when set, is given every flag set a command makes (by
	// newFlagSet); commandDocs runs each command with -h to learn its
	// flags.
	flagSet func(*flag.FlagSet)
}

// newFlagSet returns a command's flag set, reporting to env.stderr.
func (env *environment) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if env.flagSet != nil {
		env.flagSet(fs)
	}
	return fs
}

// commands lists the subcommands in usage order. It is filled in init
// because help refers to it.
var commands []command

func init() {
	commands = []command{
		{"serve", "run a lock server", runServe},
		{"run", "run a command while holding a lock", runRun},
		{"status", "show the holders, waiters and sessions of a server", runStatus},
		{"cluster", "show a cluster's members, change them, move its leader", runCluster},
		{"snapshot", "save, inspect or restore a backup of the state", runSnapshot},
		{"datadir", "let a node halted by a disk error start again", runDatadir},
		{"recover", "make a node of a cluster that lost its quorum a cluster of one", runRecover},
		{"bench", "load a lock or memcached server and measure it", runBench},
		{"config", "check a configuration file", runConfig},
		{"completion", "print a shell completion script", runCompletion},
		{"man", "print latch's man page", runMan},
		{"version", "print latch's version", runVersion},
		{"help", "show help for latch or one of its commands", runHelp},
	}
}

func main() {
	os.Exit(run(os.Args[1:], &environment{
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	}))
}

// run dispatches args to a subcommand and returns the exit code: 0 on
// success, 1 on failure, 2 on bad usage.
func run(args []string, env *environment) int {
	if len(args) == 0 {
		usage(env.stderr)
		return 2
	}
	switch name := args[0]; name {
	case "-h", "-help", "--help":
		usage(env.stdout)
		return 0
	default:
		if cmd := lookup(name); cmd != nil {
			return cmd.run(args[1:], env)
		}
		fmt.Fprintf(env.stderr, "latch: unknown command %q\n\n", name)
		usage(env.stderr)
		return 2
	}
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprint(w, "latch is a lock server.\n\nUsage:\n\n\tlatch <command> [flags]\n\nThe commands are:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun \"latch help <command>\" for a command's flags.\n")
}
