#!/usr/bin/env bash
# Writes ropeattn(1) in roff to stdout from the tool's own help texts:
# `ropeattn --help`, then each command's --help.
#   bash scripts/manpage.sh build/ropeattn > ropeattn.1
set -euo pipefail
tool=$1
version=$("$tool" --version | sed -n 's/^ropeattn \([^ ]*\).*/\1/p')
# A help text as literal roff: backslashes doubled, a leading . or ' escaped.
literal() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
echo ".TH ROPEATTN 1 \"\" \"ropeattn $version\" \"User Commands\""
echo ".SH NAME"
echo "ropeattn \\- rotary position embedding and the attention layers built on it"
echo ".SH DESCRIPTION"
echo ".nf"
"$tool" --help | literal
echo ".fi"
for cmd in $("$tool" --help | sed -n 's/^  \([a-z-]*\)  .*/\1/p'); do
    echo ".SH \"ropeattn $cmd\""
    echo ".nf"
    "$tool" "$cmd" --help | literal
    echo ".fi"
done
