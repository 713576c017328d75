#!/usr/bin/env python3
"""Counts test results over meson test logs: every TAP subtest ("ok" /
"not ok" lines) counts once; a test that printed no TAP counts once by its
result. Extra results may be given as NAME=ok|fail. Prints per-log lines
and a final "N passed, N failed"; exits 1 if anything failed."""
import json, re, sys

passed = failed = 0
for arg in sys.argv[1:]:
    if '=' in arg and not arg.endswith('.json'):
        name, res = arg.split('=', 1)
        ok = res == 'ok'
        passed += ok
        failed += not ok
        print(f"{name}: {'ok' if ok else 'FAILED'}")
        continue
    p = f = 0
    for line in open(arg):
        t = json.loads(line)
        out = t.get('stdout') or ''
        oks = len(re.findall(r'^ok\b', out, re.M))
        bad = len(re.findall(r'^not ok\b', out, re.M))
        if t['result'] == 'SKIP':
            print(f"  skipped: {t['name']}")
            continue
        good = t['result'] in ('OK', 'EXPECTEDFAIL')
        if oks + bad == 0:
            oks, bad = (1, 0) if good else (0, 1)
        elif not good and bad == 0:
            bad = 1  # crashed or timed out after its last TAP line
        p += oks
        f += bad
        if not good:
            print(f"  FAILED: {t['name']}")
    print(f"{arg}: {p} passed, {f} failed")
    passed += p
    failed += f
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
