"""One py_test per pytest file, run through tools/bazel/pytest_runner.py."""

def pytest_files(files, deps, data, sizes = {}, tags = {}):
    """Declares a py_test named after each test file (e.g. tests/test_episodes.py -> tests/test_episodes).

    Args:
      files: the pytest files.
      deps: libraries every test needs.
      data: files every test reads (fixtures, conftest.py, setup.cfg).
      sizes: test size per file where the default ("large": 15 minutes, since most files import
        TensorFlow and several build datasets on two shared cores) does not fit.
      tags: extra tags per file.
    """
    for f in files:
        native.py_test(
            name = f[:-len(".py")],
            srcs = ["//tools/bazel:pytest_runner.py", f],
            main = "//tools/bazel:pytest_runner.py",
            args = ["$(rootpath %s)" % f],
            python_version = "PY3",
            deps = deps,
            data = data,
            size = sizes.get(f, "large"),
            tags = tags.get(f, []),
        )
