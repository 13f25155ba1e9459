package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/latchd/latch/internal/clidoc"
	"github.com/latchd/latch/internal/config"
)

// words are the operands of the commands that take a fixed set, for
// completion.
var words = map[string][]string{
	"cluster":    {"status", "add", "remove", "transfer"},
	"snapshot":   {"save", "inspect", "restore"},
	"datadir":    {"clear-halt"},
	"config":     {"check"},
	"completion": clidoc.Shells,
}

// commandDocs describes latch from its command table: each command's
// help text and flags are what it prints and defines when run with -h, so
// that the completion scripts and the man page follow the flags.
func commandDocs() *clidoc.Program {
	p := &clidoc.Program{
		Name:    "latch",
		Summary: "a lock server",
		Description: `latch is a lock server: clients take and release named locks, with
fencing tokens, sessions and leases, through its own protocol (dlock) or
the memcached, Redis or ZooKeeper protocols, on one node or a replicated
cluster. The same program runs the server (latch serve) and its tools.

Run "latch help COMMAND" for a command's usage and flags.`,
		Files: []clidoc.File{{
			Path: "/etc/latch/latch.toml",
			Text: "The conventional configuration file, read by latch serve when --config or LATCH_CONFIG names it; check it with latch config check.",
		}},
		ExitStatus: []clidoc.Item{
			{Term: "0", Text: "Success."},
			{Term: "1", Text: "Failure."},
			{Term: "2", Text: "A bad command line, or an invalid configuration."},
			{Term: "125, 126, 127", Text: "latch run: it failed or lost the lock; the command could not be run; it was not found. Otherwise latch run exits with the command's status."},
		},
		SeeAlso: []string{"flock(1)"},
	}
	for _, c := range commands {
		doc := clidoc.Command{Name: c.name, Summary: c.summary, Words: words[c.name]}
		if c.name == "help" {
			doc.Words = nil
			for _, o := range commands {
				doc.Words = append(doc.Words, o.name)
			}
			doc.Help = "Usage: latch help [command]\n\nShow latch's usage, or a command's usage and flags."
			p.Commands = append(p.Commands, doc)
			continue
		}
		var help strings.Builder
		var fs *flag.FlagSet
		c.run([]string{"-h"}, &environment{
			stdout:  &help,
			stderr:  &help,
			getenv:  func(string) string { return "" },
			flagSet: func(f *flag.FlagSet) { fs = f },
		})
		doc.Help = help.String()
		if fs != nil {
			doc.Flags = clidoc.Flags(fs)
		}
		p.Commands = append(p.Commands, doc)
	}
	return p
}

// runCompletion implements "latch completion SHELL".
func runCompletion(args []string, env *environment) int {
	fs := env.newFlagSet("completion")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch completion bash|zsh|fish

Print a script that completes latch's commands, their flags and operands
in the shell, made from latch's own flags. Load it with
source <(latch completion bash) in bash, source <(latch completion zsh)
in zsh, latch completion fish | source in fish, or install it where the
shell looks for completions.
`)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	if err := clidoc.Completion(env.stdout, commandDocs(), fs.Arg(0)); err != nil {
		fmt.Fprintf(env.stderr, "latch completion: %v\n", err)
		return 2
	}
	return 0
}

// runMan implements "latch man".
func runMan(args []string, env *environment) int {
	fs := env.newFlagSet("man")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch man

Print latch's man page, latch(1), in roff, made from the commands' help
texts and flags: man -l <(latch man) shows it. contrib/man/latch.1 is
this page ("make man" writes it).
`)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch man: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := writeMan(env.stdout); err != nil {
		fmt.Fprintf(env.stderr, "latch man: %v\n", err)
		return 1
	}
	return 0
}

func writeMan(w io.Writer) error { return clidoc.Man(w, commandDocs()) }

// runConfig implements "latch config check FILE".
func runConfig(args []string, env *environment) int {
	fs := env.newFlagSet("config")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch config check FILE

Check the TOML configuration file FILE as latch serve --config FILE would
read it: every key must be a setting and every value valid, over the
defaults. The file is checked alone: LATCH_* environment variables and
flags, which latch serve applies over it, are not read. Prints "ok", or
every error, each naming its setting, and exits 2.
`)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 2 || fs.Arg(0) != "check" {
		fs.Usage()
		return 2
	}
	errs := config.CheckFile(fs.Arg(1))
	if len(errs) == 0 {
		fmt.Fprintln(env.stdout, "ok")
		return 0
	}
	for _, err := range errs {
		fmt.Fprintf(env.stderr, "latch config check: %v\n", err)
	}
	return 2
}
