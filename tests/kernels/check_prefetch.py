#!/usr/bin/env python3
"""The kernels' software prefetch is in the object code (x86-64).

GCC 12 at -O2 and above once deleted prefetch_ahead's loop (src/rope/kernels/rotate.h) from
rotate.cc and from the benchmarks' stream: under C++'s forward-progress rule a loop of prefetches
counted as a loop without effects. Nothing else noticed; the kernels only ran slower (apply_rope
f32 at DRAM sizes about 1.6 times slower on Zen 5). This disassembles the libraries and fails
when an object that calls prefetch_ahead or prefetch_range holds no prefetch instruction.

usage: check_prefetch.py OBJDUMP LIBRARY:OBJECT[,OBJECT...] ...
"""
import re
import subprocess
import sys


def prefetches_per_object(objdump, library):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", library], check=True,
                         capture_output=True, text=True).stdout
    counts, current = {}, None
    for line in out.splitlines():
        # GNU objdump: "rotate.cc.o:     file format elf64-x86-64"; llvm-objdump:
        # "LIB(rotate.cc.o):\tfile format elf64-x86-64".
        match = re.match(r"^(?:.*\()?([^()]+?)\)?:\s+file format", line)
        if match:
            current = match.group(1)
            counts[current] = 0
        elif current and "\tprefetch" in line:
            counts[current] += 1
    return counts


def main():
    objdump, specs = sys.argv[1], sys.argv[2:]
    if not specs:
        sys.exit("usage: check_prefetch.py OBJDUMP LIBRARY:OBJECT[,OBJECT...] ...")
    failed = False
    for spec in specs:
        library, objects = spec.rsplit(":", 1)
        counts = prefetches_per_object(objdump, library)
        for obj in objects.split(","):
            if obj not in counts:
                print(f"{library}: no member {obj} (members: {', '.join(sorted(counts))})")
                failed = True
            elif counts[obj] == 0:
                print(f"{library}: {obj} holds no prefetch instruction (prefetch_range was "
                      "optimised away)")
                failed = True
            else:
                print(f"{library}: {obj}: {counts[obj]} prefetch instructions")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
