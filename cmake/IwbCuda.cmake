# CUDA detection: on when nvcc is found (IWB_CUDA=AUTO), forced with IWB_CUDA=ON/OFF.
# Sets IWB_CUDA_ENABLED. The CUDA code is compiled even without a GPU; at run time the
# backend reports "no device" and the CPU backend is used.
set(IWB_CUDA_ENABLED OFF)
if(NOT IWB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(IWB_NVCC nvcc PATHS /usr/local/cuda/bin)
    if(IWB_NVCC)
      set(CMAKE_CUDA_COMPILER "${IWB_NVCC}")
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) is the GPU we test on; add more with -DCMAKE_CUDA_ARCHITECTURES.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 has no CUDA20 dialect flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(IWB_CUDA_ENABLED ON)
  elseif(IWB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "IWB_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
