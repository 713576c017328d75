#!/bin/sh
# lang/man/tilec.1 names every option that `tilec --help`,
# `tilec run --help` and `tilec tune --help` list, and is well-formed roff
# (groff, where present, reports no warnings).
#   check_man.sh TILEC SOURCE_DIR
set -eu
tilec=$1 man=$2/lang/man/tilec.1
# the page's text with roff's escapes taken out: \- is -, \fB... fonts
text=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g' "$man")
help=$("$tilec" --help; "$tilec" run --help; "$tilec" tune --help)
# each option line's first option, and the long form after "-k, "
opts=$( { echo "$help" | sed -n 's/^  *\(-[-A-Za-z0-9][-A-Za-z0-9]*=*\).*/\1/p'
          echo "$help" | sed -n 's/^  *-[a-z], \(--[-a-z]*\).*/\1/p'; } | sort -u)
[ -n "$opts" ] || { echo "check_man: no options read from tilec --help"; exit 1; }
missing=0
for o in $opts; do
  case "$text" in
    *"$o"*) ;;
    *) echo "check_man: $o (tilec --help) is not in lang/man/tilec.1"; missing=1 ;;
  esac
done
[ $missing -eq 0 ] || exit 1
if command -v groff >/dev/null 2>&1; then
  warnings=$(LC_ALL=C groff -man -ww -z "$man" 2>&1)
  [ -z "$warnings" ] || { echo "check_man: groff: $warnings"; exit 1; }
fi
echo "check_man: $(echo "$opts" | wc -l) options, all in the page"
