"""test_harness.py - the test harness itself: a file that tests nothing is no pass.

Runs pytest on small files of its own with the skipped_is_77 plugin that
conftest.py loads for every integration file, and checks the exit status
meson sees: 77 (SKIP) when every test skipped, with each reason printed;
pytest's own status as soon as one test passed or failed.
"""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def run_pytest(tmp_path, body):
    f = tmp_path / "test_sample.py"
    f.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=HERE, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "skipped_is_77", str(f)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_every_test_skipped_exits_77_with_the_reasons(tmp_path):
    r = run_pytest(tmp_path, """
        import pytest
        pytestmark = pytest.mark.skipif(True, reason="the frobnicator is not installed")
        def test_a(): pass
        def test_b(): pass
    """)
    assert r.returncode == 77, r.stdout + r.stderr
    assert "every test skipped (2)" in r.stdout
    assert "the frobnicator is not installed" in r.stdout


def test_skips_inside_tests_count_too(tmp_path):
    r = run_pytest(tmp_path, """
        import pytest
        def test_a(): pytest.skip("no device")
    """)
    assert r.returncode == 77, r.stdout + r.stderr
    assert "no device" in r.stdout


def test_one_pass_among_skips_is_a_pass(tmp_path):
    r = run_pytest(tmp_path, """
        import pytest
        def test_a(): pytest.skip("no device")
        def test_b(): assert True
    """)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_failure_among_skips_is_a_failure(tmp_path):
    r = run_pytest(tmp_path, """
        import pytest
        def test_a(): pytest.skip("no device")
        def test_b(): assert False
    """)
    assert r.returncode == 1, r.stdout + r.stderr


def test_a_failing_fixture_among_skips_is_a_failure(tmp_path):
    r = run_pytest(tmp_path, """
        import pytest
        @pytest.fixture
        def broken(): raise RuntimeError("mis-wired")
        def test_a(): pytest.skip("no device")
        def test_b(broken): pass
    """)
    assert r.returncode == 1, r.stdout + r.stderr
