"""The README's C++ example is examples/quickstart.cc.

Every line of the README block marked `<!-- example: examples/quickstart.cc -->` must be a line
of the program, in order, and the program's output must equal the block marked
`<!-- output: ... -->`, so neither can drift from what the build compiles and runs.

usage: readme_example_test.py README SOURCE PROGRAM WORK_DIR
"""
import subprocess
import sys


def block_after(text, marker):
    at = text.index(marker)
    start = text.index("```", at)
    start = text.index("\n", start) + 1
    return text[start:text.index("```", start)]


def main():
    readme, source, program, work_dir = sys.argv[1:5]
    text = open(readme, encoding="utf-8").read()
    code = [l for l in block_after(text, "<!-- example: examples/quickstart.cc -->").splitlines() if l.strip()]
    lines = open(source, encoding="utf-8").read().splitlines()
    at = 0
    for line in code:
        while at < len(lines) and lines[at] != line:
            at += 1
        if at == len(lines):
            sys.exit(f"README example line not in {source} (in order): {line!r}")
        at += 1
    expected = block_after(text, "<!-- output:")
    run = subprocess.run([program], cwd=work_dir, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{program} failed ({run.returncode}): {run.stderr}")
    if run.stdout != expected:
        sys.exit(f"README output block differs from the program's output:\n--- README\n{expected}--- program\n{run.stdout}")
    print(f"README example: {len(code)} code lines found in {source} in order; output identical")


if __name__ == "__main__":
    main()
