# lit configuration of Kiln's FileCheck tests (tests/filecheck/README.md). ctest runs lit on one
# .kir file at a time (tests/CMakeLists.txt) and passes the tools as parameters:
#   --param kiln=PATH       the kiln binary       (%kiln)
#   --param filecheck=PATH  LLVM's FileCheck      (%FileCheck)
#   --param exec_root=DIR   where %t files go     (the build tree, never the sources)
# By hand: python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v --param kiln=build/app/kiln \
#            --param filecheck=/usr/bin/FileCheck-19 tests/filecheck
import os

import lit.formats

config.name = "kiln-filecheck"
# RUN lines run in bash (with pipefail), so a RUN line can record an exit status: `... || echo "exit $?"`.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".kir"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))


def required(name):
    value = lit_config.params.get(name)
    if not value:
        lit_config.fatal("missing --param %s=PATH (see tests/filecheck/lit.cfg.py)" % name)
    return value


config.test_exec_root = lit_config.params.get("exec_root") or os.path.join(
    os.environ.get("TMPDIR", "/tmp"), "kiln-filecheck")
# Longest first: lit applies substitutions in order.
config.substitutions.append(("%FileCheck", required("filecheck")))
config.substitutions.append(("%kiln", required("kiln")))
# One thread and no stored state: the output depends only on the file and the flags.
config.environment["KILN_NUM_THREADS"] = "1"
for name in ("HOME", "TMPDIR", "LANG"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
