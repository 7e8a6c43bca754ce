#!/usr/bin/env bash
# test_cli_docs.sh — the command pages (docs/cli/, the man pages' source)
# against the tool: a page per command of `ropeattn --help` and no other;
# each page's OPTIONS items are exactly the options its command's --help
# names (in its usage lines and its option list); every option its EXAMPLES
# pass exists; each page has the man page sections and becomes a man page
# (scripts/manpage.sh) that groff reads without a warning.
SUITE=cli_docs
source "$(dirname "$0")/shell_common.sh"
[ -x "$RA" ] || { fail "$RA is not built"; summary; }
commands=$("$RA" --help | sed -n 's/^  \([a-z-]*\)  .*/\1/p')
# the options a help text names: its usage lines' and its option list's
help_options() {
    "$RA" "$1" --help | awk 'NR == 1, /^$/ { print; next } /^  --[a-z]/ { print $1 }' |
        grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
# the options a page documents: its "- `--option ...`" items under OPTIONS
page_options() {
    awk '/^## /{ s = $0 } s == "## OPTIONS" && /^- `--/' "$1" |
        grep -oE -- '^- `--[a-z][a-z0-9-]*' | cut -c4- | sort -u
}
# the options its EXAMPLES pass to `ropeattn CMD` (lines joined at a \)
example_options() {
    awk -v cmd="ropeattn $2 " '/^## /{ s = $0 } s == "## EXAMPLES" {
        line = line $0; if (sub(/\\$/, "", line)) next
        if (index(line, cmd)) print line; line = "" }' "$1" |
        grep -oE -- ' --[a-z][a-z0-9-]*' | cut -c2- | sort -u
}
pages=docs/cli/ropeattn.md
for cmd in $commands; do
    page=docs/cli/ropeattn-$cmd.md
    pages="$pages $page"
    [ -f "$page" ] || { fail "$cmd: no page $page"; continue; }
    if grep -qF "[\`$cmd\`](ropeattn-$cmd.md)" docs/cli/ropeattn.md; then pass
    else fail "docs/cli/ropeattn.md does not list $cmd"; fi
    d=$(diff <(help_options "$cmd") <(page_options "$page"))
    if [ -z "$d" ]; then pass
    else fail "$page: options differ from '$cmd --help' (<: only in --help, >: only in the page): $(echo $d)"; fi
    extra=$(comm -13 <(help_options "$cmd") <(example_options "$page" "$cmd"))
    if [ -z "$extra" ]; then pass; else fail "$page: EXAMPLES pass options $cmd has not: $(echo $extra)"; fi
done
for page in docs/cli/*.md; do
    case " $pages " in *" $page "*) ;; *) fail "$page: no such command in 'ropeattn --help'" ;; esac
done
for page in $pages; do
    [ -f "$page" ] || continue
    for s in SYNOPSIS DESCRIPTION OPTIONS EXAMPLES ENVIRONMENT "EXIT STATUS" "SEE ALSO"; do
        if grep -qx "## $s" "$page"; then pass; else fail "$page: no section $s"; fi
    done
    if ! bash scripts/manpage.sh "$page" 0 >"$TMP/page.1" 2>"$TMP/err"; then
        fail "scripts/manpage.sh $page: $(cat "$TMP/err")"
    elif command -v groff >/dev/null &&
        groff -k -man -Tutf8 -ww -z "$TMP/page.1" 2>&1 | grep . >"$TMP/err"; then
        fail "$page: groff: $(head -3 "$TMP/err")"
    else pass; fi
done
summary
