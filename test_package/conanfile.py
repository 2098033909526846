"""Builds and runs two small CUDA programs against the fusex package that `conan create` made: one
using fusex::fusex (and again fusex::compiled), one using fusex::matmul (cuBLASLt). Neither needs a GPU to build or to run."""

import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


class FusexTestPackageConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def build(self):
        # The CUDA compiler and architectures come from CMake's usual CUDACXX and CUDAARCHS
        # environment variables; test_package/CMakeLists.txt defaults to sm_90.
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if can_run(self):
            for program in ("fusex_test_package", "fusex_test_package_compiled", "fusex_test_package_matmul"):
                self.run(os.path.join(self.cpp.build.bindir, program), env="conanrun")
