#!/usr/bin/env python3
"""Arena survey over a model folder with a manifest.json (as scripts/make_zoo.py writes it):
per model, greedy-by-size without sharing, greedy-by-size with sharing, auto, and auto with
--schedule memory; prints the geometric mean of memory/plain and how many plans are proven
optimal. Usage: zoo_survey.py BIN ZOO_DIR"""
import json, subprocess, sys, math, os, re
B = sys.argv[1]; zoo = sys.argv[2]
m = json.load(open(os.path.join(zoo, 'manifest.json')))
rows = []
def run(f, binds, extra):
    args = [B, 'plan', os.path.join(zoo, f), '-o', '/tmp/survey.onnx', '--table', '/tmp/survey.json'] + extra
    for k, v in binds.items(): args += ['--dim', f'{k}={v}']
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode: return None
    t = json.load(open('/tmp/survey.json'))
    return t['arenas'][0]['bytes'], t['stats']['lower_bound_bytes'], t['stats'].get('proven_optimal'), t['stats'].get('stored_lower_bound_bytes')
for e in m['models']:
    f = e['file']; b = e.get('bindings', {})
    base = run(f, b, ['--planner', 'greedy-by-size', '--no-inplace', '--no-alias'])
    if base is None: continue
    gin = run(f, b, ['--planner', 'greedy-by-size'])
    auto = run(f, b, [])
    mem = run(f, b, ['--schedule', 'memory'])
    rows.append((f, base[0], gin[0], auto[0], auto[1], auto[2], mem[0], mem[2]))
    print(f"{f:45s} plain {base[0]:>10} greedy+sh {gin[0]:>10} auto {auto[0]:>10} LB {auto[1]:>10} opt {auto[2]!s:5} mem {mem[0]:>10} opt {mem[2]!s:5} ratio {mem[0]/base[0]:.3f}", flush=True)
g = math.exp(sum(math.log(r[6]/r[1]) for r in rows)/len(rows))
print(f"models {len(rows)} geomean mem/plain {g:.3f}; auto optimal {sum(1 for r in rows if r[5])}/{len(rows)}; mem optimal {sum(1 for r in rows if r[7])}/{len(rows)}; auto>greedy+sh {sum(1 for r in rows if r[3]>r[2])}")
