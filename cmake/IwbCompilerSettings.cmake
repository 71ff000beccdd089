# Warnings, ccache and sanitizers shared by every target of the project.
find_program(IWB_CCACHE ccache)
if(IWB_CCACHE)
  set(CMAKE_C_COMPILER_LAUNCHER "${IWB_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${IWB_CCACHE}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${IWB_CCACHE}")
endif()

add_library(iwb_warnings INTERFACE)
target_compile_options(iwb_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)

if(IWB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
