#!/usr/bin/env bash
# Writes a man page in roff to stdout from its page in docs/cli/, so that
# the page and the man page are one text:
#   bash scripts/manpage.sh docs/cli/ropeattn-rope.md 0.3.0 > ropeattn-rope.1
# The pages keep to what this reads: "# name(1) — summary", "## SECTION"
# headings, paragraphs, ``` blocks (shown as they are), "- `--option ARG`:
# text" items (a tagged paragraph each; other "- " items are bullets), and
# `code`, **bold** and [text](link) inline (the link's text is kept).
set -euo pipefail
page=$1 version=$2
awk -v version="$version" '
# roff escapes: backslash, then a leading . or '\'' (a request otherwise)
function esc(s) { gsub(/\\/, "\\e", s); sub(/^[.'\'']/, "\\\\\\&&", s); return s }
function minus(s) { gsub(/-/, "\\-", s); return s }
function inline(s,   out, m) {
    s = esc(s)
    gsub(/\[[^]]*\]\([^)]*\)/, "&\001", s)            # [text](link) -> text
    while (match(s, /\[[^]]*\]\([^)]*\)\001/)) {
        m = substr(s, RSTART, RLENGTH); sub(/\]\(.*/, "", m); sub(/^\[/, "", m)
        s = substr(s, 1, RSTART - 1) m substr(s, RSTART + RLENGTH)
    }
    out = ""
    while (match(s, /`[^`]*`|\*\*[^*]*\*\*/)) {
        m = substr(s, RSTART, RLENGTH)
        m = substr(m, 1, 1) == "`" ? substr(m, 2, length(m) - 2) : substr(m, 3, length(m) - 4)
        out = out substr(s, 1, RSTART - 1) "\\fB" minus(m) "\\fR"
        s = substr(s, RSTART + RLENGTH)
    }
    return out s
}
NR == 1 {
    name = $2; sub(/\(1\)$/, "", name); summary = $0; sub(/^[^—]*— /, "", summary)
    printf ".TH %s 1 \"\" \"ropeattn %s\" \"User Commands\"\n", toupper(name), version
    printf ".SH NAME\n%s \\- %s\n", minus(name), esc(summary)
    next
}
/^```/ { fence = !fence; print (fence ? ".PP\n.nf\n.RS 4" : ".RE\n.fi"); next }
fence { print esc($0); next }
/^## / { sub(/^## /, ""); printf ".SH \"%s\"\n", $0; para = 0; next }
/^$/ { para = 0; next }
/^- `/ {                                      # an option: "- `--opt ARG`: text"
    tag = $0; sub(/^- `/, "", tag); text = tag
    sub(/`.*/, "", tag); sub(/^[^`]*`:? ?/, "", text)
    n = split(tag, w, " "); t = "\\fB" minus(w[1]) "\\fR"
    for (i = 2; i <= n; i++) t = t " \\fI" minus(w[i]) "\\fR"
    printf ".TP\n%s\n%s\n", t, inline(text); para = 1; next
}
/^- / { sub(/^- /, ""); printf ".IP \\(bu 2\n%s\n", inline($0); para = 1; next }
{ sub(/^ +/, ""); if (!para) print ".PP"; print inline($0); para = 1 }
' "$page"
