#!/usr/bin/env python3
"""The layers of docs/design.md as a checked fact: every #include of include/posenc/ and src/
goes down the layer order or stays in its layer, tests/reference/ includes nothing of posenc
(it is the independent reference the tests compare against), and posenc/posenc.h includes every
public header; cli/ includes of src/ only CLI_INTERNAL. Usage: check_layers.py ROOT"""
import os
import re
import sys

# layer -> the layers (or single headers) it may include besides itself. util sits below core
# but reports errors with core's posenc::Error and caps threads at core's kMaxThreads.
ALLOWED = {
    "util": {"core/error.h", "core/threads.h"},
    "core": {"util"},
    "rope": {"core", "util"},
    "io": {"core", "util"},
    "analysis": {"core", "rope", "io", "util"},
    "llama": {"core", "rope", "io", "util"},
    "report": {"core", "rope", "io", "analysis", "llama", "util"},
}
# The only headers of src/ that cli/ may include.
CLI_INTERNAL = {"report/encoding_json.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_target(target):
    """(layer, path within the layer) of a quoted include, or None for a file outside posenc."""
    parts = target.split("/")
    if parts[0] == "posenc":
        return (parts[1], "/".join(parts[1:])) if len(parts) > 2 else ("root", parts[-1])
    if parts[0] in ALLOWED and len(parts) > 1:
        return parts[0], target
    return None


def main(root):
    problems = []
    checked = 0
    for top, layer_index in (("include/posenc", 2), ("src", 1)):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                parts = rel.split(os.sep)
                if len(parts) <= layer_index + 1:
                    continue  # posenc.h, the umbrella header, may include every layer
                layer = parts[layer_index]
                if layer not in ALLOWED:
                    problems.append(f"{rel}: folder '{layer}' is not a layer of {sorted(ALLOWED)}")
                    continue
                text = open(path, encoding="utf-8").read()
                for target in INCLUDE.findall(text):
                    found = layer_of_target(target)
                    if found is None or found[0] == layer:
                        continue
                    checked += 1
                    other, inner = found
                    if other not in ALLOWED[layer] and inner not in ALLOWED[layer]:
                        problems.append(f"{rel}: includes \"{target}\": layer '{layer}' may include "
                                        f"only {sorted(ALLOWED[layer])}")
    for dirpath, _, names in os.walk(os.path.join(root, "tests/reference")):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            for target in INCLUDE.findall(open(path, encoding="utf-8").read()):
                checked += 1
                if not target.startswith("reference/"):
                    problems.append(f"{rel}: includes \"{target}\": the references include only "
                                    "the standard library and each other")
    # The tool uses the public API; of src/ it includes only the JSON fields it shares with
    # report/json.cc.
    for dirpath, _, names in os.walk(os.path.join(root, "cli")):
        for name in names:
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            for target in INCLUDE.findall(open(path, encoding="utf-8").read()):
                found = layer_of_target(target)
                if found is None or target.startswith("posenc/"):
                    continue
                checked += 1
                if target not in CLI_INTERNAL:
                    problems.append(f"{rel}: includes \"{target}\" of src/: the tool includes only "
                                    f"the public headers and {sorted(CLI_INTERNAL)}")
    # The umbrella header includes every public header.
    umbrella = open(os.path.join(root, "include/posenc/posenc.h"), encoding="utf-8").read()
    included = set(INCLUDE.findall(umbrella))
    for dirpath, _, names in os.walk(os.path.join(root, "include/posenc")):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), os.path.join(root, "include"))
            if name.endswith(".h") and rel != "posenc/posenc.h" and rel not in included:
                problems.append(f"include/posenc/posenc.h: does not include \"{rel}\"")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_layers: {checked} cross-folder includes follow the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
