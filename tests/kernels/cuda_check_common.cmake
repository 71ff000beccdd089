# Shared by the nvcc-report checks (check_stack_frames.cmake, check_grid_waits.cmake), included
# with ARCHS and INCLUDES set as both take them.

# nvcc's flags: the base ones, then one target per architecture in ARCHS ("90", "90-real", ...)
# with code=<CODE>_<arch> (sm: ptxas compiles it; compute: PTX only), then -I for INCLUDES.
function(iwb_cuda_check_flags out code)
  set(flags ${ARGN})
  foreach(arch IN LISTS ARCHS)
    string(REGEX REPLACE "-.*" "" arch "${arch}")  # 90-real, 90-virtual
    list(APPEND flags "--generate-code=arch=compute_${arch},code=${code}_${arch}")
  endforeach()
  list(REMOVE_DUPLICATES flags)
  foreach(dir IN LISTS INCLUDES)
    list(APPEND flags "-I${dir}")
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# The end of a check: nothing checked (the tool's output changed?) or failures are fatal, else a
# status line.
function(iwb_cuda_check_report checked failures none_message failure_message ok_message)
  if(checked EQUAL 0)
    message(FATAL_ERROR "${none_message}")
  endif()
  if(failures)
    message(FATAL_ERROR "${failure_message}:\n${failures}")
  endif()
  message(STATUS "${ok_message}")
endfunction()
