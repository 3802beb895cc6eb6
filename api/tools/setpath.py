#!/usr/bin/env python3
"""Replace (or add) whole path entries of api/openapi.yaml with the YAML in a file.

usage: setpath.py FRAGMENT.yaml  (the fragment holds '  /v1/...:' entries at the
paths indentation, and optionally a 'schemas:' section whose entries are added to
components.schemas)."""
import re, sys
doc_path = __file__.rsplit('/', 2)[0] + '/openapi.yaml'
doc = open(doc_path).read()
frag = open(sys.argv[1]).read()
schemas = ''
if '\nschemas:\n' in '\n' + frag:
    frag, schemas = re.split(r'(?m)^schemas:\n', frag, maxsplit=1)
def entries(text):
    out, cur = {}, None
    for line in text.splitlines(keepends=True):
        m = re.match(r'^  (/\S+):\s*$', line)
        if m:
            cur = m.group(1); out[cur] = line; continue
        if cur: out[cur] += line
    return out
paths_start = doc.index('\npaths:\n') + len('\npaths:\n')
head, body = doc[:paths_start], doc[paths_start:]
existing = entries(body)
for p, text in entries(frag).items():
    existing[p] = text
body = ''.join(existing.values())
if schemas:
    marker = '  schemas:\n'
    i = head.index(marker) + len(marker)
    head = head[:i] + schemas + head[i:]
open(doc_path, 'w').write(head + body)
