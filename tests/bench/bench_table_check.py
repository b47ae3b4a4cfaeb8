#!/usr/bin/env python3
"""bench/bench_table.py runs `posenc bench` and prints one table row per case it ran, with every
column, and the load and command in its header; with --runs 2 the medians of two runs and the
range of ratio_to_stream; a bad option is refused naming it. No speed is
asserted (a timed test on a shared machine would be flaky).

Usage: bench_table_check.py BENCH_TABLE_PY POSENC_BINARY"""
import subprocess
import sys

script, posenc = sys.argv[1], sys.argv[2]
run = subprocess.run([sys.executable, script, "--posenc", posenc, "--repetitions", "1",
                      "--threads", "1", "--filter",
                      "decode1-llama3-8b/f16/cache:f16|llama2-7b-decode/f32"],
                     capture_output=True, text=True, timeout=300)
assert run.returncode == 0, run.stderr
out = run.stdout
assert "load average" in out and "posenc bench --json" in out.replace(posenc, "posenc"), out
rows = [line for line in out.splitlines() if line.startswith("| ") and "/threads:" in line]
names = [row.split("|")[1].strip() for row in rows]
assert names == ["llama2-7b-decode/f32/table/threads:1", "llama2-7b-decode/f32/on-the-fly/threads:1",
                 "fused-decode1-llama3-8b/f16/cache:f16/table/threads:1"], names
for row in rows:
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert len(cells) == 9, row
    assert float(cells[2]) > 0 and float(cells[3]) > 0 and float(cells[4]) > 0, row
    fused = row.startswith("| fused-")
    # The fused call has no scalar loop; the plain cases have no rotate-then-copy baseline.
    assert (cells[5] == "-") == fused and (cells[6] == "-") == (not fused), row
    assert (cells[7] == "-") == (not fused), row  # ratio_to_append_stream: fused cases only
# --runs 2: two processes, each number their median, and the range of ratio_to_stream beside it.
two = subprocess.run([sys.executable, script, "--posenc", posenc, "--repetitions", "1", "--runs",
                      "2", "--threads", "1", "--filter", "llama2-7b-decode/f32/table"],
                     capture_output=True, text=True, timeout=300)
assert two.returncode == 0, two.stderr
assert "of 2 runs" in two.stdout and "--runs 2" in two.stdout, two.stdout
rows2 = [line for line in two.stdout.splitlines() if line.startswith("| llama2-7b-decode/")]
assert len(rows2) == 1, two.stdout
cells = [c.strip() for c in rows2[0].split("|")[1:-1]]
assert len(cells) == 10, rows2[0]
lo, hi = (float(x) for x in cells[4].split("-"))
assert 0 < lo <= float(cells[3]) <= hi, rows2[0]
for option, value in (("--repetitions", "0"), ("--runs", "0")):
    bad = subprocess.run([sys.executable, script, "--posenc", posenc, option, value],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and f"{option} (0)" in bad.stderr, bad.stderr
print("bench_table ok:", len(rows), "rows")
