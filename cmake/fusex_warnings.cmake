# Warning flags for fusex's own targets (tests, examples, benchmarks): never for consumers.
function(fusex_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
  # Sanitizer builds (FUSEX_SANITIZE, host code only): see docs/reliability.md. GCC documents that
  # sanitizer instrumentation makes -Wmaybe-uninitialized report false positives (here: inside
  # libstdc++'s <regex>, pulled in by Catch2), so that one warning is off in these builds only.
  if(FUSEX_SANITIZE)
    list(JOIN FUSEX_SANITIZE "," _fusex_san)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_fusex_san} -fno-sanitize-recover=all -fno-omit-frame-pointer -Wno-maybe-uninitialized>)
    target_link_options(${target} PRIVATE $<$<LINK_LANGUAGE:CXX>:-fsanitize=${_fusex_san}>)
  endif()
endfunction()

# Flags fusex's own CUDA programs use: extended lambdas for fusex::map examples and tests.
function(fusex_cuda_program target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>)
  fusex_target_warnings(${target})
endfunction()
