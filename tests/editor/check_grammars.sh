#!/bin/sh
# Checks lang/editor's grammars against the compiler: the TextMate JSON
# parses (when python3 is there), and every keyword of the lexer
# (compiler/front/lexer.re) and every builtin function (compiler/sema/sema.h)
# appears as a word in both the Vim syntax and the TextMate grammar.
#   check_grammars.sh SOURCE_DIR
set -eu
src=$1
vim="$src/lang/editor/vim/syntax/tile.vim" tm="$src/lang/editor/tile.tmLanguage.json"
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tm" || { echo "check_grammars: $tm is not valid JSON"; exit 1; }
fi
keywords=$(sed -n 's/^ *"\([a-zA-Z_]*\)" *{ k = TOK_KW_.*/\1/p' "$src/compiler/front/lexer.re")
builtins=$(sed -n 's/^ *X([A-Z0-9_]*, "\([a-z_0-9]*\)".*/\1/p' "$src/compiler/sema/sema.h")
[ -n "$keywords" ] && [ -n "$builtins" ] || { echo "check_grammars: found no keywords or builtins to check"; exit 1; }
missing=0
for w in $keywords $builtins; do
  for f in "$vim" "$tm"; do
    if ! grep -Eq "(^|[^A-Za-z0-9_])$w([^A-Za-z0-9_]|$)" "$f"; then
      echo "check_grammars: '$w' is missing from $f"
      missing=1
    fi
  done
done
[ $missing -eq 0 ] || exit 1
echo "check_grammars: $(echo $keywords | wc -w) keywords and $(echo $builtins | wc -w) builtins in both grammars"
