package main

import "fmt"

// runHelp implements "latch help [command]".
func runHelp(args []string, env *environment) int {
	switch len(args) {
	case 0:
		usage(env.stdout)
		return 0
	case 1:
		cmd := lookup(args[0])
		if cmd == nil || cmd.name == "help" {
			break
		}
		// Every command prints its usage for -h, like its flag errors, on
		// standard error.
		return cmd.run([]string{"-h"}, env)
	default:
		fmt.Fprintln(env.stderr, "usage: latch help [command]")
		return 2
	}
	fmt.Fprintf(env.stderr, "latch help: unknown command %q; run \"latch help\"\n", args[0])
	return 2
}
