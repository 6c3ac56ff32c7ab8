"""Builds and installs the `adacomp` Python package with the project's own CMake.

    /usr/bin/python3 -m venv --system-site-packages .venv   # sees Debian's torch, numpy
    .venv/bin/pip install ./python

(or, outside a virtual environment, `/usr/bin/python3 -m pip install
--break-system-packages ./python`). Everything comes from this checkout and
Debian's packages (cmake, g++, pybind11-dev, python3-dev): nothing is
downloaded. The extension `_adacomp` is the CMake target of python/CMakeLists.txt,
configured without LibTorch, MPI, tests or benchmarks; it links the core
statically, so the installed package needs no other adacomp file.

There is deliberately no pyproject.toml: with one, pip would build in an
isolated environment and try to fetch setuptools from the network.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(adacomp\s+VERSION\s+([0-9.]+)", text)
    if not m:
        raise RuntimeError(f"{ROOT / 'CMakeLists.txt'}: no 'project(adacomp VERSION x.y.z'")
    return m.group(1)


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures the project (core + Python module only) and builds `_adacomp`."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("adacomp: building the extension needs cmake "
                               "(apt-get install cmake g++ pybind11-dev python3-dev)")
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        # ADACOMP_SETUP_BUILD_DIR: where CMake builds (default: under setuptools' build_temp).
        build = Path(os.environ.get("ADACOMP_SETUP_BUILD_DIR")
                     or Path(self.build_temp) / "cmake").resolve()
        config = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DADACOMP_WITH_TORCH=OFF", "-DADACOMP_WITH_MPI=OFF",
            "-DADACOMP_BUILD_TESTS=OFF", "-DADACOMP_BUILD_BENCH=OFF",
        ]
        if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
            config += ["-G", "Ninja"]  # a configured tree keeps its generator
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(config)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "_adacomp",
                               "-j", jobs])
        built = list((build / "python" / "adacomp").glob("_adacomp*.so"))
        if len(built) != 1:
            raise RuntimeError(f"adacomp: expected one _adacomp*.so under {build}/python/adacomp, "
                               f"found {[str(b) for b in built]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="adacomp",
    version=project_version(),
    description="AdaComp adaptive residual gradient compression: codec, functional API "
                "and a PyTorch DDP communication hook",
    packages=["adacomp", "adacomp.torch"],
    package_dir={"adacomp": str(Path("adacomp"))},
    ext_modules=[CMakeExtension("adacomp._adacomp")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    # numpy and (for adacomp.torch) torch come from Debian (python3-numpy,
    # python3-torch); they are not listed so that pip never tries to fetch them.
    zip_safe=False,
)
