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
	return b.Bytes()
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
