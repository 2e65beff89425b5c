# hdmlp links no MPI library. Its MPI calls (cpp/mpi/mpi_module.c) are built once per MPI ABI
# into small modules, ${CMAKE_BINARY_DIR}/_mpi/<abi>.so (installed as hdmlp/_mpi/<abi>.so), and
# the core loads the site's libmpi and the matching module at run time
# (cpp/include/hdmlp/transport/mpi_fabric.h). A module needs only its ABI's header:
#
#   openmpi  Open MPI's mpi.h (4.x or 5.x)                       HDMLP_OPENMPI_INCLUDE_DIR
#   mpich    MPICH's mpi.h (3.x to 5.x; also Intel MPI's,          HDMLP_MPICH_INCLUDE_DIR
#            Cray MPICH's, MVAPICH's: the same ABI)
#   mpiabi   the MPI 5.0 standard ABI's mpi_abi.h                  HDMLP_MPI_ABI_INCLUDE_DIR
#            (MPICH 4.3 and later, the PyPI mpich wheel)
#
# Each folder may be given; otherwise the MPI compiler wrapper's (FindMPI) and the usual
# Debian/Fedora folders are looked in, and each mpi.h found goes to the ABI its content names.
# At least one ABI is needed (hdmlp_require(... mpi)). Sets HDMLP_MPI_ABIS (the ABIs found) and
# HDMLP_MPI_INCLUDE_<abi>; hdmlp_add_mpi_modules() makes the targets (HDMLP_MPI_MODULE_TARGETS).

set(HDMLP_OPENMPI_INCLUDE_DIR "" CACHE PATH "Folder of Open MPI's mpi.h (for hdmlp/_mpi/openmpi.so)")
set(HDMLP_MPICH_INCLUDE_DIR "" CACHE PATH "Folder of MPICH's mpi.h (for hdmlp/_mpi/mpich.so)")
set(HDMLP_MPI_ABI_INCLUDE_DIR "" CACHE PATH "Folder of the MPI standard ABI's mpi_abi.h (for hdmlp/_mpi/mpiabi.so)")

# The ABI of the mpi.h in dir: "openmpi", "mpich" or "" (none there, or another MPI).
function(_hdmlp_mpi_header_abi dir out)
  set(abi "")
  if(EXISTS "${dir}/mpi.h")
    file(STRINGS "${dir}/mpi.h" defines REGEX "#[ \t]*define[ \t]+(OMPI_MAJOR_VERSION|MPICH_VERSION|I_MPI_VERSION)[ \t]")
    if(defines MATCHES "OMPI_MAJOR_VERSION")
      set(abi openmpi)
    elseif(defines MATCHES "MPICH_VERSION|I_MPI_VERSION")
      set(abi mpich)
    endif()
  endif()
  set(${out} "${abi}" PARENT_SCOPE)
endfunction()

macro(hdmlp_find_mpi_headers)
  set(HDMLP_MPI_DETAIL "")
  set(HDMLP_MPI_INCLUDE_openmpi "${HDMLP_OPENMPI_INCLUDE_DIR}")
  set(HDMLP_MPI_INCLUDE_mpich "${HDMLP_MPICH_INCLUDE_DIR}")
  set(HDMLP_MPI_INCLUDE_mpiabi "${HDMLP_MPI_ABI_INCLUDE_DIR}")
  foreach(_abi openmpi mpich)
    if(HDMLP_MPI_INCLUDE_${_abi})
      _hdmlp_mpi_header_abi("${HDMLP_MPI_INCLUDE_${_abi}}" _found)
      if(NOT _found STREQUAL _abi)
        message(FATAL_ERROR "HDMLP_${_abi}_INCLUDE_DIR: ${HDMLP_MPI_INCLUDE_${_abi}} holds no ${_abi} mpi.h")
      endif()
    endif()
  endforeach()
  if(HDMLP_MPI_INCLUDE_mpiabi AND NOT EXISTS "${HDMLP_MPI_INCLUDE_mpiabi}/mpi_abi.h")
    message(FATAL_ERROR "HDMLP_MPI_ABI_INCLUDE_DIR: ${HDMLP_MPI_INCLUDE_mpiabi} holds no mpi_abi.h")
  endif()
  # Candidate folders: the MPI compiler wrapper's, then the distributions' usual places.
  set(_dirs "")
  # Open MPI's runtime without its development files (openmpi-bin without libopenmpi-dev, as on
  # many GPU images) has an mpicc whose include folder lacks mpi.h; FindMPI would then stop with a
  # hard error of its own, so the header is looked for first.
  find_program(HDMLP_MPICC NAMES mpicc)
  set(_wrapper_ok ON)
  if(HDMLP_MPICC)
    execute_process(COMMAND ${HDMLP_MPICC} -showme:incdirs OUTPUT_VARIABLE _incdirs ERROR_QUIET
                    RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0)  # Open MPI's wrapper
      separate_arguments(_incdirs)
      set(_wrapper_ok OFF)
      foreach(_dir IN LISTS _incdirs)
        if(EXISTS "${_dir}/mpi.h")
          set(_wrapper_ok ON)
        endif()
      endforeach()
      if(NOT _wrapper_ok)
        set(HDMLP_MPI_DETAIL "${HDMLP_MPICC} is there but not mpi.h: Open MPI's runtime without its development files")
      endif()
    endif()
  endif()
  if(_wrapper_ok AND NOT (HDMLP_MPI_INCLUDE_openmpi AND HDMLP_MPI_INCLUDE_mpich))
    find_package(MPI QUIET COMPONENTS C)
    list(APPEND _dirs ${MPI_C_INCLUDE_DIRS})
  endif()
  # CMAKE_DISABLE_FIND_PACKAGE_MPI=ON: only the folders given (as for every library, none is looked for).
  if(NOT CMAKE_DISABLE_FIND_PACKAGE_MPI)
    set(_arch "${CMAKE_LIBRARY_ARCHITECTURE}")
    foreach(_dir /usr/lib/${_arch}/openmpi/include /usr/include/${_arch}/mpich /usr/lib/${_arch}/mpich/include
                 /usr/include/openmpi-${CMAKE_SYSTEM_PROCESSOR} /usr/include/mpich-${CMAKE_SYSTEM_PROCESSOR})
      list(APPEND _dirs "${_dir}")
    endforeach()
  endif()
  foreach(_dir IN LISTS _dirs)
    _hdmlp_mpi_header_abi("${_dir}" _found)
    if(_found AND NOT HDMLP_MPI_INCLUDE_${_found})
      set(HDMLP_MPI_INCLUDE_${_found} "${_dir}")
    endif()
    if(NOT HDMLP_MPI_INCLUDE_mpiabi AND EXISTS "${_dir}/mpi_abi.h")
      set(HDMLP_MPI_INCLUDE_mpiabi "${_dir}")
    endif()
  endforeach()
  set(HDMLP_MPI_ABIS "")
  set(_report "")
  foreach(_abi openmpi mpich mpiabi)
    if(HDMLP_MPI_INCLUDE_${_abi})
      list(APPEND HDMLP_MPI_ABIS ${_abi})
      string(APPEND _report " ${_abi} (${HDMLP_MPI_INCLUDE_${_abi}})")
    else()
      string(APPEND _report " ${_abi} (no header: not built)")
    endif()
  endforeach()
  message(STATUS "hdmlp MPI modules:${_report}")
endmacro()

function(hdmlp_add_mpi_modules)
  set(targets "")
  foreach(abi IN LISTS HDMLP_MPI_ABIS)
    set(t hdmlp_mpi_${abi})
    add_library(${t} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/cpp/mpi/mpi_module.c)
    target_include_directories(${t} BEFORE PRIVATE ${HDMLP_MPI_INCLUDE_${abi}} ${CMAKE_CURRENT_SOURCE_DIR}/cpp/include)
    if(abi STREQUAL "mpiabi")
      target_compile_definitions(${t} PRIVATE HDMLP_MPI_STANDARD_ABI=1)
    endif()
    target_compile_options(${t} PRIVATE -Wall -Wextra)
    set_target_properties(${t} PROPERTIES PREFIX "" OUTPUT_NAME ${abi} SUFFIX ".so" C_STANDARD 11
                          C_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/_mpi)
    if(HDMLP_PYTHON_HEADERS AND CMAKE_STRIP)  # the wheel's build (scripts/wheels/build.sh)
      add_custom_command(TARGET ${t} POST_BUILD COMMAND ${CMAKE_STRIP} --strip-unneeded $<TARGET_FILE:${t}>)
    endif()
    if(HDMLP_BUILD_PYTHON AND NOT HDMLP_PYTHON_HEADERS)
      install(TARGETS ${t} LIBRARY DESTINATION hdmlp/_mpi)
    endif()
    list(APPEND targets ${t})
  endforeach()
  set(HDMLP_MPI_MODULE_TARGETS ${targets} PARENT_SCOPE)
endfunction()
