package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update", false, "rewrite contrib/man/latch.1 from the commands")

const manPath = "../../contrib/man/latch.1"

// TestManPage: contrib/man/latch.1 is what "latch man" prints, it has
// every section, every command and every flag, and groff renders it
// without a warning.
func TestManPage(t *testing.T) {
	var want bytes.Buffer
	if err := writeMan(&want); err != nil {
		t.Fatal(err)
	}
	if *updateMan {
		if err := os.WriteFile(manPath, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatalf("%v (generate it: make man)", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%s differs from latch man; regenerate it: make man", manPath)
	}
	page := string(got)
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"} {
		if !strings.Contains(page, "\n.SH "+s+"\n") {
			t.Errorf("the page lacks the section %s", s)
		}
	}
	for _, s := range []string{"/etc/latch/latch.toml", ".B LATCH_LOG_LEVEL", ".B LATCH_ADMIN_ADDR"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	for _, c := range commandDocs().Commands {
		if !strings.Contains(page, "\n.SS "+c.Name+"\n") {
			t.Errorf("the page lacks the command %s", c.Name)
		}
		for _, f := range c.Flags {
			if !strings.Contains(page, roffDashes(f.Dashed())) {
				t.Errorf("the page lacks %s of %s", f.Dashed(), c.Name)
			}
		}
	}

	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Fatalf("groff (Debian's groff-base, make deps): %v", err)
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", manPath)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("groff -man -Tutf8 -ww: %v\n%s", err, out)
	}
}

func roffDashes(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

// completeBash sources the bash completion script and completes line (the
// words typed, the last one being completed), returning COMPREPLY.
func completeBash(t *testing.T, script, line string) []string {
	t.Helper()
	words := strings.Split(line, " ")
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	prog := "source " + script + "\n" +
		"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
		"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
		"_latch\n" +
		`printf '%s\n' "${COMPREPLY[@]}"` + "\n"
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// TestCompletionBash: the bash script parses (bash -n) and completes
// commands, flags and operands.
func TestCompletionBash(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"completion", "bash"}, &environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("latch completion bash = %d, stderr %q", code, stderr.String())
	}
	script := filepath.Join(t.TempDir(), "latch.bash")
	if err := os.WriteFile(script, []byte(stdout.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	tests := []struct {
		line string
		want []string // exactly, in order
	}{
		{"latch se", []string{"serve"}},
		{"latch c", []string{"cluster", "config", "completion"}},
		{"latch serve --max-k", []string{"--max-keys"}},
		{"latch serve --log-level", []string{"--log-level"}},
		{"latch serve --log-level ", nil}, // the value: files, by -o default
		{"latch run -", []string{"-E", "--addr", "--kill-after", "--limit", "-n", "-s", "--session-ttl", "--tls", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name", "--token", "--ttl", "-v", "-w", "-x"}},
		{"latch snapshot ", []string{"save", "inspect", "restore"}},
		{"latch status --json --w", []string{"--watch"}},
		{"latch completion f", []string{"fish"}},
		{"latch config ", []string{"check"}},
		{"latch help ma", []string{"man"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got := completeBash(t, script, tt.line)
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("COMPREPLY = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCompletionScripts: every shell's script names every command and
// flag; zsh -n and fish -n check the syntax where the shell is installed.
func TestCompletionScripts(t *testing.T) {
	p := commandDocs()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run([]string{"completion", shell}, &environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}); code != 0 {
				t.Fatalf("latch completion %s = %d, stderr %q", shell, code, stderr.String())
			}
			script := stdout.String()
			for _, c := range p.Commands {
				if !strings.Contains(script, c.Name) {
					t.Errorf("the script lacks the command %s", c.Name)
				}
				for _, f := range c.Flags {
					if !strings.Contains(script, f.Name) {
						t.Errorf("the script lacks %s of %s", f.Dashed(), c.Name)
					}
				}
			}
			if shell == "bash" {
				return // TestCompletionBash runs it
			}
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("%s is not installed: syntax not checked", shell)
				return
			}
			file := filepath.Join(t.TempDir(), "latch."+shell)
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

// TestDocCommands: completion, man and config check on the command line.
func TestDocCommands(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.toml", "[log]\nlevel = \"debug\"\n")
	unknown := write("unknown.toml", "[lock]\nmax-keyz = 3\n")
	bad := write("bad.toml", "[log]\nlevel = \"loud\"\nformat = \"xml\"\n")
	for _, c := range []cliCase{
		{name: "completion without shell", args: []string{"completion"}, wantCode: 2, wantStderr: "Usage: latch completion"},
		{name: "completion unknown shell", args: []string{"completion", "tcsh"}, wantCode: 2, wantStderr: `shell "tcsh"`},
		{name: "completion zsh", args: []string{"completion", "zsh"}, wantStdout: "#compdef latch"},
		{name: "completion fish", args: []string{"completion", "fish"}, wantStdout: "complete -c latch"},
		{name: "man", args: []string{"man"}, wantStdout: ".TH LATCH 1"},
		{name: "man extra argument", args: []string{"man", "x"}, wantCode: 2, wantStderr: "unexpected arguments"},
		{name: "help man", args: []string{"help", "man"}, wantStderr: "Usage: latch man"},
		{name: "config without op", args: []string{"config"}, wantCode: 2, wantStderr: "Usage: latch config check FILE"},
		{name: "config check without file", args: []string{"config", "check"}, wantCode: 2, wantStderr: "Usage: latch config check FILE"},
		{name: "config check good", args: []string{"config", "check", good}, wantStdout: "ok\n"},
		{name: "config check ignores the environment", args: []string{"config", "check", good}, env: map[string]string{"LATCH_LOG_LEVEL": "loud"}, wantStdout: "ok\n"},
		{name: "config check unknown key", args: []string{"config", "check", unknown}, wantCode: 2, wantStderr: `unknown key "lock.max-keyz"`},
		{name: "config check bad value", args: []string{"config", "check", bad}, wantCode: 2, wantStderr: `invalid log-level "loud"`},
		{name: "config check every bad value", args: []string{"config", "check", bad}, wantCode: 2, wantStderr: `invalid log-format "xml"`},
		{name: "config check missing file", args: []string{"config", "check", filepath.Join(dir, "none.toml")}, wantCode: 2, wantStderr: "none.toml"},
	} {
		t.Run(c.name, c.check)
	}
}
