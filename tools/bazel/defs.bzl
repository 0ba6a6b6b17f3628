"""pytest files as Bazel py_test targets, run through tools/bazel/pytest_runner.py.

Most test files import TensorFlow (about 5 s and 0.8 GiB per process here), so one process per
file spent half of `bazel test //...` on imports. Files are therefore run in groups: one py_test
per group (a few related files, one pytest process, one import), and one per file that no group
names, so a new test file is picked up without editing anything.
"""

def pytest_files(files, groups, deps, data, sizes = {}, tags = {}):
    """Declares a py_test per group and one per ungrouped file.

    Args:
      files: every pytest file Bazel runs.
      groups: target name (e.g. "tests/streams") -> the files it runs, each a subset of `files`;
        a file may belong to one group only.
      deps: libraries every test needs.
      data: files every test reads (fixtures, conftest.py, setup.cfg).
      sizes: test size per target where the default ("large": 15 minutes, since most targets
        import TensorFlow and several build datasets on two shared cores) does not fit.
      tags: extra tags per target.
    """
    grouped = {}
    for name, members in groups.items():
        for f in members:
            if f not in files:
                fail("group %s names %s, which is not a test file Bazel runs" % (name, f))
            if f in grouped:
                fail("%s is in groups %s and %s: each test runs once" % (f, grouped[f], name))
            grouped[f] = name
    targets = dict(groups)
    for f in files:
        if f not in grouped:
            targets[f[:-len(".py")]] = [f]
    for name, members in targets.items():
        if not members:
            continue
        native.py_test(
            name = name,
            srcs = ["//tools/bazel:pytest_runner.py"] + members,
            main = "//tools/bazel:pytest_runner.py",
            args = ["$(rootpath %s)" % f for f in members],
            python_version = "PY3",
            deps = deps,
            data = data,
            size = sizes.get(name, "large"),
            tags = tags.get(name, []),
        )
