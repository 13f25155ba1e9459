# lib-docs.sh: what the bench scripts share to write their results into
# docs/benchmarks.md. Sourced, not run.
#
# The page has one section per script, between two marker lines:
#
#   <!-- begin bench-peers -->
#   ...
#   <!-- end bench-peers -->
#
# With UPDATE_DOCS=1 a script replaces what lies between its markers with
# the Markdown it printed (docs_update), headed by the machine, the date
# and the commit (docs_header). Only a full run may write the page: a
# script calls docs_guard before it runs anything, with what makes this
# run partial (knobs that leave cases out, or measure another build), and
# UPDATE_DOCS=1 then stops at once. UPDATE_DOCS=force writes a partial run
# anyway, and says so in its header. DOCS_FILE names another file to
# write (default docs/benchmarks.md, from the repository's root).

DOCS_FILE=${DOCS_FILE:-docs/benchmarks.md}
DOCS_PARTIAL=

# docs_machine: the CPU model (from /proc/cpuinfo) and the number of
# cores.
docs_machine() {
	local model n
	model=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)
	n=$(grep -c '^processor' /proc/cpuinfo)
	echo "${model:-unknown CPU}, $n cores"
}

# docs_commit: the short commit of HEAD, with "+dirty" when tracked files
# differ from it.
docs_commit() {
	local rev
	rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
	[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || rev="$rev+dirty"
	echo "$rev"
}

# docs_date: now, in UTC.
docs_date() { date -u '+%Y-%m-%d %H:%M UTC'; }

# docs_header DATE COMMIT: the lines that head a section: the machine,
# the date and the commit, the system and Go, and a warning when the run
# was partial.
docs_header() {
	echo "Machine: $(docs_machine); $(uname -sr); $(go version | cut -d' ' -f3)."
	echo "Run: $1, commit $2."
	if [ -n "$DOCS_PARTIAL" ]; then
		echo
		echo "**A partial run** ($DOCS_PARTIAL): not the script's full set of cases."
		echo
	fi
}

# docs_guard SECTION [PARTIAL...]: with UPDATE_DOCS set, check that this
# run may write SECTION of $DOCS_FILE, before the run starts. The PARTIALs
# say what makes the run partial (none when nothing does).
docs_guard() {
	local sec=$1 what= p
	shift
	for p in "$@"; do what+="${what:+, }$p"; done
	case ${UPDATE_DOCS:-} in
	"" | 0) return 0 ;;
	1)
		if [ -n "$what" ]; then
			echo "$(basename "$0"): UPDATE_DOCS=1 writes $DOCS_FILE from a full run only, and this one is partial ($what); unset that, or set UPDATE_DOCS=force to write it anyway" >&2
			exit 2
		fi
		;;
	force) DOCS_PARTIAL=$what ;;
	*)
		echo "$(basename "$0"): UPDATE_DOCS=$UPDATE_DOCS: want 1 or force" >&2
		exit 2
		;;
	esac
	docs_markers "$DOCS_FILE" "$sec" || exit 2
}

# docs_markers FILE SECTION: check that FILE has SECTION's begin marker
# once and its end marker once, after it.
docs_markers() {
	local file=$1 begin="<!-- begin $2 -->" end="<!-- end $2 -->" b e
	if [ ! -f "$file" ]; then
		echo "docs: $file: no such file" >&2
		return 1
	fi
	b=$(grep -cxF -- "$begin" "$file" || true)
	e=$(grep -cxF -- "$end" "$file" || true)
	if [ "$b" != 1 ] || [ "$e" != 1 ]; then
		echo "docs: $file needs the line '$begin' once and the line '$end' once (found $b and $e)" >&2
		return 1
	fi
	if [ "$(grep -nxF -- "$begin" "$file" | cut -d: -f1)" -gt "$(grep -nxF -- "$end" "$file" | cut -d: -f1)" ]; then
		echo "docs: $file: '$end' comes before '$begin'" >&2
		return 1
	fi
}

# docs_replace FILE SECTION CONTENT: replace the lines between SECTION's
# markers in FILE with the lines of the file CONTENT (without its leading
# and trailing blank lines), one blank line on either side. FILE is left
# as it was when anything is wrong.
docs_replace() {
	local file=$1 sec=$2 content=$3 tmp
	docs_markers "$file" "$sec" || return 1
	if grep -qxF -e "<!-- begin $sec -->" -e "<!-- end $sec -->" -- "$content"; then
		echo "docs: $content holds a marker of $sec" >&2
		return 1
	fi
	tmp=$(mktemp)
	if ! awk -v b="<!-- begin $sec -->" -v e="<!-- end $sec -->" -v c="$content" '
		$0 == b {
			print
			n = 0
			while ((getline line < c) > 0) lines[++n] = line
			close(c)
			first = 1
			while (first <= n && lines[first] ~ /^[[:space:]]*$/) first++
			last = n
			while (last >= first && lines[last] ~ /^[[:space:]]*$/) last--
			print ""
			for (i = first; i <= last; i++) print lines[i]
			if (last >= first) print ""
			skip = 1
			next
		}
		$0 == e { skip = 0 }
		!skip
	' "$file" >"$tmp"; then
		rm -f "$tmp"
		echo "docs: could not rewrite $file" >&2
		return 1
	fi
	# Written over, not moved: the file keeps its mode.
	cat "$tmp" >"$file"
	rm -f "$tmp"
}

# docs_update SECTION CONTENT: with UPDATE_DOCS set, replace SECTION of
# $DOCS_FILE with CONTENT.
docs_update() {
	case ${UPDATE_DOCS:-} in
	"" | 0) return 0 ;;
	esac
	docs_replace "$DOCS_FILE" "$1" "$2" || return 1
	echo "$(basename "$0"): wrote the $1 section of $DOCS_FILE" >&2
}
