"""Builds ropeattn._ropeattn, the C extension, linked statically against the
repository's own libraries (../build/libropeattn_hf.a, the checkpoint
library, and ../build/libropeattn.a, made here by the repository's Makefile
when missing or out of date), OpenBLAS and cJSON.  The version is the
header's RA_VERSION_MAJOR, _MINOR and _PATCH.

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
HF_HEADER = ROOT / "include" / "ropeattn_hf.h"
LIBRARY = ROOT / "build" / "libropeattn.a"
HF_LIBRARY = ROOT / "build" / "libropeattn_hf.a"  # needs LIBRARY after it, and cJSON


def header_version():
    text = HEADER.read_text()
    return ".".join(re.search(rf"^#define RA_VERSION_{part} ([0-9]+)$", text, re.M).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


def build_library():
    # The plain build (BUILD=build, no sanitizer), whatever the environment
    # says: the extension links it into a Python process.
    subprocess.run(["make", "-C", str(ROOT), "-s", f"-j{os.cpu_count() or 1}", "BUILD=build",
                    "SANITIZE=", "build/libropeattn_hf.a", "build/libropeattn.a"], check=True)


class BuildExt(build_ext):
    def finalize_options(self):
        # Objects compiled against one NumPy's headers do not import under
        # another (1.x against 2.x): Debian's python3 and a venv's share this
        # build folder, so a build for another NumPy than the last compiles
        # everything again.
        super().finalize_options()
        self.stamp = Path(self.build_temp) / "numpy-version"
        if not self.stamp.exists() or self.stamp.read_text() != numpy.__version__:
            self.force = True

    def run(self):
        build_library()
        super().run()
        self.stamp.parent.mkdir(parents=True, exist_ok=True)
        self.stamp.write_text(numpy.__version__)


def pkg_libs(package, fallback):
    """A package's link flags from pkg-config (the Makefile's BLAS_LIBS:
    openblas; Debian's libcjson-dev: libcjson), else the fallback."""
    try:
        out = subprocess.run(["pkg-config", "--libs", package], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = fallback
    flags = shlex.split(out)
    return ([f[2:] for f in flags if f.startswith("-L")],
            [f[2:] for f in flags if f.startswith("-l")])


blas_dirs, blas_names = pkg_libs("openblas", "-lopenblas")
cjson_dirs, cjson_names = pkg_libs("libcjson", "-lcjson")
setup(
    version=header_version(),
    packages=["ropeattn"],
    cmdclass={"build_ext": BuildExt},
    ext_modules=[Extension(
        "ropeattn._ropeattn",
        sources=sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.c")),
        depends=[str(HEADER), str(HF_HEADER), str(HERE / "src" / "ext.h"), str(LIBRARY),
                 str(HF_LIBRARY)],
        include_dirs=[str(ROOT / "include"), numpy.get_include()],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
        # the checkpoint library first: it calls the core library
        extra_objects=[str(HF_LIBRARY), str(LIBRARY)],
        library_dirs=blas_dirs + cjson_dirs,
        libraries=blas_names + cjson_names + ["m"],
        extra_link_args=["-pthread"],
    )],
)
