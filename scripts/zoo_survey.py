#!/usr/bin/env python3
"""Surveys over a model folder with a manifest.json (as scripts/make_zoo.py writes it), each
model planned with the manifest's dim bindings.

  zoo_survey.py BIN ZOO arenas   per model: greedy-by-size without sharing, greedy-by-size with
                                 sharing, auto, and auto with --schedule memory; then the
                                 geometric mean of memory/plain and how many plans are proven
                                 optimal.
  zoo_survey.py BIN ZOO budget   per model: --budget at 50% and 75% of the lower bound, bytes
                                 migrated against the farthest-next-use baseline, or why no plan
                                 fits.
"""
import json
import math
import os
import re
import subprocess
import sys


def plan(binary, zoo, entry, extra):
    """Runs `plan` on one zoo model; returns (table, stderr), table None on failure."""
    args = [binary, 'plan', os.path.join(zoo, entry['file']),
            '-o', '/tmp/survey.onnx', '--table', '/tmp/survey.json'] + extra
    for k, v in entry.get('bindings', {}).items():
        args += ['--dim', f'{k}={v}']
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    with open('/tmp/survey.json') as f:
        return json.load(f), r.stderr


def arenas(binary, zoo, entries):
    rows = []
    for e in entries:
        base, _ = plan(binary, zoo, e, ['--planner', 'greedy-by-size', '--no-inplace', '--no-alias'])
        if base is None:
            continue
        shared, _ = plan(binary, zoo, e, ['--planner', 'greedy-by-size'])
        auto, _ = plan(binary, zoo, e, [])
        mem, _ = plan(binary, zoo, e, ['--schedule', 'memory'])
        arena = lambda t: t['arenas'][0]['bytes']
        plain = arena(base)
        rows.append((plain, arena(shared), arena(auto), auto['stats']['proven_optimal'],
                     arena(mem), mem['stats']['proven_optimal']))
        print(f"{e['file']:45s} plain {plain:>10} greedy+sh {arena(shared):>10} "
              f"auto {arena(auto):>10} LB {auto['stats']['lower_bound_bytes']:>10} "
              f"opt {auto['stats']['proven_optimal']!s:5} mem {arena(mem):>10} "
              f"opt {mem['stats']['proven_optimal']!s:5} ratio {arena(mem) / plain:.3f}",
              flush=True)
    g = math.exp(sum(math.log(r[4] / r[0]) for r in rows) / len(rows))
    print(f"models {len(rows)} geomean mem/plain {g:.3f}; "
          f"auto optimal {sum(1 for r in rows if r[3])}/{len(rows)}; "
          f"mem optimal {sum(1 for r in rows if r[5])}/{len(rows)}; "
          f"auto>greedy+sh {sum(1 for r in rows if r[2] > r[1])}")


def budget(binary, zoo, entries):
    for e in entries:
        table, _ = plan(binary, zoo, e, [])
        if table is None:
            continue
        lb = table['stats']['lower_bound_bytes']
        out = []
        for frac in (0.5, 0.75):
            t, err = plan(binary, zoo, e, ['--budget', str(int(lb * frac))])
            if t is not None:
                o = t.get('offload') or {}
                moved = sum(1 for x in o.get('transfers', []) if x.get('in_offset') is not None)
                out.append(f"{frac}: ok migrated {o.get('migrated_bytes')} baseline "
                           f"{o.get('baseline_migrated_bytes')} ({o.get('method')}, "
                           f"{len(o.get('transfers', []))} transfers)")
                continue
            floor = re.search(r'no budget below (\d+)', err)
            out.append(f"{frac}: no (min {int(floor.group(1)) / lb:.2f} LB)" if floor
                       else f"{frac}: err {err.strip()[:150]}")
        print(f"{e['file']:42s} LB {lb:>9} | " + " | ".join(out), flush=True)


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ('arenas', 'budget'):
        sys.exit(__doc__)
    binary, zoo, mode = sys.argv[1:]
    with open(os.path.join(zoo, 'manifest.json')) as f:
        entries = json.load(f)['models']
    (arenas if mode == 'arenas' else budget)(binary, zoo, entries)


if __name__ == '__main__':
    main()
