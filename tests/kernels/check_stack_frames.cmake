# ctest -R kernel_stack_frames: compiles CUDA sources for the build's architectures with ptxas's
# report (-Xptxas -v) and fails when a kernel whose name matches PATTERN has a stack frame over
# MAX_BYTES. The grouped matvec kernels pick their part with constant indices because a kernel
# parameter indexed at run time is copied to local memory by every thread: 120 bytes of stack
# frame, and the one-matrix kernels that shared the struct ran up to twice as slow on an H200
# (2026-12-04). ptxas says so without a GPU.
#   cmake -DNVCC=... -DARCHS=90 -DINCLUDES="a;b" -DSOURCES="x.cu;y.cu" -DPATTERN=regex -DMAX_BYTES=16 -P check_stack_frames.cmake
include(${CMAKE_CURRENT_LIST_DIR}/cuda_check_common.cmake)
iwb_cuda_check_flags(flags sm -std=c++17 -O2 -DNDEBUG -DIWB_HAVE_CUDA=1 -Xptxas -v)
set(checked 0)
set(failures "")
foreach(source IN LISTS SOURCES)
  execute_process(COMMAND "${NVCC}" ${flags} -c "${source}" -o /dev/null
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "nvcc failed on ${source}:\n${err}")
  endif()
  # ptxas prints, per kernel: "Compiling entry function 'NAME' for 'sm_90'", then
  # "Function properties for NAME" and "N bytes stack frame, ...".
  string(REPLACE "\n" ";" lines "${out}${err}")
  set(kernel "")
  foreach(line IN LISTS lines)
    if(line MATCHES "Compiling entry function '([^']+)'")
      set(kernel "${CMAKE_MATCH_1}")
    elseif(kernel AND line MATCHES "([0-9]+) bytes stack frame")
      set(bytes "${CMAKE_MATCH_1}")
      if(kernel MATCHES "${PATTERN}")
        math(EXPR checked "${checked} + 1")
        if(bytes GREATER MAX_BYTES)
          string(APPEND failures "  ${bytes} bytes: ${kernel}\n")
        endif()
      endif()
      set(kernel "")
    endif()
  endforeach()
endforeach()
iwb_cuda_check_report("${checked}" "${failures}"
                      "no kernel matching '${PATTERN}' in ${SOURCES}: did ptxas's report change?"
                      "kernels with a stack frame over ${MAX_BYTES} bytes (a kernel parameter indexed at run time?)"
                      "${checked} kernels matching '${PATTERN}', each with at most ${MAX_BYTES} bytes of stack frame")
