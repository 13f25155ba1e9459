package main

import (
	"errors"
	"flag"
)

// parseFlags parses args with fs, which reports its own errors. done is true
// when the command must stop and exit with code: 0 after -h, 2 on a bad
// flag.
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	return flagExit(err)
}

// flagExit turns an error from parsing flags into an exit code.
func flagExit(err error) (code int, done bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	default:
		return 2, true
	}
}
