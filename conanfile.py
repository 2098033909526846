"""Conan 2 recipe for fusex, a header-only C++17 CUDA kernel fusion library.

    conan create . --build=missing

Two components, the same targets as fusex's own CMake config package:
  core    fusex::fusex   the headers, C++17, CUDA::cudart
  matmul  fusex::matmul  fusex::fusex plus CUDA::cublasLt, for <fusex/matmul.hpp>
and, as there, fusex::compiled (opt-in separate compilation), a static library that the build
module defines in the consumer's project from the one source file the package ships.
(Conan consumers name them fusex::core and fusex::matmul in cpp_info.requires.) The root target
that CMakeDeps makes from all components is fusex::fusex_all; use the two above instead.

The CUDA Toolkit is not a Conan package: it comes from the system, found by CMake's
find_package(CUDAToolkit) in a build module that the CMakeDeps-generated config includes.
"""

import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load, save

# Included by the config that CMakeDeps generates for fusex, after fusex::fusex and fusex::matmul are
# defined: the same CUDA wiring as fusex's own config package (cmake/fusexConfig.cmake.in, and
# CMakeLists.txt for fusex::matmul).
_CUDA_BUILD_MODULE = """\
# fusex needs the system's CUDA Toolkit: the CUDA runtime, and with CUDA 13 its CCCL include folder
# for host-compiler translation units; fusex::matmul also cuBLASLt. All are found on the consumer's
# machine.
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
if(TARGET fusex::matmul)
  target_link_libraries(fusex::matmul INTERFACE CUDA::cublasLt)
endif()
# fusex::compiled (opt-in separate compilation): built in the consumer's project, when something
# links it, from the one source file this package ships (as fusex's own config package does).
if(TARGET fusex::fusex)
  include("${CMAKE_CURRENT_LIST_DIR}/fusex_compiled.cmake")
  fusex_define_compiled_target("${CMAKE_CURRENT_LIST_DIR}/fusex_compiled.cpp")
endif()
"""


class FusexConan(ConanFile):
    name = "fusex"
    description = "Header-only CUDA kernel fusion, graph capture and stream-ordered memory"
    license = "MIT"
    topics = ("cuda", "kernel-fusion", "expression-templates", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "include/*", "LICENSE", "src/compiled.cpp", "cmake/fusex_compiled.cmake"
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
        module_dir = os.path.join(self.package_folder, os.path.dirname(self._build_module))
        copy(self, "fusex_compiled.cmake", os.path.join(self.source_folder, "cmake"), module_dir)
        save(self, os.path.join(module_dir, "fusex_compiled.cpp"),
             load(self, os.path.join(self.source_folder, "src", "compiled.cpp")))

    @property
    def _build_module(self):
        return os.path.join("lib", "cmake", "fusex", "fusex-cuda.cmake")

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "fusex")
        # CMakeDeps links the root target to every component; it cannot be fusex::fusex, which is
        # the core alone (it does not link cuBLASLt).
        self.cpp_info.set_property("cmake_target_name", "fusex::fusex_all")
        self.cpp_info.set_property("cmake_build_modules", [self._build_module])
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []

        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "fusex::fusex")
        core.includedirs = ["include"]
        core.bindirs = []
        core.libdirs = []

        # CUDA::cublasLt is added by the build module: the CUDA Toolkit is not a Conan package.
        matmul = self.cpp_info.components["matmul"]
        matmul.set_property("cmake_target_name", "fusex::matmul")
        matmul.requires = ["core"]
        matmul.includedirs = []
        matmul.bindirs = []
        matmul.libdirs = []
