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

# ThreadSanitizer (scripts/tsan.sh): the engine worker, batching, the server and the UI tests
# labelled "tsan". Not with IWB_SANITIZE (ASan and TSan exclude each other).
if(IWB_TSAN)
  if(IWB_SANITIZE)
    message(FATAL_ERROR "IWB_TSAN and IWB_SANITIZE cannot be combined")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

if(IWB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# The libFuzzer build: coverage instrumentation everywhere, sanitizers, and libFuzzer's main
# linked into the fuzz targets only (tests/fuzz/CMakeLists.txt).
if(IWB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "IWB_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
