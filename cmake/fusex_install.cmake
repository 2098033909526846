# Install rules and the CMake config package: after `cmake --install`, find_package(fusex CONFIG)
# gives fusex::fusex (and fusex::matmul where that target exists). Included by the top-level
# CMakeLists.txt when FUSEX_INSTALL is ON.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# fusex is header-only, so its config package is architecture-independent and goes under share/.
set(FUSEX_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/fusex"
    CACHE STRING "Where to install fusex's CMake config package, relative to the prefix")
mark_as_advanced(FUSEX_INSTALL_CMAKEDIR)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/fusex"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh" PATTERN "*.h")

# Runs at the end of the top-level directory, so that targets defined after this file was
# included (fusex_matmul, for one) are exported too.
function(_fusex_install_targets)
  set(_targets fusex)
  if(TARGET fusex_matmul)
    # Exported as fusex::matmul.
    set_target_properties(fusex_matmul PROPERTIES EXPORT_NAME matmul)
    list(APPEND _targets fusex_matmul)
  endif()
  # INCLUDES DESTINATION: the installed targets find the headers under <prefix>/include whatever
  # CMAKE_INSTALL_INCLUDEDIR was when the target was defined.
  install(TARGETS ${_targets} EXPORT fusexTargets INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
  install(EXPORT fusexTargets NAMESPACE fusex:: DESTINATION "${FUSEX_INSTALL_CMAKEDIR}")
endfunction()
cmake_language(DEFER CALL _fusex_install_targets)

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/fusexConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/fusexConfig.cmake"
  INSTALL_DESTINATION "${FUSEX_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/fusexConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/fusexConfig.cmake" "${PROJECT_BINARY_DIR}/fusexConfigVersion.cmake"
        DESTINATION "${FUSEX_INSTALL_CMAKEDIR}")
# fusex::compiled is defined by the config package from its one source file, in the consumer's
# build (cmake/fusex_compiled.cmake): the install holds no binary.
install(FILES "${PROJECT_SOURCE_DIR}/cmake/fusex_compiled.cmake" DESTINATION "${FUSEX_INSTALL_CMAKEDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/src/compiled.cpp" DESTINATION "${FUSEX_INSTALL_CMAKEDIR}"
        RENAME fusex_compiled.cpp)
