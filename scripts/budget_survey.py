#!/usr/bin/env python3
"""Device-budget survey (seed S4) over a model folder with a manifest.json: per model, plans
with --budget at 50% and 75% of the lower bound and prints the bytes migrated against the
farthest-next-use baseline, or why no plan fits. Usage: budget_survey.py BIN ZOO_DIR"""
import json, subprocess, sys, os, re
B = sys.argv[1]; zoo = sys.argv[2]
m = json.load(open(os.path.join(zoo, 'manifest.json')))
for e in m['models']:
    f = e['file']; b = e.get('bindings', {})
    dims = sum([['--dim', f'{k}={v}'] for k, v in b.items()], [])
    base = [B, 'plan', os.path.join(zoo, f), '-o', '/tmp/bs.onnx', '--table', '/tmp/bs.json'] + dims
    r = subprocess.run(base, capture_output=True, text=True)
    if r.returncode: continue
    lb = json.load(open('/tmp/bs.json'))['stats']['lower_bound_bytes']
    out = []
    for frac in (0.5, 0.75):
        r = subprocess.run(base + ['--budget', str(int(lb*frac))], capture_output=True, text=True)
        if r.returncode == 0:
            t = json.load(open('/tmp/bs.json')); o = t.get('offload') or {}
            out.append(f"{frac}: ok {str({k:v for k,v in o.items() if not isinstance(v,(list,dict))})[:200]}")
        else:
            mm = re.search(r'no budget below (\d+)', r.stderr)
            out.append(f"{frac}: no (min {int(mm.group(1))/lb:.2f} LB)" if mm else f"{frac}: err {r.stderr.strip()[:150]}")
    print(f"{f:42s} LB {lb:>9} | " + " | ".join(out), flush=True)
