# Warning flags for fusex's own targets (tests, examples, benchmarks): never for consumers.
function(fusex_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
endfunction()

# Flags fusex's own CUDA programs use: extended lambdas for fusex::map examples and tests.
function(fusex_cuda_program target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda>)
  fusex_target_warnings(${target})
endfunction()
