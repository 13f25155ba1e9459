package clidoc

import (
	"flag"
	"regexp"
	"slices"
	"strings"
)

// A Program is what the completion scripts and the man page are made of.
type Program struct {
	Name        string // the executable, like "latch"
	Summary     string // one line, for NAME
	Description string // paragraphs separated by blank lines
	Commands    []Command
	Files       []File
	ExitStatus  []Item // each an exit code and what it means
	SeeAlso     []string
	// Environment lists variables that no flag's usage names; those that
	// one does ("(env LATCH_X)") are found by Env.
	Environment []Item
}

// A Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Help    string   // the command's usage message, as -h prints it
	Flags   []Flag   // nil for a command without flags
	Words   []string // operands to complete, like snapshot's "save"
}

// A Flag is one flag of a command's flag.FlagSet.
type Flag struct {
	Name    string
	Arg     string // the value's name, "" for a boolean flag
	Usage   string
	Default string // "" when the flag has no default worth showing
}

// A File is a path the program reads, and why.
type File struct{ Path, Text string }

// An Item is a term and its text (an exit code, a variable).
type Item struct{ Term, Text string }

// Dashed is the flag as a user types it: -x for a one-letter name,
// --name otherwise.
func (f Flag) Dashed() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// Flags returns fs's flags, in lexical order.
func Flags(fs *flag.FlagSet) []Flag {
	var flags []Flag
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		isBool := false
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			isBool = true
			arg = ""
		}
		def := f.DefValue
		if isBool || def == "0" || def == "0s" {
			def = ""
		}
		flags = append(flags, Flag{Name: f.Name, Arg: arg, Usage: usage, Default: def})
	})
	return flags
}

var envRef = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)\)`)

// Env returns the environment variables of p: those named in a flag's
// usage as "(env NAME)", each with the flags it gives a default, then
// p.Environment, sorted by name.
func (p *Program) Env() []Item {
	type use struct{ flag, cmds string }
	uses := make(map[string][]use)
	for _, c := range p.Commands {
		for _, f := range c.Flags {
			for _, m := range envRef.FindAllStringSubmatch(f.Usage, -1) {
				u := uses[m[1]]
				if i := slices.IndexFunc(u, func(x use) bool { return x.flag == f.Name }); i >= 0 {
					u[i].cmds += ", " + c.Name
				} else {
					u = append(u, use{f.Name, c.Name})
				}
				uses[m[1]] = u
			}
		}
	}
	items := slices.Clone(p.Environment)
	for name, u := range uses {
		var parts []string
		for _, x := range u {
			parts = append(parts, "--"+x.flag+" ("+x.cmds+")")
		}
		items = append(items, Item{Term: name, Text: "Sets " + strings.Join(parts, "; ") + " where the flag is not given."})
	}
	slices.SortFunc(items, func(a, b Item) int { return strings.Compare(a.Term, b.Term) })
	return items
}
