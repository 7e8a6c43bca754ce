"""Builds ropeattn._ropeattn, the C extension, linked statically against the
repository's own library (../build/libropeattn.a, made here by the
repository's Makefile when missing or out of date) and OpenBLAS.  The
version is the header's RA_VERSION_STRING.

    pip install --no-build-isolation ./python    (from the repository root)
    make python                                  (in place, for PYTHONPATH=python)
"""
import os
import re
import shlex
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    import numpy
except ImportError:
    raise SystemExit("ropeattn: building needs NumPy's headers (Debian: python3-numpy, "
                     "in a venv made by /usr/bin/python3 -m venv --system-site-packages, "
                     "and pip install --no-build-isolation)")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HEADER = ROOT / "include" / "ropeattn.h"
LIBRARY = ROOT / "build" / "libropeattn.a"


def header_version():
    m = re.search(r'^#define RA_VERSION_STRING "(.*)"', HEADER.read_text(), re.M)
    return m.group(1)


def build_library():
    # The plain build (BUILD=build, no sanitizer), whatever the environment
    # says: the extension links it into a Python process.
    subprocess.run(["make", "-C", str(ROOT), "-s", f"-j{os.cpu_count() or 1}", "BUILD=build",
                    "SANITIZE=", "build/libropeattn.a"], check=True)


class BuildExt(build_ext):
    def run(self):
        build_library()
        super().run()


def blas_libs():
    """OpenBLAS's link flags, as the Makefile's BLAS_LIBS finds them."""
    try:
        out = subprocess.run(["pkg-config", "--libs", "openblas"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = "-lopenblas"
    flags = shlex.split(out)
    return ([f[2:] for f in flags if f.startswith("-L")],
            [f[2:] for f in flags if f.startswith("-l")])


blas_dirs, blas_names = blas_libs()
setup(
    version=header_version(),
    packages=["ropeattn"],
    cmdclass={"build_ext": BuildExt},
    ext_modules=[Extension(
        "ropeattn._ropeattn",
        sources=sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.c")),
        depends=[str(HEADER), str(HERE / "src" / "ext.h"), str(LIBRARY)],
        include_dirs=[str(ROOT / "include"), numpy.get_include()],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
        extra_objects=[str(LIBRARY)],
        library_dirs=blas_dirs,
        libraries=blas_names + ["m"],
        extra_link_args=["-pthread"],
    )],
)
