"""The README's C++ example is examples/quickstart.cc.

Every line of the README block marked `<!-- example: examples/quickstart.cc -->` must be a line
of the program, in order, and the program's output must equal the block marked
`<!-- output: ... -->`, so neither can drift from what the build compiles and runs.

usage: readme_example_test.py README SOURCE WORK_DIR PROGRAM [ARGS...]
"""
import subprocess
import sys


def block_after(text, marker, start_at=0):
    at = text.index(marker, start_at)
    start = text.index("```", at)
    start = text.index("\n", start) + 1
    return text[start:text.index("```", start)]


def source_name(source, work_dir):
    """The example's path as the README names it: relative to the repository root."""
    import os
    return os.path.relpath(source, work_dir)


def main():
    readme, source, work_dir = sys.argv[1:4]
    program = sys.argv[4:]
    text = open(readme, encoding="utf-8").read()
    marker = f"<!-- example: {source_name(source, work_dir)} -->"
    code = [l for l in block_after(text, marker).splitlines() if l.strip()]
    lines = open(source, encoding="utf-8").read().splitlines()
    at = 0
    for line in code:
        while at < len(lines) and lines[at] != line:
            at += 1
        if at == len(lines):
            sys.exit(f"README example line not in {source} (in order): {line!r}")
        at += 1
    expected = block_after(text, "<!-- output:", text.index(marker))
    run = subprocess.run(program, cwd=work_dir, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{program} failed ({run.returncode}): {run.stderr}")
    if run.stdout != expected:
        sys.exit(f"README output block differs from the program's output:\n--- README\n{expected}--- program\n{run.stdout}")
    print(f"README example: {len(code)} code lines found in {source} in order; output identical")


if __name__ == "__main__":
    main()
