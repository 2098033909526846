# fusex::compiled, the opt-in separate compilation (docs/design.md "Separate compilation"): a static
# library of fusex's one source file, which compiles the bodies of fusex's non-template host code
# (arena, resources, planners) once; its users are compiled with FUSEX_SEPARATE_COMPILATION, so
# their translation units parse only the declarations. Linking fusex::compiled instead of
# fusex::fusex is all a user does. The library is built in the project that uses it (fusex's own
# build, add_subdirectory, FetchContent, or an install's config package, which ships the source),
# so an install stays header-only and architecture-independent. The source is plain C++17: it is
# compiled as CXX, or as CUDA by nvcc in a project that enabled CUDA only.
# Limits (docs/design.md, "Separate compilation"): one program uses one mode (fusex::fusex or
# fusex::compiled, not both); the default stream must be the legacy one (config.hpp refuses
# --default-stream per-thread); the default arena's debug checks follow this library's NDEBUG and
# FUSEX_MEMORY_DEBUG; a target of an install(EXPORT) set cannot link it (it is not imported).
function(fusex_define_compiled_target source)
  if(TARGET fusex_compiled)
    return()
  endif()
  get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CXX" IN_LIST _languages)
    if(NOT "CUDA" IN_LIST _languages)
      return()  # neither language: no target (linking fusex::compiled then fails by name)
    endif()
    set_source_files_properties("${source}" PROPERTIES LANGUAGE CUDA)
  endif()
  # EXCLUDE_FROM_ALL: built only where something links it.
  add_library(fusex_compiled STATIC EXCLUDE_FROM_ALL "${source}")
  add_library(fusex::compiled ALIAS fusex_compiled)
  target_link_libraries(fusex_compiled PUBLIC fusex::fusex)
  target_compile_definitions(fusex_compiled PUBLIC FUSEX_SEPARATE_COMPILATION)
  target_compile_features(fusex_compiled PUBLIC cxx_std_17)
  set_target_properties(fusex_compiled PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
