# Warnings, ccache and sanitizers shared by every target of the project.
# ccache with base_dir at the source root on every compile, not only scripts/build.sh's: cache
# keys then hold paths relative to the build folder, so a fresh clone elsewhere (CI) hits the
# objects a build by hand stored (`cmake --build` without the script's environment used to store
# them under absolute paths that no other clone matches). ccache 4.7 takes no settings on its
# command line, hence env.
find_program(IWB_CCACHE ccache)
find_program(IWB_ENV_PROGRAM env)
if(IWB_CCACHE)
  set(iwb_ccache_launcher "${IWB_CCACHE}")
  if(IWB_ENV_PROGRAM)
    set(iwb_ccache_launcher "${IWB_ENV_PROGRAM}" "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}" "CCACHE_NOHASHDIR=true"
                            "${IWB_CCACHE}")
  endif()
  set(CMAKE_C_COMPILER_LAUNCHER ${iwb_ccache_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${iwb_ccache_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${iwb_ccache_launcher})
endif()

# mold links the ~150 test executables (each with the engine's static libraries and their debug
# information) about three times faster than GNU ld: 191 -> 66 CPU seconds in a cold build
# (docs/build-times.md).
option(IWB_MOLD "Link with mold when it is installed (scripts/install-deps.sh installs it)" ON)
find_program(IWB_MOLD_PROGRAM mold)
if(IWB_MOLD AND IWB_MOLD_PROGRAM AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang"
   AND NOT (CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.1))
  add_link_options($<$<LINK_LANGUAGE:CXX>:-fuse-ld=mold>)
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
