"""Which library the package loads: Weft's, and never NVIDIA's libnccl.

Each case runs in a fresh interpreter, since a process loads the library once.
"""

import os
import subprocess
import sys

import pytest

import weft

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PACKAGE_ROOT)
NVIDIA_NCCL = "/usr/local/cuda/lib64/libnccl.so.2"
_PROBE = "import weft; print(weft.library_path()); print(weft.nccl_version()); print(weft.weft_version())"


def _python(code, **env_changes):
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_ROOT
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True, timeout=60)


def test_loaded_library_is_weft():
    path = weft.library_path()
    assert os.path.isabs(path) and os.path.basename(path).startswith(("libweft.so", "libnccl.so")), path
    assert os.path.realpath(path) != os.path.realpath(NVIDIA_NCCL)
    assert weft.nccl_version() >= 22700
    assert weft.weft_version().startswith("weft ")
    if os.environ.get("WEFT_LIBRARY"):
        assert path == os.path.realpath(os.environ["WEFT_LIBRARY"])


@pytest.mark.skipif(not os.path.exists(NVIDIA_NCCL), reason=f"no NVIDIA NCCL at {NVIDIA_NCCL}")
def test_refuses_nvidia_nccl_given_explicitly():
    run = _python(_PROBE, WEFT_LIBRARY=NVIDIA_NCCL)
    assert run.returncode != 0
    assert "not Weft" in run.stderr and NVIDIA_NCCL in run.stderr, run.stderr
    assert "WEFT_LIBRARY" in run.stderr


@pytest.mark.skipif(not os.path.exists(NVIDIA_NCCL), reason=f"no NVIDIA NCCL at {NVIDIA_NCCL}")
def test_skips_nvidia_nccl_on_the_loader_path():
    # With NVIDIA's directory first on the loader path, "libnccl.so.2" resolves to
    # NVIDIA's library: that candidate must be refused, never used.
    code = ("from weft import _library as l\n"
            "try:\n    l._try_load('loader path', 'libnccl.so.2')\n"
            "except OSError as err:\n    print('refused:', err)\n"
            "else:\n    print('loaded')\n")
    run = _python(code, LD_LIBRARY_PATH=os.path.dirname(NVIDIA_NCCL))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("refused:") and "not Weft" in run.stdout, run.stdout


def test_missing_explicit_library_is_an_error_not_a_fallback():
    run = _python(_PROBE, WEFT_LIBRARY="/nonexistent/libnccl.so.2")
    assert run.returncode != 0
    assert "LibraryNotFound" in run.stderr and "/nonexistent/libnccl.so.2" in run.stderr, run.stderr


def _build_tree_libraries():
    """The build trees' libraries the package may pick: not sanitizer builds."""
    import glob
    from weft import _library
    return [p for p in glob.glob(os.path.join(REPO_ROOT, "build*", "lib", "libnccl.so.2"))
            if not _library._sanitized(os.path.dirname(os.path.dirname(p)))]


def test_sanitizer_build_trees_are_not_picked(tmp_path):
    from weft import _library
    (tmp_path / "CMakeCache.txt").write_text("WEFT_SANITIZE:STRING=address\n")
    assert _library._sanitized(str(tmp_path))
    (tmp_path / "CMakeCache.txt").write_text("WEFT_SANITIZE:STRING=\n")
    assert not _library._sanitized(str(tmp_path))
    assert not _library._sanitized(str(tmp_path / "missing"))


@pytest.mark.skipif(not _build_tree_libraries(), reason="no build tree beside this source tree")
def test_finds_the_build_tree_without_help():
    run = _python(_PROBE, WEFT_LIBRARY=None)
    assert run.returncode == 0, run.stderr
    path = run.stdout.splitlines()[0]
    builds = {os.path.realpath(p) for p in _build_tree_libraries()}
    assert path in builds, (path, builds)
