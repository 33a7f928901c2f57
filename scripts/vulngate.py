"""Reads govulncheck's JSON stream on stdin and fails on a vulnerability
that the code calls in a module; one in the standard library (or the
toolchain) is reported with the Go release that fixes it, and passes."""

import json
import sys

text = sys.stdin.read()
decoder = json.JSONDecoder()
called = {}  # (osv id, module) -> (fixed version, where the code calls it)
summaries = {}
i = 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    message, i = decoder.raw_decode(text, i)
    if "osv" in message:
        summaries[message["osv"]["id"]] = message["osv"].get("summary", "")
    finding = message.get("finding")
    if not finding or not finding.get("trace") or "function" not in finding["trace"][0]:
        continue  # not called: only imported or required
    frame = finding["trace"][-1]
    position = frame.get("position", {})
    where = "%s:%s" % (position.get("filename", frame.get("package", "?")), position.get("line", "?"))
    called.setdefault((finding["osv"], finding["trace"][0]["module"]), (finding.get("fixed_version", "none"), where))

failed = 0
for (osv, module), (fixed, where) in sorted(called.items()):
    stdlib = module in ("stdlib", "toolchain")
    failed += not stdlib
    print("%s %s in %s (fixed in %s; called from %s): %s" % (
        "warning:" if stdlib else "VULNERABLE:", osv, module, fixed, where, summaries.get(osv, "")))
if failed:
    print("govulncheck: %d called vulnerabilities in modules: upgrade them" % failed)
    sys.exit(1)
print("govulncheck: no called vulnerability in a module (%d in the standard library, fixed by a newer Go release)" % (len(called) - failed))
