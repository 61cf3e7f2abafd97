#!/usr/bin/env python3
"""weft-topo --json on every fixture (the real machines of fixtures/machines
included, their vendor files merged with detected/) and several node counts:
the object has the documented fields, rings are permutations, trees span
every rank with at most three children, one root, and the parent/child lists
agree; every GPU has a row of NET paths in NCCL's classes, a PXN one naming
its peer."""
import glob, json, os, subprocess, sys

tool, fixtures = sys.argv[1], sys.argv[2]
failures = 0
machines = [m for m in sorted(glob.glob(os.path.join(fixtures, "machines", "*.xml"))) if "_graph" not in m]
for f in sorted(glob.glob(os.path.join(fixtures, "*.xml"))) + machines:
    detected = os.path.join(os.path.dirname(f), "detected", os.path.basename(f))
    extra = ["--detected-file", detected] if os.path.exists(detected) else []
    for nodes in (1, 2, 5, 16):
        out = subprocess.run([tool, "--topo-file", f] + extra + ["--nodes", str(nodes), "--channels", "4", "--json"],
                             capture_output=True, text=True, check=True).stdout
        d = json.loads(out)
        n = d["nranks"]
        where = f"{os.path.basename(f)} x{nodes}"
        ok = d["nnodes"] == nodes and n == nodes * d["ranksPerNode"] and len(d["rings"]) == 4
        ok = ok and all(sorted(r) == list(range(n)) for r in d["rings"])
        classes = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}
        ok = ok and len(d["netPaths"]) == d["ranksPerNode"]
        ok = ok and all(p["type"] in classes and p["bw"] >= 0 and (p["via"] >= 0) == (p["type"] == "PXN")
                        for row in d["netPaths"] for p in row)
        for t in d["trees"]:
            ok = ok and len(t["up"]) == n and len(t["down"]) == n and t["up"].count(-1) == 1
            ok = ok and all(len(c) <= 3 for c in t["down"])
            ok = ok and all(t["up"][c] == r for r in range(n) for c in t["down"][r])
        if not ok:
            print(f"FAIL {where}: {out[:300]}")
            failures += 1
print("weft-topo json:", "FAIL" if failures else "OK")
sys.exit(1 if failures else 0)
