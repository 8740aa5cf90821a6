"""The .pyi stubs describe the compiled module exactly (mypy's stubtest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stubs_match_the_module(tmp_path: Path) -> None:
    # Run outside the source tree, so mypy sees only the installed package.
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "rdmatopo._rdmatopo"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_is_typed() -> None:
    import rdmatopo

    assert (Path(rdmatopo.__file__).parent / "py.typed").is_file()


def test_package_examples_and_tests_type_check(tmp_path: Path) -> None:
    """mypy --strict on the installed package, the examples and these tests: the stubs
    are usable as written (torch, optional in the example, may be absent)."""
    here = Path(__file__).resolve().parent
    examples = here.parents[1] / "examples" / "python"
    mypy = [sys.executable, "-m", "mypy", "--strict", "--disable-error-code", "import-not-found",
            "--cache-dir", str(tmp_path / "cache")]
    for target, cwd in ((["-p", "rdmatopo"], tmp_path), ([str(examples), str(here)], here.parent)):
        result = subprocess.run([*mypy, *target], capture_output=True, text=True, cwd=cwd)
        assert result.returncode == 0, result.stdout + result.stderr
