#!/usr/bin/env python3
"""Surveys over a model folder with a manifest.json (as scripts/make_zoo.py writes it), each
model planned with the manifest's dim bindings; optional glob patterns after the mode keep only
the models whose names match (`zoo_survey.py BIN ZOO split 'resnet*' 'bert*'`).

  zoo_survey.py BIN ZOO arenas   per model: greedy-by-size without sharing, greedy-by-size with
                                 sharing, auto, and auto with --schedule memory; then the
                                 geometric mean of memory/plain and how many plans are proven
                                 optimal.
  zoo_survey.py BIN ZOO budget   per model: --budget at 50% and 75% of the lower bound, bytes
                                 migrated against the farthest-next-use baseline, or why no plan
                                 fits.
  zoo_survey.py BIN ZOO split    per model (transformers at sequence 128): plain greedy-by-size
                                 without sharing, --schedule memory, and --schedule memory
                                 --split auto (default 10% extra MACs): their arenas, the split
                                 ratio, the extra MACs, the plan time, and whether --budget at half
                                 of the unsplit lower bound fits; then the geometric means of the
                                 ratio over the CNNs (Conv, no MatMul) and the transformers
                                 (MatMul and Softmax), and of split/plain over all.
"""
import fnmatch
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

# Each run writes its plans into a folder of its own, so that surveys can run side by side.
OUT = tempfile.mkdtemp(prefix='zoo-survey-')


def plan(binary, zoo, entry, extra, dims=None):
    """Runs `plan` on one zoo model; returns (table, stderr), table None on failure. `dims`
    overrides the manifest's bindings."""
    args = [binary, 'plan', os.path.join(zoo, entry['file']),
            '-o', os.path.join(OUT, 'survey.onnx'), '--table', os.path.join(OUT, 'survey.json')] + extra
    for k, v in dict(entry.get('bindings', {}), **(dims or {})).items():
        args += ['--dim', f'{k}={v}']
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    with open(os.path.join(OUT, 'survey.json')) as f:
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


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float('nan')


def split(binary, zoo, entries):
    dims = {'sequence': 128}
    arena = lambda t: sum(a['bytes'] for a in t['arenas'])
    cnn, transformer, vs_plain, fits = [], [], [], 0
    print('| model | plain | --schedule memory | + --split auto | ratio | extra MACs | plan s | '
          'budget 50% |')
    print('|---|---|---|---|---|---|---|---|')
    for e in entries:
        ops = set(e.get('op_types', []))
        base, _ = plan(binary, zoo, e, ['--planner', 'greedy-by-size', '--no-inplace',
                                         '--no-alias'], dims)
        mem, err = plan(binary, zoo, e, ['--schedule', 'memory'], dims)
        if base is None or mem is None:
            print(f"| {e['file']} | not planned: {err.strip()[:120]} |")
            continue
        t0 = time.monotonic()
        cut, err = plan(binary, zoo, e, ['--schedule', 'memory', '--split', 'auto'], dims)
        seconds = time.monotonic() - t0
        if cut is None:
            print(f"| {e['file']} | split failed: {err.strip()[:120]} |")
            continue
        half = mem['stats']['lower_bound_bytes'] // 2
        fit, _ = plan(binary, zoo, e, ['--schedule', 'memory', '--budget', str(half)], dims)
        fits += fit is not None
        s = cut.get('splits') or {}
        extra = 100 * s.get('extra_macs', 0) / s['total_macs'] if s.get('total_macs') else 0.0
        ratio = arena(mem) / arena(cut)
        if 'Conv' in ops and 'MatMul' not in ops:
            cnn.append(ratio)
        if 'MatMul' in ops and 'Softmax' in ops:
            transformer.append(ratio)
        vs_plain.append(arena(cut) / arena(base))
        print(f"| {e['file']} | {arena(base)} | {arena(mem)} | {arena(cut)} | {ratio:.2f}x | "
              f"{extra:.2f}% | {seconds:.2f} | {'fits' if fit is not None else 'no'} |",
              flush=True)
    print(f"\ngeometric mean of memory/split: CNNs {geomean(cnn):.2f}x ({len(cnn)}), "
          f"transformers {geomean(transformer):.2f}x ({len(transformer)}); split/plain over all "
          f"{geomean(vs_plain):.3f} ({len(vs_plain)}); --budget at 50% of the lower bound fits "
          f"{fits} of {len(vs_plain)}")


def main():
    modes = {'arenas': arenas, 'budget': budget, 'split': split}
    if len(sys.argv) < 4 or sys.argv[3] not in modes:
        sys.exit(__doc__)
    binary, zoo, mode = sys.argv[1:4]
    patterns = sys.argv[4:]
    with open(os.path.join(zoo, 'manifest.json')) as f:
        entries = [e for e in json.load(f)['models']
                   if not patterns or any(fnmatch.fnmatch(e['name'], p) for p in patterns)]
    modes[mode](binary, zoo, entries)


if __name__ == '__main__':
    main()
