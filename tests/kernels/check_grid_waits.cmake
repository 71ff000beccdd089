# ctest -R kernel_grid_waits: compiles every CUDA source to PTX for the build's architectures and
# fails when a kernel (.entry) has no griddepcontrol.wait. With programmatic dependent launch
# (kernels/cuda/cuda_common.cuh) a kernel may start while the one before it still runs; only
# its wait_for_prior_grids makes its reads and writes safe, and a kernel without it would race
# on a GPU only. The CPU emulation checks the kernels its tests launch; this checks them all.
#   cmake -DNVCC=... -DARCHS=90 -DINCLUDES="a;b" -DSOURCES="x.cu;y.cu" -DWORK=dir -P check_grid_waits.cmake
include(${CMAKE_CURRENT_LIST_DIR}/cuda_check_common.cmake)
list(GET ARCHS 0 ARCHS)  # one PTX a source: -o takes one file
iwb_cuda_check_flags(flags compute -std=c++17 -O2 -DNDEBUG -DIWB_HAVE_CUDA=1 -ptx)
file(MAKE_DIRECTORY "${WORK}")
set(checked 0)
set(failures "")
foreach(source IN LISTS SOURCES)
  get_filename_component(name "${source}" NAME_WE)
  set(ptx "${WORK}/${name}.ptx")
  execute_process(COMMAND "${NVCC}" ${flags} "${source}" -o "${ptx}" RESULT_VARIABLE status ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "nvcc failed on ${source}:\n${err}")
  endif()
  file(READ "${ptx}" text)
  # PTX ends its statements with ';', CMake's list separator, and brackets group list items.
  string(REPLACE ";" "," text "${text}")
  string(REPLACE "[" "(" text "${text}")
  string(REPLACE "]" ")" text "${text}")
  string(REPLACE "#" " " text "${text}")  # the entry marker below (PTX predicates use '@')
  # Each kernel's PTX starts at ".entry NAME(" and runs to the next entry (or the end).
  string(REPLACE ".entry " "\n#ENTRY#" text "${text}")
  string(REGEX MATCHALL "#ENTRY#[^#]*" entries "${text}")
  foreach(entry IN LISTS entries)
    string(REGEX MATCH "^#ENTRY#([A-Za-z0-9_$]+)" _ "${entry}")
    set(kernel "${CMAKE_MATCH_1}")
    math(EXPR checked "${checked} + 1")
    string(FIND "${entry}" "griddepcontrol.wait" at)
    if(at EQUAL -1)
      string(APPEND failures "  ${kernel} (${name}.cu)\n")
    endif()
  endforeach()
endforeach()
iwb_cuda_check_report("${checked}" "${failures}" "no kernel entry in the PTX of ${SOURCES}: did nvcc's output change?"
                      "kernels without griddepcontrol.wait (call cuda_detail::wait_for_prior_grids first)"
                      "${checked} kernels, each with griddepcontrol.wait")
