//go:build !unix

package main

import "time"

// selfCPU returns 0 where getrusage is missing: the report leaves the
// load generator's CPU out.
func selfCPU() time.Duration { return 0 }
