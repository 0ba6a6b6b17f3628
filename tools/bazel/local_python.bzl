"""A Python toolchain for the interpreter that scripts/setup.sh installed rlds_suite's dependencies into.

Bazel's default Python runtime runs `/usr/bin/env python`, which Debian 12 lacks, and rules that
fetch an interpreter need the network. This repository rule asks `$RLDS_SUITE_PYTHON` (default:
`python3` on PATH) for its real executable (pyenv shims resolve to the versioned binary) and
declares it as the registered py3 runtime, so py_library/py_test targets import the same
site-packages as pytest does.
"""

def _local_python_impl(ctx):
    name = ctx.os.environ.get("RLDS_SUITE_PYTHON", "python3")
    found = ctx.which(name)
    if not found:
        fail("local_python: %s is not on PATH; run scripts/setup.sh first" % name)
    result = ctx.execute([found, "-c", "import sys; print(sys.executable)"])
    if result.return_code != 0:
        fail("local_python: %s does not run: %s" % (found, result.stderr))
    interpreter = result.stdout.strip()
    ctx.file("BUILD.bazel", content = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "py3",
    interpreter_path = "{interpreter}",
    python_version = "PY3",
    stub_shebang = "#!{interpreter}",
)

py_runtime_pair(name = "pair", py3_runtime = ":py3")

toolchain(
    name = "toolchain",
    toolchain = ":pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(interpreter = interpreter))

local_python = repository_rule(
    implementation = _local_python_impl,
    environ = ["PATH", "RLDS_SUITE_PYTHON"],
    local = True,
)
