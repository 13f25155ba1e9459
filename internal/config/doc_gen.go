package config

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reference returns docs/configuration.md: every setting's flag,
// environment variable, TOML key, default and meaning, from the settings
// table, and a TOML file with every key at its default. TestReference keeps
// the file in step with the table.
func Reference() []byte {
	def := DefaultConfig()
	var b bytes.Buffer
	b.WriteString(`# Configuration

<!-- Generated from the settings table of internal/config (Reference);
TestReference fails when this file and the table differ. To update it:
go test ./internal/config -run TestReference -update -->

` + "`latch serve`" + ` reads every setting from a flag, an environment variable, or
a TOML file named by ` + "`--config FILE`" + ` (or ` + "`" + envName(configFlag) + "`" + `). Flags win over the
environment, the environment over the file, and the file over the
defaults. An empty environment variable counts as unset. A key in the file
that latch does not know is an error, so a typo never goes unnoticed.
Durations are written like ` + "`250ms`, `10s` or `1m30s`" + `; in the TOML file they
are strings.

` + "`latch config check FILE`" + ` checks a file before a server reads it: it
loads FILE over the defaults as ` + "`latch serve --config FILE`" + ` would, and
validates the result. It checks the file alone: the ` + "`LATCH_*`" + ` environment
variables and flags, which ` + "`latch serve`" + ` applies over the file, are not
read. It prints ` + "`ok`" + ` and exits 0, or prints every error, each naming
its setting (an unknown key, a value of the wrong type, an invalid value),
and exits 2. The conventional place of the file is
` + "`/etc/latch/latch.toml`" + `.

| flag | environment | TOML key | default | meaning |
|---|---|---|---|---|
`)
	for i := range settings {
		st := &settings[i]
		d := st.format(&def)
		if d == "" {
			d = "none"
		} else {
			d = "`" + d + "`"
		}
		name, usage := flag.UnquoteUsage(&flag.Flag{Name: st.flag, Usage: st.usage, Value: &flagValue{st: st}})
		arg := ""
		if name != "" {
			arg = " " + strings.ToUpper(strings.ReplaceAll(name, ":", "_"))
		}
		fmt.Fprintf(&b, "| `--%s%s` | `%s` | `%s` | %s | %s |\n", st.flag, arg, envName(st.flag), st.toml, d,
			strings.ReplaceAll(usage, "|", `\|`))
	}
	b.WriteString("\nA file with every key at its default value:\n\n```toml\n")
	b.Write(DefaultTOML())
	b.WriteString("```\n")
	writeReloading(&b)
	return b.Bytes()
}

// writeReloading writes the section on what a reload applies and what
// needs a restart, from the settings' reload marks.
func writeReloading(b *bytes.Buffer) {
	var reload, restart []string
	for i := range settings {
		name := "`" + settings[i].flag + "`"
		if settings[i].reload {
			reload = append(reload, name)
		} else {
			restart = append(restart, name)
		}
	}
	b.WriteString(`
## Reloading, and what needs a restart

` + "`latch serve`" + ` reloads on SIGHUP and on ` + "`POST /v1/reload`" + ` (an admin action, with
the admin token when one is set). It reads its configuration again as at
start (flags, environment, the ` + "`--config`" + ` file: in practice the file is what
can change) and applies these settings, reading the files they name again
even when their names did not change:

` + strings.Join(reload, ", ") + `.

A certificate renewed in place is also picked up without a reload: a
handshake looks at the certificate files at most once a second and reads
them again when their time or size changed. A certificate, key, CA or
token file that does not load keeps the one in force (a half-written
certificate never takes TLS down). One log line says what a reload
changed, and what it kept and why. Open connections, their sessions and
their locks are untouched: a new allow-list and new Redis tokens apply to
the connections made after the reload (a connection authenticated before
keeps its rights), new dlock tokens and a new admin token to the requests
after it. A reload never lowers access control, so that a configuration
file read while half-written cannot open the server: turning TLS on or off
(` + "`tls-cert`" + `, the ` + "`peer-tls-*`" + ` settings), client certificates on or off
(` + "`tls-client-ca`" + `), or a tokens file or the admin token off waits for a
restart.

Every other setting needs a restart; a reload that finds one changed says
so in its log line and keeps the value in force until then:
` + strings.Join(restart, ", ") + `.
`)
}

// DefaultTOML returns a TOML file that sets every key to its default, in
// the order of the settings table, a table per section.
func DefaultTOML() []byte {
	def := DefaultConfig()
	var b bytes.Buffer
	section := ""
	for i := range settings {
		st := &settings[i]
		sec, key, _ := strings.Cut(st.toml, ".")
		if sec != section {
			if section != "" {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "[%s]\n", sec)
			section = sec
		}
		var v string
		switch p := st.field(&def).(type) {
		case *int:
			v = strconv.Itoa(*p)
		case *time.Duration:
			v = strconv.Quote(p.String())
		default:
			v = strconv.Quote(st.format(&def))
		}
		fmt.Fprintf(&b, "%s = %s\n", key, v)
	}
	return b.Bytes()
}
