#!/usr/bin/env python3
"""weft-sim's command line: every output form says the times are simulated,
the JSON and CSV parse and carry one row per (size, algorithm), the double
binary tree beats the ring at small sizes on many nodes, and bad arguments
fail with a message naming them.
Usage: check_sim_cli.py <weft-sim> <fixtures-dir>"""
import csv
import io
import json
import subprocess
import sys

sim, fixtures = sys.argv[1], sys.argv[2]


def run(*args, ok=True):
    p = subprocess.run([sim, *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        sys.exit(f"weft-sim {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    if not ok and p.returncode == 0:
        sys.exit(f"weft-sim {' '.join(args)} should have failed")
    return p


text = run("--nodes", "4", "--gpus-per-node", "4", "--sizes", "8,1M").stdout
assert "SIMULATED" in text.splitlines()[0], text

doc = json.loads(run("--nodes", "64", "--gpus-per-node", "8", "--sizes", "8,64K", "--json").stdout)
assert doc["simulated"] is True and doc["nranks"] == 512, doc
rows = {(r["bytes"], r["algorithm"]): r for r in doc["results"]}
assert len(rows) == 2 * 7, rows.keys()
assert rows[(8, "Tree")]["simulatedUs"] * 10 < rows[(8, "Ring")]["simulatedUs"], rows
assert rows[(8, "OneShot")]["ran"] is False  # one node only
assert rows[(8, "Ring")]["weftSchedule"] and not rows[(8, "Butterfly")]["weftSchedule"]

table = list(csv.DictReader(io.StringIO(run("--ranks", "32", "--gpus-per-node", "4", "--algos", "torus",
                                            "--torus", "4x8", "--csv").stdout)))
assert table and "simulated_us" in table[0], table
assert all(float(r["simulated_us"]) > 0 for r in table), table

topo = json.loads(run("--topo-file", f"{fixtures}/nvswitch8.xml", "--nodes", "2", "--sizes", "1M", "--json",
                      "--algos", "ring").stdout)
assert topo["ranksPerNode"] == 8 and topo["links"]["nics"] == 8, topo

for bad, word in ((["--algos", "spiral"], "spiral"), (["--sizes", "12Q"], "12Q"), (["--torus", "4by4"], "4by4"),
                  (["--ranks", "10", "--gpus-per-node", "4"], "--ranks 10"), (["--mode", "fast"], "fast"),
                  (["--nodes", "1.5"], "whole number")):
    err = run(*bad, ok=False).stderr
    assert word in err, (bad, err)
print("weft-sim CLI OK")
