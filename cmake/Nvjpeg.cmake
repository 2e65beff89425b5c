# hdmlp._nvjpeg: the GPU's batched JPEG decoder (cpp/src/device/, python/nvjpeg/, hdmlp/nvjpeg.py).
#
# Built only where nvJPEG is found at build time, so that a machine without CUDA builds hdmlp as
# before and hdmlp._core never links CUDA:
#   - HDMLP_NVJPEG_ROOT: a folder with include/nvjpeg.h (and the CUDA runtime's headers it includes)
#     and lib/libnvjpeg.so.13, such as the nvidia-nvjpeg, nvidia-cuda-runtime and nvidia-cuda-crt
#     wheels unpacked together (their nvidia/cu13 folder; docs/gpu.md);
#   - else the CUDA toolkit (find_package(CUDAToolkit): nvcc on the PATH, CUDAToolkit_ROOT or
#     /usr/local/cuda).
# HDMLP_NVJPEG: AUTO builds it where found, ON fails the configure where not, OFF never builds it.
set(HDMLP_NVJPEG "AUTO" CACHE STRING "Build hdmlp._nvjpeg (the GPU's JPEG decoder): AUTO, ON or OFF")
set(HDMLP_NVJPEG_ROOT "" CACHE PATH "A folder with include/nvjpeg.h and lib/libnvjpeg.so.13 (else the CUDA toolkit)")

if(NOT HDMLP_NVJPEG STREQUAL "OFF" AND NOT HDMLP_SANITIZE)
  unset(hdmlp_nvjpeg_include)
  unset(hdmlp_nvjpeg_library)
  if(HDMLP_NVJPEG_ROOT)
    find_path(hdmlp_nvjpeg_include nvjpeg.h PATHS ${HDMLP_NVJPEG_ROOT}/include NO_DEFAULT_PATH NO_CACHE)
    find_file(hdmlp_nvjpeg_library NAMES libnvjpeg.so.13 libnvjpeg.so.12 libnvjpeg.so
              PATHS ${HDMLP_NVJPEG_ROOT}/lib ${HDMLP_NVJPEG_ROOT}/lib64 NO_DEFAULT_PATH NO_CACHE)
  else()
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND TARGET CUDA::nvjpeg)
      set(hdmlp_nvjpeg_include ${CUDAToolkit_INCLUDE_DIRS})
      set(hdmlp_nvjpeg_library CUDA::nvjpeg)
    endif()
  endif()
  if(hdmlp_nvjpeg_include AND hdmlp_nvjpeg_library)
    message(STATUS "hdmlp._nvjpeg: building with nvJPEG from ${hdmlp_nvjpeg_include}")
    pybind11_add_module(_nvjpeg MODULE ${CMAKE_CURRENT_SOURCE_DIR}/python/nvjpeg/module.cc
                        ${CMAKE_CURRENT_SOURCE_DIR}/cpp/src/device/nvjpeg_batch_decoder.cc)
    target_include_directories(_nvjpeg PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cpp/include)
    target_include_directories(_nvjpeg SYSTEM PRIVATE ${hdmlp_nvjpeg_include})
    target_link_libraries(_nvjpeg PRIVATE ${hdmlp_nvjpeg_library})
    target_compile_options(_nvjpeg PRIVATE -Wall -Wextra)
    if(NOT hdmlp_nvjpeg_library STREQUAL "CUDA::nvjpeg")
      get_filename_component(hdmlp_nvjpeg_dir ${hdmlp_nvjpeg_library} DIRECTORY)
    else()
      set(hdmlp_nvjpeg_dir ${CUDAToolkit_LIBRARY_DIR})
    endif()
    # Found where it was built; elsewhere hdmlp/nvjpeg.py looks for libnvjpeg.so.13 (docs/gpu.md).
    set_target_properties(_nvjpeg PROPERTIES INSTALL_RPATH "${hdmlp_nvjpeg_dir}" BUILD_RPATH "${hdmlp_nvjpeg_dir}")
    install(TARGETS _nvjpeg DESTINATION hdmlp)
  elseif(HDMLP_NVJPEG STREQUAL "ON")
    message(FATAL_ERROR "HDMLP_NVJPEG=ON, but nvJPEG was not found: install the CUDA toolkit, or set "
                        "HDMLP_NVJPEG_ROOT to a folder with include/nvjpeg.h and lib/libnvjpeg.so.13 (docs/gpu.md)")
  else()
    message(STATUS "hdmlp._nvjpeg: nvJPEG not found (no CUDA toolkit, no HDMLP_NVJPEG_ROOT): not built; "
                   "ImgDecode(device=...) decodes with torchvision's decode_jpeg")
  endif()
endif()
