#!/usr/bin/env python3
"""Checks the folder layering rules of ARCHITECTURE.md ("who may include whom") on every source
file: which of Kiln's top-level folders a folder's files may include, and where the heavy
third-party headers may appear (LLVM only in codegen/, libtorch only in importers/ and the
profiler's baseline runners, Qt only in app/gui/, SQLite only in profiler/), and that the
JavaScript runtime in web/ imports only its own files (plus Node's `node:` modules in the Node
tools; kiln_runtime.mjs, which browsers load too, imports nothing). Prints one line per
violation (file:line: what) and exits 1 if there is any. Run by ctest (meta_layering).

Usage: scripts/check_layering.py [ROOT]
       scripts/check_layering.py --self-test   (a made-up tree with known violations is caught)
"""
import os
import re
import sys

# folder -> Kiln folders its files may include (besides itself).
MAY_INCLUDE = {
    "runtime": set(),
    "core": {"runtime"},
    "codegen": {"core", "runtime"},
    "importers": {"core", "runtime"},
    "profiler": {"codegen", "core", "importers", "runtime"},
    "app": {"profiler", "codegen", "core", "importers", "runtime"},
    "python": {"runtime"},  # the extension binds the runtime only (it shares a process with today's torch)
}
KILN_FOLDERS = set(MAY_INCLUDE) | {"tests", "resources", "examples"}

# Third-party headers that are heavy or that a layer must not see: (pattern, where allowed, why).
THIRD_PARTY = [
    (re.compile(r"^(llvm|llvm-c|lld)/"), lambda f: f.startswith("codegen/"), "LLVM stays inside codegen/"),
    (re.compile(r"^(torch|ATen|c10|caffe2)/"),
     lambda f: f.startswith("importers/") or f.startswith("profiler/torch_baseline.") or f.startswith("app/torch/"),
     "libtorch headers stay in importers/, the baseline runner profiler/torch_baseline.cpp and app/torch/ (kiln::torch::optimize)"),
    (re.compile(r"^Q[A-Za-z]+$|^Qt[A-Za-z]*/"), lambda f: f.startswith("app/gui/"), "Qt stays inside app/gui/"),
    (re.compile(r"^sqlite3\.h$"), lambda f: f.startswith("profiler/"), "SQLite stays inside profiler/"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


JS_IMPORT = re.compile(r"""^\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]""")
# web/ files that run in a browser as well as in Node: no node: modules.
BROWSER_JS = {"kiln_runtime.mjs"}


def web_violations(root):
    """web/ is JavaScript over the module format only: relative imports of web/ files, node: modules."""
    out = []
    web = os.path.join(root, "web")
    for dirpath, _, files in os.walk(web):
        for name in sorted(files):
            if not name.endswith((".mjs", ".js", ".html")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = JS_IMPORT.search(line)
                    if not m:
                        continue
                    spec = next(g for g in m.groups() if g)
                    if spec.startswith("node:"):
                        if name in BROWSER_JS:
                            out.append(f"{rel}:{number}: imports {spec}: {name} also runs in browsers")
                        continue
                    target = os.path.normpath(os.path.join(dirpath, spec))
                    if not spec.startswith(".") or os.path.relpath(target, web).startswith(".."):
                        out.append(f"{rel}:{number}: imports {spec}: web/ imports only its own files and node: modules")
    return out


def violations(root):
    out = web_violations(root)
    for folder in MAY_INCLUDE:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".h", ".hpp", ".cpp", ".cc", ".c")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(2)
                        top = header.split("/", 1)[0]
                        if m.group(1) == '"' and "/" in header and top in KILN_FOLDERS:
                            if top != folder and top not in MAY_INCLUDE[folder]:
                                out.append(f"{rel}:{number}: {folder}/ may not include {header} ({top}/)")
                            continue
                        for pattern, allowed, why in THIRD_PARTY:
                            if pattern.search(header) and not allowed(rel):
                                out.append(f"{rel}:{number}: includes <{header}>: {why}")
    return out


def self_test():
    import tempfile
    files = {
        "runtime/ok.h": '#include <vector>\n#include "runtime/tensor.h"\n',
        "runtime/bad.cpp": '#include "core/ir/graph.h"\n',               # runtime may include nothing of Kiln
        "core/bad.cpp": '#include <llvm/IR/Module.h>\n#include "codegen/target.h"\n',
        "codegen/ok.cpp": '#include <llvm/IR/Module.h>\n#include "core/ir/graph.h"\n',
        "app/facade.cpp": '#include <QString>\n',                          # Qt outside app/gui
        "app/gui/view.cpp": '#include <QString>\n#include "app/facade.h"\n',
        "profiler/store.cpp": '#include <sqlite3.h>\n',
        "importers/x.cpp": '#include "profiler/store.h"\n#include <torch/script.h>\n',
        "web/kiln_runtime.mjs": "import {readFile} from 'node:fs';\n",   # the browser half
        "web/run_model.mjs": "import path from 'node:path';\nimport {x} from './kiln_runtime.mjs';\n"
                             "import {y} from '../app/z.mjs';\nimport 'left-pad';\n",
    }
    expected = {"runtime/bad.cpp:1", "core/bad.cpp:1", "core/bad.cpp:2", "app/facade.cpp:1", "importers/x.cpp:1",
                "web/kiln_runtime.mjs:1", "web/run_model.mjs:3", "web/run_model.mjs:4"}
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = {v.split(": ", 1)[0] for v in violations(root)}
    if found != expected:
        print(f"self-test failed: found {sorted(found)}, expected {sorted(expected)}")
        return 1
    print(f"self-test: the {len(expected)} planted violations are found, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} layering violation(s): see ARCHITECTURE.md, 'who may include whom'", file=sys.stderr)
        return 1
    print("layering: every include follows ARCHITECTURE.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
