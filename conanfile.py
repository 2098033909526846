"""Conan 2 recipe for fusex, a header-only C++17 CUDA kernel fusion library.

    conan create . --build=missing

The CUDA Toolkit is not a Conan package: it comes from the system, found by CMake's
find_package(CUDAToolkit) in a build module that the CMakeDeps-generated config includes.
"""

import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load, save

# Included by the config that CMakeDeps generates for fusex, after fusex::fusex is defined: the same
# CUDA wiring as fusex's own config package (cmake/fusexConfig.cmake.in).
_CUDA_BUILD_MODULE = """\
# fusex needs the system's CUDA Toolkit: the CUDA runtime, and with CUDA 13 its CCCL include folder
# for host-compiler translation units. Both are found on the consumer's machine.
find_package(CUDAToolkit REQUIRED)
if(TARGET fusex::fusex)
  target_link_libraries(fusex::fusex INTERFACE CUDA::cudart)
  foreach(_fusex_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${_fusex_dir}/cccl/cuda/std/tuple")
      target_include_directories(fusex::fusex SYSTEM INTERFACE "${_fusex_dir}/cccl")
      break()
    endif()
  endforeach()
  unset(_fusex_dir)
endif()
"""


class FusexConan(ConanFile):
    name = "fusex"
    description = "Header-only CUDA kernel fusion, graph capture and stream-ordered memory"
    license = "MIT"
    topics = ("cuda", "kernel-fusion", "expression-templates", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "include/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        # The version is defined once, in include/fusex/version.hpp.
        text = load(self, os.path.join(self.recipe_folder, "include", "fusex", "version.hpp"))
        parts = [re.search(rf"#define FUSEX_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        self.version = ".".join(parts)

    def validate(self):
        if self.settings.get_safe("compiler.cppstd"):
            check_min_cppstd(self, 17)

    def package_id(self):
        # Header-only: one package for every configuration.
        self.info.clear()

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, "*", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))
        save(self, os.path.join(self.package_folder, self._build_module), _CUDA_BUILD_MODULE)

    @property
    def _build_module(self):
        return os.path.join("lib", "cmake", "fusex", "fusex-cuda.cmake")

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "fusex")
        self.cpp_info.set_property("cmake_target_name", "fusex::fusex")
        self.cpp_info.set_property("cmake_build_modules", [self._build_module])
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        # TODO(matmul): once fusex::matmul exists, describe fusex::fusex and fusex::matmul as components
        # (matmul also links CUDA::cublasLt in the build module).
