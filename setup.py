"""Builds the Python package `dash`: the extension dash._C comes from the project's
CMake (src/python/), built against the torch that this interpreter imports.

DASH_CMAKE_BUILD_DIR: a CMake build folder to build in (scripts/test.sh passes the
one it has just built, so that nothing is compiled twice); default build/python
(Release, only the library and the extension).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch

        given = os.environ.get("DASH_CMAKE_BUILD_DIR")
        build_dir = Path(given).resolve() if given else ROOT / "build" / "python"
        configure = [
            "-DDASH_BUILD_PYTHON=ON",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        ]
        try:  # pip's pybind11 (a virtual environment); Debian's is found by CMake itself
            import pybind11

            configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        if not given:
            configure += ["-DCMAKE_BUILD_TYPE=Release"] + [
                f"-DDASH_BUILD_{part}=OFF" for part in ("TESTS", "BENCH", "APPS", "EXAMPLES")
            ]
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *configure], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "dash_python", "-j", jobs], check=True)
        # The module for this interpreter (a build folder may hold others' too).
        built = build_dir / "python" / "dash" / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not built.exists():
            raise RuntimeError(f"the build did not produce {built}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("dash._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
