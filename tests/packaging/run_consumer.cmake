# Runs one packaging check as a real consumer would: cmake -P run_consumer.cmake with
#   MODE          find_package | add_subdirectory | fetchcontent | fetchcontent_git | conan
#   SOURCE_DIR    fusex's source tree (for fetchcontent_git: a git checkout; README.md's
#                 FetchContent snippet gives the GIT_TAG)
#   WORK_DIR      scratch folder, wiped first
#   GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CUDA_COMPILER, CUDA_HOST_COMPILER, CUDA_ARCHITECTURES,
#   BUILD_TYPE    passed on to every project configured here, so consumers build like the parent
#   VERSION       the version fusex's headers must report
#   EXPECT_MATMUL 1 when fusex defines fusex_matmul: consumers must then see fusex::matmul
#   CONAN         the conan executable (MODE conan)
#   GIT           the git executable (MODE fetchcontent_git)
#   HOST_COMPILER when set, the consumer's C++ compiler and CUDA host compiler (e.g. clang++)
# Consumers compile their own code with warnings as errors (-Wall -Wextra -Werror, and nvcc's
# -Werror=all-warnings), as many users do: a warning that fusex's headers cause in a consumer's
# translation unit fails the check.
# A check that cannot run here prints "packaging <mode>: SKIPPED: <why>" (CTest's
# SKIP_REGULAR_EXPRESSION reports it as skipped).
# Each step's output goes to a log that is printed only when the step fails.
cmake_minimum_required(VERSION 3.25)

foreach(_v MODE SOURCE_DIR WORK_DIR CUDA_COMPILER VERSION)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: ${_v} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

if(HOST_COMPILER)
  set(CXX_COMPILER "${HOST_COMPILER}")
  set(CUDA_HOST_COMPILER "${HOST_COMPILER}")
endif()

# Options every configure step gets.
set(_common -Wno-dev "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}")
if(GENERATOR)
  list(APPEND _common -G "${GENERATOR}")
endif()
foreach(_pair "MAKE_PROGRAM;CMAKE_MAKE_PROGRAM" "CXX_COMPILER;CMAKE_CXX_COMPILER"
              "CUDA_HOST_COMPILER;CMAKE_CUDA_HOST_COMPILER" "CUDA_ARCHITECTURES;CMAKE_CUDA_ARCHITECTURES"
              "BUILD_TYPE;CMAKE_BUILD_TYPE")
  list(GET _pair 0 _in)
  list(GET _pair 1 _out)
  if(NOT "${${_in}}" STREQUAL "")
    list(APPEND _common "-D${_out}=${${_in}}")
  endif()
endforeach()

# step(<name> COMMAND...): runs the command, logs to WORK_DIR/<name>.log, stops on failure.
function(step name)
  string(TIMESTAMP _t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  string(TIMESTAMP _t1 "%s")
  math(EXPR _dt "${_t1} - ${_t0}")
  file(WRITE "${WORK_DIR}/${name}.log" "${_out}")
  if(NOT _rc EQUAL 0)
    list(JOIN ARGN " " _cmd)
    message(FATAL_ERROR "packaging ${MODE}: step '${name}' failed (${_rc}):\n  ${_cmd}\n${_out}")
  endif()
  message(STATUS "packaging ${MODE}: ${name} ok (${_dt} s)")
  set(step_output "${_out}" PARENT_SCOPE)
endfunction()

set(_consumer "${CMAKE_CURRENT_LIST_DIR}/consumer")
set(_consumer_args ${_common} "-DFUSEX_CONSUME=${MODE}" "-DFUSEX_EXPECTED_VERSION=${VERSION}")
if(EXPECT_MATMUL)
  list(APPEND _consumer_args -DFUSEX_EXPECT_MATMUL=ON)
endif()
# A fusex::compiled program is built and run where the target comes from a different place: the
# installed config package and the source tree's CMakeLists.txt (FetchContent and the clang
# routes get it the same way as add_subdirectory; they check only that it exists, to keep the
# test build short). The Conan route has its own in test_package.
set(_build_compiled OFF)
if(MODE STREQUAL "find_package" OR (MODE STREQUAL "add_subdirectory" AND NOT HOST_COMPILER))
  set(_build_compiled ON)
endif()
list(APPEND _consumer_args -DFUSEX_BUILD_COMPILED_CONSUMER=${_build_compiled})

if(MODE STREQUAL "find_package")
  # A fresh install of fusex alone (no tests, examples or benchmarks), as a user would make one.
  set(_prefix "${WORK_DIR}/prefix")
  step(fusex-configure ${CMAKE_COMMAND} ${_common} -S "${SOURCE_DIR}" -B "${WORK_DIR}/fusex-build"
       -DFUSEX_BUILD_TESTS=OFF -DFUSEX_BUILD_EXAMPLES=OFF -DFUSEX_BUILD_BENCHMARKS=OFF -DFUSEX_INSTALL=ON)
  step(fusex-install ${CMAKE_COMMAND} --install "${WORK_DIR}/fusex-build" --prefix "${_prefix}")
  # The config package must compute machine-specific paths (the CUDA Toolkit's) when it is found,
  # not carry the ones of the machine it was installed from.
  get_filename_component(_toolkit "${CUDA_COMPILER}" DIRECTORY)
  get_filename_component(_toolkit "${_toolkit}" DIRECTORY)
  get_filename_component(_toolkit_real "${_toolkit}" REALPATH)
  file(GLOB _config_files "${_prefix}/share/cmake/fusex/*.cmake")
  if(NOT _config_files)
    message(FATAL_ERROR "packaging ${MODE}: no config package under ${_prefix}/share/cmake/fusex")
  endif()
  foreach(_f IN LISTS _config_files)
    file(READ "${_f}" _text)
    foreach(_baked "${SOURCE_DIR}" "${WORK_DIR}" "${_toolkit}/" "${_toolkit_real}/")
      string(FIND "${_text}" "${_baked}" _at)
      if(NOT _at EQUAL -1)
        message(FATAL_ERROR "packaging ${MODE}: ${_f} contains the path '${_baked}'")
      endif()
    endforeach()
  endforeach()
  if(NOT EXISTS "${_prefix}/include/fusex/version.hpp")
    message(FATAL_ERROR "packaging ${MODE}: headers not installed under ${_prefix}/include")
  endif()
  list(APPEND _consumer_args "-DCMAKE_PREFIX_PATH=${_prefix}")
elseif(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "fetchcontent")
  list(APPEND _consumer_args "-DFUSEX_SOURCE_DIR=${SOURCE_DIR}")
elseif(MODE STREQUAL "fetchcontent_git")
  # README's FetchContent snippet, exactly: GIT_REPOSITORY (here a file:// URL) and README's GIT_TAG.
  file(READ "${SOURCE_DIR}/README.md" _readme)
  string(REGEX MATCH "FetchContent_Declare\\(fusex[^)]*" _snippet "${_readme}")
  if(NOT _snippet)
    message(FATAL_ERROR "packaging ${MODE}: README.md has no FetchContent_Declare(fusex ...) snippet")
  endif()
  if(NOT _snippet MATCHES "GIT_REPOSITORY" OR NOT _snippet MATCHES "GIT_TAG[ \t]+([^ \t\n)#]+)")
    message(FATAL_ERROR "packaging ${MODE}: README.md's FetchContent snippet is not GIT_REPOSITORY + "
      "GIT_TAG, the form this check tests:\n${_snippet}")
  endif()
  set(_tag "${CMAKE_MATCH_1}")
  message(STATUS "packaging ${MODE}: README's GIT_TAG is '${_tag}'")
  if(NOT GIT)
    message(FATAL_ERROR "packaging ${MODE}: GIT is not set")
  endif()
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _top ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(_src_real "${SOURCE_DIR}" REALPATH)
  if(_rc EQUAL 0)
    get_filename_component(_top "${_top}" REALPATH)
  endif()
  if(NOT _rc EQUAL 0 OR NOT _top STREQUAL _src_real)
    message(STATUS "packaging ${MODE}: SKIPPED: ${SOURCE_DIR} is not a git checkout (e.g. a source "
      "archive or a Conan source copy), so there is no repository to fetch from")
    return()
  endif()
  # README's tag must name something in fusex's repository: a branch (local, or fetched from a
  # remote), a tag or a commit. A tag that does not exist is what this check is for.
  set(_found "")
  foreach(_ref "refs/heads/${_tag}" "refs/tags/${_tag}" "refs/remotes/origin/${_tag}" "${_tag}")
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --verify -q "${_ref}^{commit}"
                    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(_found "${_ref}")
      break()
    endif()
  endforeach()
  if(NOT _found)
    # A checkout with no branch at all (a detached CI checkout of one commit) cannot tell a missing
    # branch from a wrong one: skip there rather than fail for the checkout's sake.
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" for-each-ref --count=1 refs/heads refs/remotes
                    OUTPUT_VARIABLE _any_branch ERROR_QUIET)
    if(NOT _any_branch)
      message(STATUS "packaging ${MODE}: SKIPPED: ${SOURCE_DIR} has no branches (a detached checkout), so README's "
        "GIT_TAG '${_tag}' cannot be checked there")
      return()
    endif()
    message(FATAL_ERROR "packaging ${MODE}: README's GIT_TAG '${_tag}' is no branch, tag or commit of "
      "${SOURCE_DIR}: a user following README would get an error from FetchContent. (In a checkout "
      "that lacks the branch, e.g. a detached CI checkout, fetch it: git fetch origin ${_tag}.)")
  endif()
  # The repository fetched from: a bare one whose README tag points at the commit under test (HEAD),
  # so that this check builds the sources being tested, through README's exact declaration. For a
  # commit hash as the tag, the whole history is fetched and the tag itself is checked out.
  set(_repo "${WORK_DIR}/fusex.git")
  step(git-init "${GIT}" init --quiet --bare "${_repo}")
  if(_tag MATCHES "^[0-9a-f]+$" AND _found STREQUAL _tag)
    step(git-fetch "${GIT}" -C "${_repo}" fetch --quiet "${SOURCE_DIR}" "+refs/heads/*:refs/heads/*" "+HEAD:refs/heads/fusex-under-test")
  else()
    step(git-fetch "${GIT}" -C "${_repo}" fetch --quiet "${SOURCE_DIR}" "+HEAD:refs/heads/${_tag}")
    step(git-head "${GIT}" -C "${_repo}" symbolic-ref HEAD "refs/heads/${_tag}")
    execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE _dirty ERROR_QUIET)
    if(_dirty)
      message(STATUS "packaging ${MODE}: note: this check builds the committed HEAD; uncommitted "
        "changes in ${SOURCE_DIR} are not part of it")
    endif()
  endif()
  list(APPEND _consumer_args "-DFUSEX_GIT_REPOSITORY=file://${_repo}" "-DFUSEX_GIT_TAG=${_tag}")
elseif(MODE STREQUAL "conan")
  if(NOT CONAN)
    message(FATAL_ERROR "packaging conan: CONAN is not set")
  endif()
  # A private Conan home: nothing from the user's cache or profiles leaks in, nothing is left in it.
  # The test_package reads the CUDA compiler and architectures from CUDACXX and CUDAARCHS.
  set(ENV{CONAN_HOME} "${WORK_DIR}/conan-home")
  set(ENV{CUDACXX} "${CUDA_COMPILER}")
  if(CUDA_ARCHITECTURES)
    set(ENV{CUDAARCHS} "${CUDA_ARCHITECTURES}")
  endif()
  if(CUDA_HOST_COMPILER)
    set(ENV{CUDAHOSTCXX} "${CUDA_HOST_COMPILER}")
  endif()
  if(CXX_COMPILER)
    set(ENV{CXX} "${CXX_COMPILER}")
  endif()
  step(conan-profile "${CONAN}" profile detect --force)
  # fusex requires nothing from Conan Center; without the remote, the check also runs offline.
  step(conan-remote "${CONAN}" remote remove conancenter)
  set(_conf)
  if(GENERATOR)
    list(APPEND _conf -c "tools.cmake.cmaketoolchain:generator=${GENERATOR}")
  endif()
  # A copy of test_package, so that its build folder lands under WORK_DIR, not in the source tree.
  file(COPY "${SOURCE_DIR}/test_package" DESTINATION "${WORK_DIR}" PATTERN build EXCLUDE)
  step(conan-create "${CONAN}" create "${SOURCE_DIR}" --build=missing
       --test-folder "${WORK_DIR}/test_package" ${_conf})
  # The test_package's program prints "fusex-test-package: fusex <version> OK ..." when it ran.
  string(REGEX MATCH "fusex-test-package: fusex [^ ]+ OK[^\n]*" _ran "${step_output}")
  if(NOT _ran)
    message(FATAL_ERROR "packaging conan: the test_package program did not run:\n${step_output}")
  endif()
  message(STATUS "packaging conan: ${_ran}")
  # And its fusex::matmul program (host backend and cuBLASLt; the device path with a GPU).
  string(REGEX MATCH "fusex-test-package-matmul: OK[^\n]*" _ran "${step_output}")
  if(NOT _ran)
    message(FATAL_ERROR "packaging conan: the test_package's fusex::matmul program did not run:\n${step_output}")
  endif()
  message(STATUS "packaging conan: ${_ran}")
  return()
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

step(consumer-configure ${CMAKE_COMMAND} ${_consumer_args} -S "${_consumer}" -B "${WORK_DIR}/consumer-build")
step(consumer-build ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer-build")
# run_program(<step name> <program> <label>): runs a consumer program and prints what it said.
function(run_program name program label)
  step(${name} "${WORK_DIR}/consumer-build/${program}")
  string(STRIP "${step_output}" _ran)
  message(STATUS "packaging ${MODE}${label}: ${_ran}")
endfunction()
run_program(consumer-run fusex_consumer "")
if(_build_compiled)
  run_program(consumer-compiled-run fusex_consumer_compiled " (fusex::compiled)")
endif()
if(EXPECT_MATMUL)
  run_program(consumer-matmul-run fusex_consumer_matmul "")
endif()
