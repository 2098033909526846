# CUDA 13 ships CCCL (CUB, Thrust, libcu++) under <toolkit>/include/cccl. nvcc finds it on its
# own; a plain C++ compiler compiling fusex's host-only parts does not, and older CMake versions'
# CUDA::cudart does not name that folder. Add it to a target's interface when it exists.
function(fusex_add_cccl_include target)
  foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${_dir}/cccl/cuda/std/tuple")
      target_include_directories(${target} SYSTEM INTERFACE "$<BUILD_INTERFACE:${_dir}/cccl>")
      return()
    endif()
  endforeach()
endfunction()
